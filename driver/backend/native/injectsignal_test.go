package native

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestAbandonedAllocationCallsOnce: a call whose argument is a string has
// gdb call malloc first, for the string's room in the process, and the
// other thread's SIGUSR1 (every 10 ms, driver/testdata/native/callsignal.c)
// abandons that call about half of the time: malloc runs to its end, and
// the function itself is never called (docs/facts.md, fact 145).
// Counted as made, heaptrack's injection (dlmopen, then heaptrack_inject,
// each given its path) failed with "No symbol heaptrack_inject", or left a
// recording that never started. Each of 20 calls of take("...") runs
// exactly once; heaptrack is injected once (its stream has one header)
// and stopped; the program runs on after gdb detaches, its signalling
// thread too (fact 147).
func TestAbandonedAllocationCallsOnce(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	tools, err := heaptrack.FindTools("")
	if err != nil {
		t.Fatal(err)
	}
	p := attachSignalled(t)
	for i := 1; i <= 20; i++ {
		if err := callVoid(p.ctx, p.c, `call (void) take("snapctl")`); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if n := p.value("taken"); n != i {
			t.Fatalf("after %d calls of take(), it ran %d times", i, n)
		}
	}
	stream := filepath.Join(t.TempDir(), "stream")
	for _, line := range tools.InjectCommands(stream) {
		if err := callVoid(p.ctx, p.c, line); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if err := callVoid(p.ctx, p.c, heaptrack.StopCommand); err != nil {
		t.Fatalf("%s: %v", heaptrack.StopCommand, err)
	}
	if n, err := dummyFrames(p.ctx, p.c); err != nil || len(n) != 0 {
		t.Errorf("gdb's calls left: %d %v, want none", n, err)
	}
	p.detachRunsOn()
	// heaptrack's stream begins with its version line, "v ...", once for
	// each heaptrack_inject.
	data, err := os.ReadFile(stream)
	if err != nil {
		t.Fatalf("heaptrack's stream: %v", err)
	}
	if n := strings.Count("\n"+string(data), "\nv "); n != 1 {
		t.Errorf("heaptrack's stream has %d version lines, want 1 (one injection):\n%.500s", n, data)
	}
}

// taskSyscalls lists each thread of process pid with its
// /proc/PID/task/TID/syscall line: the system call, its arguments, the
// stack pointer and the program counter.
func taskSyscalls(pid int) string {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var b strings.Builder
	for _, task := range tasks {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		fmt.Fprintf(&b, "%s: %s\n", task.Name(), strings.TrimSpace(string(data)))
	}
	return b.String()
}
