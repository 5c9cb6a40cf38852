package native_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// glibc's per-thread caches (tcaches) keep freed chunks marked in use:
// the native measurement reads every thread's tcache and counts them as
// free (tcache_bytes), so that in-use heap is what the program holds.

// chunk is the size of the chunk glibc's malloc(n) takes on x86-64.
func chunk(n int64) int64 {
	return max(32, (n+8+15)&^15)
}

// tcacheFigures are what driver/testdata/native/tcache.c leaves with
// workers threads, as it says: the bytes in the tcaches at its two stops,
// and the bytes of the blocks it keeps between them.
func tcacheFigures(workers int) (cached [2]int64, live int64) {
	for id := int64(0); id <= int64(workers); id++ {
		cached[0] += chunk(1000)
		for k := int64(0); k < 10; k++ {
			live += chunk(100 + 16*id + 8*k)
		}
		for s := int64(0); s < 6; s++ {
			cached[1] += (1 + (id+s)%7) * chunk(24+200*s)
		}
	}
	cached[1] += cached[0]
	return cached, live
}

// roundFigures are the mallinfo2() figures tcache.c printed, by round.
func roundFigures(t *testing.T, out string) [][2]int64 {
	t.Helper()
	var got [][2]int64
	for _, r := range regexp.MustCompile(`round \d+ uordblks (\d+) fordblks (\d+)`).FindAllStringSubmatch(out, -1) {
		u, _ := strconv.ParseInt(r[1], 10, 64)
		f, _ := strconv.ParseInt(r[2], 10, 64)
		got = append(got, [2]int64{u, f})
	}
	if len(got) != 2 {
		t.Fatalf("output:\n%s", out)
	}
	return got
}

// TestNativeTcache: with 4 workers parked (the arenas read from memory)
// and with main alone (mallinfo2() called), on both stop paths, each
// stop's tcache_bytes is exactly the chunks the program left in its
// tcaches; in-use heap is mallinfo2's less them, free heap mallinfo2's
// with them; and between the stops in-use heap grew by exactly the
// chunks the program kept.
func TestNativeTcache(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/tcache.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the tcaches cannot be found")
	}
	for _, workers := range []int{4, 0} {
		for _, p := range nativePaths {
			t.Run(fmt.Sprintf("%s/%d", p.name, workers), func(t *testing.T) {
				t.Parallel()
				m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("checkpoint", "checkpoint"), bin, strconv.Itoa(workers))
				if err != nil {
					t.Fatal(err)
				}
				checkTcache(t, m, out, workers)
			})
		}
	}
}

// checkTcache checks a run of tcache.c with workers threads: its two
// stops' tcache_bytes are exactly what the program left in its tcaches,
// in-use heap is mallinfo2's less them and free heap mallinfo2's with
// them, and between the stops in-use heap grew by exactly the chunks the
// program kept. No event.
func checkTcache(t *testing.T, m *runjson.Manifest, out string, workers int) {
	t.Helper()
	if counted(t, out, "calls") != 2 || len(m.Stops) != 2 {
		t.Fatalf("%d stops, events %+v, output:\n%s", len(m.Stops), m.Events, out)
	}
	for _, e := range m.Events {
		t.Errorf("event %+v", e)
	}
	cached, live := tcacheFigures(workers)
	seen := roundFigures(t, out)
	var inUse [2]int64
	for i, s := range m.Stops {
		mem := s.Memory
		if mem == nil || mem.HeapInUseBytes == nil || mem.HeapFreeBytes == nil || mem.TcacheBytes == nil {
			t.Fatalf("stop %d: memory %+v", s.Seq, mem)
		}
		inUse[i] = *mem.HeapInUseBytes
		got := fmt.Sprintf("tcache %d, in use %d, free %d", *mem.TcacheBytes, *mem.HeapInUseBytes, *mem.HeapFreeBytes)
		want := fmt.Sprintf("tcache %d, in use %d, free %d", cached[i], seen[i][0]-cached[i], seen[i][1]+cached[i])
		if got != want {
			t.Errorf("stop %d: %s; want %s (mallinfo2() in the program: uordblks %d, fordblks %d)", s.Seq, got, want, seen[i][0], seen[i][1])
		}
	}
	if d := inUse[1] - inUse[0]; d != live {
		t.Errorf("in-use heap grew by %d between the stops, want %d (the kept chunks)", d, live)
	}
}

// TestNativeTcacheStatic: a static program carries glibc, its tcache's
// symbol with it, and a TLS block of its own, the only one: with one
// thread (mallinfo2() called; a threaded static program's arenas are not
// read) its figures are as exact.
func TestNativeTcacheStatic(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/tcache.c", "-static")
	m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+nativePaths[0].bp("checkpoint", "checkpoint"), bin, "0")
	if err != nil {
		t.Fatal(err)
	}
	checkTcache(t, m, out, 0)
}

// TestNativeTcacheWithoutLibcSymbols: without libc's symbol table the
// tcaches cannot be found. A program with one thread is still measured
// (mallinfo2() is called) with the tcaches' chunks in use, as glibc
// counts them, and one tcache-not-subtracted event says so.
func TestNativeTcacheWithoutLibcSymbols(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/tcache.c")
	m, out, err := runNativeOut(t, driver.Options{}, "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\nbackend: native\nbreakpoints:\n  - name: checkpoint\n    location: checkpoint\n", bin, "0")
	if err != nil {
		t.Fatal(err)
	}
	if counted(t, out, "calls") != 2 || len(m.Stops) != 2 {
		t.Fatalf("%d stops, output:\n%s", len(m.Stops), out)
	}
	seen := roundFigures(t, out)
	for i, s := range m.Stops {
		mem := s.Memory
		if mem == nil || mem.HeapInUseBytes == nil || mem.TcacheBytes != nil || *mem.HeapInUseBytes != seen[i][0] || *mem.HeapFreeBytes != seen[i][1] {
			t.Errorf("stop %d: memory %+v; want mallinfo2's uordblks %d, fordblks %d and no tcache_bytes", s.Seq, mem, seen[i][0], seen[i][1])
		}
	}
	var events []string
	for _, e := range m.Events {
		events = append(events, string(e.Kind)+": "+e.Message)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "tcache-not-subtracted: glibc's per-thread caches cannot be found: no symbol table for libc (install Debian's libc6-dbg") || !strings.HasSuffix(events[0], "; the freed chunks they hold count as in-use heap") {
		t.Errorf("events %q", events)
	}
}
