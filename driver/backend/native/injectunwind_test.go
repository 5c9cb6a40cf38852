package native

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestInjectionMapsNoUnwindCache: heaptrack_inject hooks the allocation
// functions before it sets libunwind's cache up, and libunwind maps the
// new cache without its lock while the program's hooked threads unwind
// through the old one; in a program whose threads allocate, about one
// injection in 70 died of SIGSEGV inside libunwind (docs/facts.md, fact
// 151). snapctl's injection (heaptrack.InjectCommands) sets the cache up
// before the hooks go in, so that heaptrack's own setup finds it done and
// maps nothing. Into churn.c (five threads allocating without a pause,
// one starting a thread every millisecond), gdb with snapctl's agent
// makes the injection's calls: while heaptrack_inject runs, code of
// libunwind calls mmap not once (a breakpoint at mmap's first
// instruction counts the calls whose return address is in libunwind's
// code, and never stops). heaptrack records (its stream's header is
// written), stops, and the program runs on after gdb detaches.
func TestInjectionMapsNoUnwindCache(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	tools, err := heaptrack.FindTools("")
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.Build(t, "../../testdata/native/churn.c")
	pid := testenv.StartFixture(t, bin).Process.Pid
	testenv.WaitUntil(t, "the program's threads", 10*time.Second, 10*time.Millisecond, func() bool { return len(proc.Tasks(pid)) >= 7 })
	ctx, c, closeGDB := attachAgent(t, pid)

	stream := filepath.Join(t.TempDir(), "stream")
	cmds := tools.InjectCommands(stream)
	for _, line := range cmds[:len(cmds)-1] {
		if err := callVoid(ctx, c, line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	lo, hi := codeOf(t, pid, "libunwind.so")
	if _, err := c.Do(ctx, gdb.Console("set var $unwind_maps = 0")); err != nil {
		t.Fatal(err)
	}
	// The calls run on gdb's selected thread; the program's other
	// threads map memory of libunwind's too, for their own unwinding.
	caller := evaluateInt(t, ctx, c, "$_thread")
	ret := "*(unsigned long *) $sp"
	cond := fmt.Sprintf("$_thread == %d && %s >= %#x && %s < %#x && ($unwind_maps = $unwind_maps + 1) && 0", caller, ret, lo, ret, hi)
	r, err := c.Do(ctx, gdb.BreakInsert("-c", mi.Word(cond), "*mmap"))
	if err != nil {
		t.Fatal(err)
	}
	bp := r.String("bkpt.number")
	inject := cmds[len(cmds)-1]
	if err := callVoid(ctx, c, inject); err != nil {
		t.Fatalf("%s: %v", inject, err)
	}
	if n := evaluateInt(t, ctx, c, "$unwind_maps"); n != 0 {
		t.Errorf("libunwind called mmap %d times during heaptrack_inject, want none: heaptrack set its cache up with the hooks in", n)
	}
	if _, err := c.Do(ctx, gdb.BreakDelete(bp)); err != nil {
		t.Fatal(err)
	}
	if err := callVoid(ctx, c, heaptrack.StopCommand); err != nil {
		t.Fatalf("%s: %v", heaptrack.StopCommand, err)
	}
	if n, err := dummyFrames(ctx, c); err != nil || len(n) != 0 {
		t.Errorf("gdb's calls left: %d %v, want none", n, err)
	}
	if _, err := c.Do(ctx, gdb.Detach()); err != nil {
		t.Fatal(err)
	}
	closeGDB()
	if data, err := os.ReadFile(stream); err != nil || !strings.HasPrefix(string(data), "v ") {
		t.Errorf("heaptrack's stream (%v) does not begin with its version line:\n%.300s", err, data)
	}
	// The program runs on: its threads use 20 more clock ticks of CPU.
	from := proc.Stat(pid).CPU
	for deadline := testenv.NewDeadline(20 * time.Second); proc.Stat(pid).CPU < from+20; time.Sleep(10 * time.Millisecond) {
		if st := proc.Stat(pid); !st.Alive() || deadline.Passed() {
			t.Fatalf("the program after gdb detached: state %c, %d ticks of CPU since", st.State, st.CPU-from)
		}
	}
}

// codeOf is the address range of the executable mapping of the module
// of process pid whose path holds name.
func codeOf(t *testing.T, pid int, name string) (lo, hi uint64) {
	t.Helper()
	for _, m := range readMaps(pid) {
		if m.exec && strings.Contains(m.path, name) {
			return m.start, m.end
		}
	}
	t.Fatalf("no code of %s in process %d", name, pid)
	return 0, 0
}

// evaluateInt is the value of gdb expression expr.
func evaluateInt(t *testing.T, ctx context.Context, c *gdb.Conn, expr string) int {
	t.Helper()
	r, err := c.Do(ctx, gdb.Evaluate(expr))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(r.String("value"))
	if err != nil {
		t.Fatalf("%s: %q", expr, r.String("value"))
	}
	return n
}
