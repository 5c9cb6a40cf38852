package native

import (
	"bufio"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// callInProcess runs callStopped in a thread of its own, as stopLibrary
// does, and waits at most limit for it. No thread holds the fixture's
// lock.
func callInProcess(t *testing.T, pid int, fn uint64, p patience, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- callStopped(pid, fn, p, func(int) (bool, error) { return false, nil })
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		t.Fatalf("the call into process %d has not returned within %v", pid, limit)
		return nil
	}
}

// A call snapctl makes into a process whose tracer died (heaptrack_stop,
// by the guardian or snapctl) in a process left in a group stop (a
// SIGSTOP of gdb's that it had not collected, delivered once it was gone):
// the function needs another thread to run, as heaptrack_stop needs its
// timer thread and its lock, so the process is continued first; and a
// call that never returns ends at its deadline rather than holding the
// guardian for good, as it did the process's heaptrack stream.
func TestCallIntoStoppedProcess(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("calls into the process are made on x86-64 only")
	}
	cmd := exec.Command(testenv.Build(t, "../../testdata/native/callwait.c"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if line, _ := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("the fixture said %q", line)
	}
	pid := cmd.Process.Pid
	maps := readMaps(pid)
	waitTurn, forever := symbolAddr(t, pid, maps, "wait_turn"), symbolAddr(t, pid, maps, "forever")

	syscall.Kill(pid, syscall.SIGSTOP)
	for deadline := testenv.NewDeadline(10 * time.Second); !allStopped(pid); time.Sleep(time.Millisecond) {
		if deadline.Passed() {
			t.Fatal("the fixture did not stop")
		}
	}
	if err := callInProcess(t, pid, waitTurn, rescuePatience, 30*time.Second); err != nil {
		t.Fatalf("wait_turn in the stopped process: %v", err)
	}
	for _, tid := range proc.Tasks(pid) {
		if st := proc.Stat(tid).State; st == 'T' || st == 't' {
			t.Errorf("thread %d left stopped (%c)", tid, st)
		}
	}

	start := time.Now()
	// forever() runs (a usleep loop): its patience is the limit, as long
	// again on a machine loaded as this one. A patience shorter than
	// heaptrack_stop's keeps the test from holding one of the package's
	// turns idle for up to a minute under load.
	short := patience{Idle: time.Second, Limit: 2 * time.Second}
	err = callInProcess(t, pid, forever, short, testenv.Scaled(3*short.Limit))
	if err == nil || !strings.Contains(err.Error(), "did not return") {
		t.Errorf("a call that never returns: %v, want it ended at its deadline", err)
	}
	if d := time.Since(start); d > testenv.Scaled(2*short.Limit) {
		t.Errorf("a call that never returns ended after %v", d)
	}
	if !proc.Alive(pid) {
		t.Errorf("the fixture died")
	}
}

// TestRescueCallTakenBack: a call snapctl makes with ptrace (callFunc,
// once gdb is gone) into the main thread of a 5-thread program, of a
// function that sleeps past the call's patience (stuckcall.c's stuck(),
// until released): the call ends with an error, the thread's registers
// as before it, and once the thread is let go and the program released,
// the program runs on. Before this change the thread was let go still
// inside the function, whose return onto address 0 killed the process.
func TestRescueCallTakenBack(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("calls into the process are made on x86-64 only")
	}
	p := startStuckAlone(t)
	stuck := symbolAddr(t, p.pid, readMaps(p.pid), "stuck")
	type result struct {
		before, after syscall.PtraceRegs
		err           error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		var r result
		defer func() { done <- r }()
		if r.err = seize(p.pid); r.err != nil {
			return
		}
		defer syscall.PtraceDetach(p.pid)
		if r.err = syscall.PtraceGetRegs(p.pid, &r.before); r.err != nil {
			return
		}
		_, r.err = callFuncWithin(p.pid, shortPatience, stuck)
		if err := syscall.PtraceGetRegs(p.pid, &r.after); err != nil {
			r.err = fmt.Errorf("%v; reading the registers after: %v", r.err, err)
		}
	}()
	var r result
	select {
	case r = <-done:
	case <-p.ctx.Done():
		t.Fatal("the call has not ended")
	}
	if r.err == nil || !strings.Contains(r.err.Error(), "put back where it was") {
		t.Errorf("a call past its patience: %v, want it taken back", r.err)
	}
	if r.after != r.before {
		t.Errorf("the thread's registers after the call:\n%+v\nbefore:\n%+v", r.after, r.before)
	}
	p.livesOn()
}
