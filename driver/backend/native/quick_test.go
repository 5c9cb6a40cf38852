package native_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestNativeMeasuredBySnapctl: over MI, the agent measures the first stop
// and says where to read; the next stops, whose threads are the ones it
// named, snapctl measures itself (quick.go), and their figures are still
// exactly mallinfo2()'s in the program, with 8 threads in arenas of their
// own and chunks in every kind of bin, and each thread's tcache exactly
// what the program left in it. A thread started since the agent's
// reading, on a stack pthread_create allocated or on the program's own,
// is found by snapctl, its tcache too.
func TestNativeMeasuredBySnapctl(t *testing.T) {
	t.Parallel()
	arenasBin := testenv.Build(t, "../../testdata/native/arenas.c")
	if !libcDebugFile(t, arenasBin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas cannot be read")
	}
	mi := "backend: native\nbreakpoints:\n  - name: checkpoint\n    location: checkpoint\n    commands: [\"print 1\"]\n"
	t.Run("arenas", func(t *testing.T) {
		t.Parallel()
		m, out, err := runNativeOut(t, driver.Options{}, mi, arenasBin, "8", "6")
		if err != nil {
			t.Fatal(err)
		}
		checkArenasRounds(t, m, out, 6)
		if got := m.Native.StopsMeasuredBySnapctl; got != 5 {
			t.Errorf("%d stops measured by snapctl, want 5 (all but the agent's first)", got)
		}
		for i, st := range m.Stops {
			if mem := st.Memory; mem.RSSBytes <= 0 || mem.AnonRSSBytes <= 0 {
				t.Errorf("stop %d: resident %d, anonymous %d", i+1, mem.RSSBytes, mem.AnonRSSBytes)
			}
		}
	})
	t.Run("new threads", func(t *testing.T) {
		t.Parallel()
		bin := testenv.Build(t, "../../testdata/native/newthreads.c")
		m, out, err := runNativeOut(t, driver.Options{}, mi, bin)
		if err != nil {
			t.Fatal(err)
		}
		if counted(t, out, "calls") != 3 || len(m.Stops) != 3 {
			t.Fatalf("%d stops, events %+v, output:\n%s", len(m.Stops), m.Events, out)
		}
		for _, e := range m.Events {
			t.Errorf("event %+v", e)
		}
		if got := m.Native.StopsMeasuredBySnapctl; got != 2 {
			t.Errorf("%d stops measured by snapctl, want 2 (all but the agent's first)", got)
		}
		seen := regexp.MustCompile(`round (\d+) uordblks (\d+) fordblks (\d+)`).FindAllStringSubmatch(out, -1)
		if len(seen) != 3 {
			t.Fatalf("output:\n%s", out)
		}
		for i, cached := range []int64{0, 336, 336 + 672} {
			mem := m.Stops[i].Memory
			if mem == nil || mem.HeapInUseBytes == nil || mem.HeapFreeBytes == nil || mem.TcacheBytes == nil {
				t.Fatalf("stop %d: memory %+v", i+1, mem)
			}
			var used, free int64
			fmt.Sscan(seen[i][2]+" "+seen[i][3], &used, &free)
			got := fmt.Sprintf("tcache %d, in use %d, free %d", *mem.TcacheBytes, *mem.HeapInUseBytes, *mem.HeapFreeBytes)
			want := fmt.Sprintf("tcache %d, in use %d, free %d", cached, used-cached, free+cached)
			if got != want {
				t.Errorf("stop %d: %s; want %s", i+1, got, want)
			}
		}
	})
	t.Run("tcache", func(t *testing.T) {
		t.Parallel()
		bin := testenv.Build(t, "../../testdata/native/tcache.c")
		m, out, err := runNativeOut(t, driver.Options{}, mi, bin, "4")
		if err != nil {
			t.Fatal(err)
		}
		checkTcache(t, m, out, 4)
		if got := m.Native.StopsMeasuredBySnapctl; got != 1 {
			t.Errorf("%d stops measured by snapctl, want 1 (the second)", got)
		}
	})
}
