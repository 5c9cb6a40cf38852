package native

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/osthread"
	"github.com/snapctl/snapctl/internal/proc"
)

// When gdb is gone during snapctl attach --sites, heaptrack's library
// still records in the process and writes into snapctl's FIFO, which
// closes when snapctl ends: the library's next write would end the
// process with SIGPIPE (docs/facts.md, fact 68). snapctl then calls
// heaptrack_stop() in the process itself, as gdb would have, once its
// breakpoints are out: one thread, stopped with ptrace, is made to run the
// function and return to address 0, where its SIGSEGV stop ends the call,
// and its registers and vector state are put back. The call writes the library's last events into
// the FIFO, which snapctl still reads.

// ptrace requests and regset Go's syscall package has no name for.
const (
	ptraceGetRegset = 0x4204
	ptraceSetRegset = 0x4205
	ntX86Xstate     = 0x202
)

// stopLibrary calls heaptrack_stop() in process pid, where t finds the
// inject library and its lock. gdb must be gone and the breakpoints out:
// snapctl becomes the tracer of one thread for the call, and the others
// run.
func stopLibrary(pid int, t *heaptrack.Target) error {
	if runtime.GOARCH != "amd64" {
		return errors.New("calling into the process is known only on x86-64")
	}
	fn, err := symbolValue(t.Layout.Lib, "heaptrack_stop")
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	// ptrace requests come from the thread that attached, which ends
	// with them.
	osthread.Go(func() {
		done <- callStopped(pid, t.Base+fn, rescuePatience, func(tid int) (bool, error) {
			held, owner, err := t.Lock()
			return held && owner == tid, err
		})
	})
	return <-done
}

// symbolValue is the value of lib's dynamic symbol name.
func symbolValue(lib, name string) (uint64, error) {
	return elfsym.Value(lib, elfsym.Dynamic, name)
}

// callStopped calls the function at fn in a thread of process pid that
// holds no lock of the library's (holds says whether thread tid does),
// within patience p.
func callStopped(pid int, fn uint64, p patience, holds func(tid int) (bool, error)) error {
	// One thread runs the call; the others run on, as under gdb's own
	// calls: heaptrack_stop waits for the library's timer thread to end,
	// and for its lock. Not one that holds the lock itself. Threads left
	// in a group stop (a SIGSTOP of gdb's that it had not collected when
	// it died, delivered once it was gone) would never let it have them:
	// the process is continued first.
	continueStopped(pid)
	for _, tid := range proc.Tasks(pid) {
		if allBlocked(pid, tid) {
			// heaptrack's own timer thread blocks every signal:
			// heaptrack_stop joins that thread, and would abort in it.
			continue
		}
		if seize(tid) != nil {
			continue
		}
		held, err := holds(tid)
		if err != nil {
			syscall.PtraceDetach(tid)
			return err
		}
		if held {
			syscall.PtraceDetach(tid)
			continue
		}
		_, err = callFuncWithin(tid, p, fn)
		syscall.PtraceDetach(tid)
		return err
	}
	return fmt.Errorf("no thread of process %d could make the call", pid)
}

// allBlocked reports whether thread tid blocks every signal it can
// (1 to 31 but SIGKILL and SIGSTOP), as heaptrack's timer thread does.
func allBlocked(pid, tid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "SigBlk:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			const want = 0x7fffffff &^ (1<<(syscall.SIGKILL-1) | 1<<(syscall.SIGSTOP-1))
			return err == nil && mask&want == want
		}
	}
	return false
}

// callGap is how far below the stopped thread's stack pointer a call's
// stack begins: past the 128-byte red zone, as the agent's direct call
// (agent/calls.py, CALL_GAP). Both follow one description of the call
// (docs/design.md, "The call into a stopped thread").
const callGap = 256

// rescuePatience bounds a call snapctl makes with ptrace (callFunc): its
// functions (heaptrack_stop, sigaction, munmap) take no lock of the
// allocator's, and return in milliseconds on a quiet machine. The wait
// lasts while the thread makes progress, stretched by the machine's load
// as gdb's calls are (callPatience).
var rescuePatience = patience{Idle: 5 * time.Second, Limit: 10 * time.Second}

// callFunc runs the function at fn with up to three integer arguments in
// stopped thread tid until it returns, delivering the signals that come
// meanwhile, puts the thread back as it was and returns the function's
// result; within rescuePatience.
func callFunc(tid int, fn uint64, args ...uint64) (uint64, error) {
	return callFuncWithin(tid, rescuePatience, fn, args...)
}

// callFuncWithin is callFunc with the patience p. A call that spends it
// is interrupted (PTRACE_INTERRUPT: the thread was seized) and its
// thread put back as it was before the call, as one that returns is: the
// function does not go on running with 0 for its return address once
// snapctl has let the thread go. A signal of the program's that the
// thread stopped at instead stays pending for it.
func callFuncWithin(tid int, p patience, fn uint64, args ...uint64) (uint64, error) {
	var result uint64
	var regs syscall.PtraceRegs
	if err := syscall.PtraceGetRegs(tid, &regs); err != nil {
		return 0, fmt.Errorf("reading thread %d's registers: %w", tid, err)
	}
	xstate := make([]byte, 16384)
	iov := syscall.Iovec{Base: &xstate[0], Len: uint64(len(xstate))}
	if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceGetRegset, uintptr(tid), ntX86Xstate, uintptr(unsafe.Pointer(&iov)), 0, 0); e != 0 {
		return 0, fmt.Errorf("reading thread %d's vector state: %w", tid, e)
	}
	saved := regs
	defer func() {
		syscall.PtraceSetRegs(tid, &saved)
		syscall.Syscall6(syscall.SYS_PTRACE, ptraceSetRegset, uintptr(tid), ntX86Xstate, uintptr(unsafe.Pointer(&iov)), 0, 0)
	}()
	// Below the red zone, aligned as a call leaves it, with a return
	// address of 0 (docs/design.md, "The call into a stopped thread").
	sp := (regs.Rsp-callGap)&^15 - 8
	var zero [8]byte
	if _, err := syscall.PtracePokeData(tid, uintptr(sp), zero[:]); err != nil {
		return 0, fmt.Errorf("writing thread %d's stack: %w", tid, err)
	}
	regs.Rsp, regs.Rip, regs.Rax = sp, fn, 0
	argRegs := []*uint64{&regs.Rdi, &regs.Rsi, &regs.Rdx}
	for i, a := range args {
		*argRegs[i] = a
	}
	// A thread stopped in a system call must not restart it on the way.
	regs.Orig_rax = ^uint64(0)
	if err := syscall.PtraceSetRegs(tid, &regs); err != nil {
		return 0, fmt.Errorf("setting thread %d's registers: %w", tid, err)
	}
	watch := watchProgress(tid, tid, p)
	sig := 0
	for {
		if err := syscall.PtraceCont(tid, sig); err != nil {
			return 0, fmt.Errorf("running the call: %w", err)
		}
		var ws syscall.WaitStatus
		for polls := 1; ; polls++ {
			// Polled, so that a call that never returns (a lock that
			// never comes free) ends at its patience rather than
			// holding the caller for good.
			got, err := syscall.Wait4(tid, &ws, waitAll|syscall.WNOHANG, nil)
			if err != nil {
				return 0, err
			}
			if got == tid {
				break
			}
			if polls%20 == 0 {
				if why := watch.over(); why != "" {
					return interruptCall(tid, why)
				}
			}
			time.Sleep(time.Millisecond)
		}
		if !ws.Stopped() {
			return 0, fmt.Errorf("thread %d ended during the call", tid)
		}
		sig = 0
		switch s := ws.StopSignal(); {
		case s == syscall.SIGSEGV:
			var now syscall.PtraceRegs
			if err := syscall.PtraceGetRegs(tid, &now); err == nil && now.Rip == 0 {
				result = now.Rax
				return result, nil
			}
			return 0, errors.New("the call faulted")
		case ws.TrapCause() != 0 || s == syscall.SIGTRAP:
			// A ptrace event stop: nothing to deliver.
		default:
			sig = int(s) // the program's own signal, delivered
		}
	}
}

// interruptCall stops seized thread tid, which runs a call that spent
// its patience (why), so that its registers can be put back. The stop
// may be a signal of the program's rather than the interrupt's: that
// signal is sent to the thread again, to be taken once it runs on.
func interruptCall(tid int, why string) (uint64, error) {
	failed := fmt.Errorf("the call did not return (%s): its thread was put back where it was", why)
	if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceInterrupt, uintptr(tid), 0, 0, 0, 0); e != 0 {
		return 0, fmt.Errorf("the call did not return (%s), and its thread could not be stopped: %w", why, e)
	}
	var ws syscall.WaitStatus
	if got, err := waitInterrupted(tid, &ws); err != nil {
		return 0, fmt.Errorf("the call did not return (%s), and its thread could not be stopped: %w", why, err)
	} else if !got {
		return 0, failed // stopped, with no event to take
	}
	if !ws.Stopped() {
		return 0, fmt.Errorf("thread %d ended during the call", tid)
	}
	switch s := ws.StopSignal(); {
	case s == syscall.SIGSEGV:
		var now syscall.PtraceRegs
		if err := syscall.PtraceGetRegs(tid, &now); err == nil && now.Rip == 0 {
			return now.Rax, nil // it returned meanwhile
		}
		// The function's own fault, taken back with its registers.
	case ws.TrapCause() != 0 || s == syscall.SIGTRAP:
	default:
		if st, err := proc.Status(tid); err == nil {
			if tgid, err := strconv.Atoi(st["Tgid"]); err == nil {
				syscall.Tgkill(tgid, tid, s)
			}
		}
	}
	return 0, failed
}

// interruptWait bounds waitInterrupted on a quiet machine (stretched by
// the load).
const interruptWait = 2 * time.Second

// waitInterrupted waits for the stop that PTRACE_INTERRUPT asked of
// seized thread tid, and reports whether it took an event (ws). A
// blocking wait4 here once never returned in CI (TestKernelAttachSites,
// 8 minutes, in removeTrapHandler's call of munmap): every thread of the
// process was in a ptrace stop, and the kernel had no event of tid's to
// report (docs/facts.md, fact 152). So the wait is polled and bounded: a
// thread in a ptrace stop ('t') by the end of it is stopped, with no
// event, and its registers can be put back.
func waitInterrupted(tid int, ws *syscall.WaitStatus) (bool, error) {
	deadline := time.Now().Add(time.Duration(float64(interruptWait) * loadStretch()))
	for {
		got, err := syscall.Wait4(tid, ws, waitAll|syscall.WNOHANG, nil)
		if err != nil {
			return false, err
		}
		if got == tid {
			return true, nil
		}
		if time.Now().After(deadline) {
			if proc.Stat(tid).State == 't' {
				return false, nil
			}
			return false, errors.New("no stop came")
		}
		time.Sleep(time.Millisecond)
	}
}

// continueStopped continues process pid when one of its threads is in a
// group stop, and reports whether it did.
func continueStopped(pid int) bool {
	for _, tid := range proc.Tasks(pid) {
		if proc.Stat(tid).State == 'T' {
			syscall.Kill(pid, syscall.SIGCONT)
			return true
		}
	}
	return false
}

// rescue stops the library's recording in process pid when gdb could
// not (it is gone), and says so for the message of how the process was
// left: "" when there was nothing to stop.
func (s *siteRecording) rescue(pid int) string {
	if s == nil || !s.injected {
		return ""
	}
	t, err := heaptrack.OpenTarget(pid, s.layout)
	if err == nil {
		defer t.Close()
		err = stopLibrary(pid, t)
	}
	if err != nil {
		return fmt.Sprintf("; snapctl could not stop heaptrack's recording in it (%v): the process will die of SIGPIPE at heaptrack's next write", err)
	}
	s.injected = false
	s.guardian.say("stopped")
	return "; snapctl stopped heaptrack's recording in it"
}
