package native

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/osthread"
	"github.com/snapctl/snapctl/internal/proc"
)

// The guardian's hold on the tracer. When the process that traces the
// attached one (gdbserver under --guard, gdb otherwise) dies, the kernel
// lets every thread go at once, with gdb's breakpoint instructions still
// in the code: a thread that runs into one dies of SIGTRAP, and no
// process outside the kernel can take them out first (docs/facts.md,
// facts 34 and 63). But a tracee killed with SIGKILL still stops at
// PTRACE_EVENT_EXIT before it lets go of its own tracees (fact 99):
// so the guardian traces the tracer's thread, and when that thread stops
// at its exit while it still traces the process, the guardian puts back
// the program's bytes through /proc/PID/mem (root or the same user needs
// no tracer for it) before it lets the tracer end. A thread that hits a
// breakpoint meanwhile waits in its stop, which the tracer's end then
// lets go at the breakpoint's address, now the program's instruction.
// A thread whose SIGTRAP the tracer had not collected when it was killed
// takes it in snapctl's handler in the process (trap.go, fact 113), which
// the hold arms with the breakpoints' addresses; a thread the tracer was
// stepping over a breakpoint in its copy at the entry point the hold
// moves back (stepcopy.go, fact 120). Both need the hold in place before
// the tracer can die, which is why an attach waits for it (fact 133).
//
// The hold costs the tracer's signals a round trip through the guardian
// (each SIGCHLD of a stop is passed on), and is given up with the
// guardian.

// restoredFile, in snapctl's private directory, holds how many
// breakpoints the guardian's hold put back as the tracer died.
const restoredFile = "guardian-restored"

// guardianRestored is how many breakpoints the guardian's hold put back,
// 0 for none.
func guardianRestored(dir string) int {
	data, _ := os.ReadFile(filepath.Join(dir, restoredFile))
	n, _ := strconv.Atoi(string(data))
	return n
}

// ptrace's requests, options and events that Go's syscall package has no
// name for.
const (
	ptraceOTraceExit = 0x40
	ptraceEventExit  = 6
	ptraceEventStop  = 128
)

// tracerHold is the guardian's hold on the thread that traces process
// pid.
type tracerHold struct {
	pid    int
	tracer int // the tracer's thread
	mu     sync.Mutex
	// patches are the breakpoints to put back, told by snapctl.
	patches []textPatch
	logf    func(format string, args ...any)
	dir     string // snapctl's private directory, where restoredFile goes
	// restored gets, once the tracer has ended and the threads it left
	// are put right, how many breakpoints were put back at its exit.
	restored chan int
	// past are the threads the tracer held in a breakpoint's stop with
	// their PC still past the breakpoint instruction (gdbserver puts it
	// back only as it resumes the thread), by the breakpoint's address;
	// non-nil once the tracer died tracing the process.
	past map[int]uint64
	// trap is the page of snapctl's SIGTRAP handler in the process, 0
	// for none (trap.go).
	trap uint64
	// all are the breakpoints put back at the tracer's exit, told and
	// found (stepcopy.go).
	all []textPatch
}

// holdTracer starts tracing the thread that traces process pid, in a
// thread of its own; nil when there is none or it cannot be traced.
func holdTracer(pid int, dir string, logf func(format string, args ...any)) *tracerHold {
	tracer := tracerOf(pid)
	if tracer == 0 {
		return nil
	}
	h := &tracerHold{pid: pid, tracer: tracer, dir: dir, logf: logf, restored: make(chan int, 1)}
	started := make(chan error, 1)
	osthread.Go(func() {
		// Every ptrace request on the tracer comes from this thread,
		// which ends with it.
		// The tracer's signals wait for this thread: on a loaded
		// machine, the sooner it runs the sooner the tracer collects
		// its tracees' stops (the ones it has not collected when it
		// dies are lost, fact 63). Best effort: an unprivileged
		// guardian keeps its priority.
		syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), -20)
		if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(tracer), 0, ptraceOTraceExit, 0, 0); e != 0 {
			started <- e
			return
		}
		started <- nil
		h.loop()
	})
	if err := <-started; err != nil {
		logf("cannot hold %s %d, the tracer of process %d (%v): if it is killed, a thread that runs into a breakpoint dies", procName(tracer), tracer, pid, err)
		return nil
	}
	logf("holding %s %d, the tracer of process %d", procName(tracer), tracer, pid)
	return h
}

// reseize holds the tracer again once it no longer stops; false when it
// has ended or cannot be held.
func (h *tracerHold) reseize() bool {
	for {
		st := proc.Stat(h.tracer)
		if !st.OK || st.State == 'Z' || st.State == 'X' {
			return false
		}
		if st.State != 'T' {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(h.tracer), 0, ptraceOTraceExit, 0, 0)
	return e == 0
}

// add takes the breakpoints to put back when the tracer dies.
func (h *tracerHold) add(p textPatch) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.patches = append(h.patches, p)
	h.mu.Unlock()
}

// setTrap takes the page of snapctl's SIGTRAP handler in the process.
func (h *tracerHold) setTrap(page uint64) {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.trap = page
	h.mu.Unlock()
}

// loop passes on the tracer's signals and stops until it ends; at its
// exit, while it still traces the process, it puts back the program's
// bytes.
func (h *tracerHold) loop() {
	n := 0
	defer func() {
		if h.past != nil {
			h.repair()
		}
		holdEnded(h.dir)
		h.restored <- n
	}()
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(h.tracer, &ws, waitAll, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return
		}
		if ws.Exited() || ws.Signaled() {
			return
		}
		if !ws.Stopped() {
			continue
		}
		sig, event := ws.StopSignal(), int(ws>>16)&0xff
		switch {
		case event == ptraceEventExit:
			// Any thread still traced: a gdb killed as it detached
			// leaves some threads traced, and breakpoints in.
			if tracesAny(h.pid, h.tracer) {
				n = h.restore()
			}
			syscall.PtraceCont(h.tracer, 0)
		case event == ptraceEventStop:
			if sig == syscall.SIGSTOP || sig == syscall.SIGTSTP || sig == syscall.SIGTTIN || sig == syscall.SIGTTOU {
				// A group stop (a SIGSTOP of gdb's): let it go, so
				// that it reads stopped ('T') as untraced, which
				// snapctl's stall watch and repair look for, and hold
				// it again once it runs.
				syscall.PtraceDetach(h.tracer)
				if !h.reseize() {
					return
				}
			} else {
				syscall.PtraceCont(h.tracer, 0)
			}
		default:
			// Its own signal (SIGCHLD of its tracees' stops), passed on.
			syscall.PtraceCont(h.tracer, int(sig))
		}
	}
}

// restore puts back the program's bytes wherever a breakpoint instruction
// is left, while the tracer is held at its exit; it returns how many.
// Threads the tracer holds in a breakpoint's stop would go on from where
// it left them, their PC past the breakpoint instruction (in the middle
// of the program's instruction) or set to step one instruction: so a
// SIGSTOP is sent to each thread first, which it takes as the tracer
// lets it go, before it returns to the program; repair then puts them
// right (tracerHold.repair).
func (h *tracerHold) restore() int {
	h.mu.Lock()
	patches := append([]textPatch(nil), h.patches...)
	trap := h.trap
	h.mu.Unlock()
	h.past = make(map[int]uint64)
	h.logf("%s %d is ending while it traces process %d: %s", procName(h.tracer), h.tracer, h.pid, threadsAt(h.pid, patches))
	for _, tid := range proc.Tasks(h.pid) {
		if proc.Stat(tid).State != 't' {
			continue
		}
		_, pc, ok := proc.StoppedAt(h.pid, tid)
		if !ok {
			continue
		}
		for _, p := range patches {
			if pc == p.addr+uint64(len(breakInsn)) {
				h.past[tid] = p.addr
			}
		}
	}
	// To each thread: one sent to the process is taken by one thread
	// only, which may start the group stop after another has gone back
	// to the program.
	for _, tid := range proc.Tasks(h.pid) {
		syscall.Tgkill(h.pid, tid, syscall.SIGSTOP)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", h.pid), os.O_RDWR, 0)
	if err != nil {
		h.logf("%s %d is ending while it traces process %d, whose memory cannot be written: %v", procName(h.tracer), h.tracer, h.pid, err)
		return 0
	}
	defer mem.Close()
	n := 0
	cur := make([]byte, len(breakInsn))
	put := func(patches []textPatch) {
		for _, p := range patches {
			if _, err := mem.ReadAt(cur, int64(p.addr)); err != nil || !bytes.Equal(cur, breakInsn) {
				continue
			}
			if _, err := mem.WriteAt(p.orig, int64(p.addr)); err == nil {
				n++
			}
		}
	}
	put(patches)
	// Then gdb's breakpoints snapctl was not told of (a step's, a
	// finish's, gdb's own set since), found where the code differs from
	// its file: reading the code takes milliseconds.
	var more []textPatch
	for _, p := range textBreakpoints(h.pid) {
		if !slices.ContainsFunc(patches, func(q textPatch) bool { return q.addr == p.addr }) {
			more = append(more, p)
		}
	}
	put(more)
	patches = append(patches, more...)
	h.mu.Lock()
	h.all = patches
	h.mu.Unlock()
	armed := false
	if trap != 0 {
		// A trap the tracer had not collected goes to the process's
		// handler once the tracer is gone: it takes the thread back
		// onto the address only where it is one of these.
		addrs := make([]uint64, len(patches))
		for i, p := range patches {
			addrs[i] = p.addr
		}
		_, err := mem.WriteAt(armTrapTable(addrs), int64(trap+trapTable))
		armed = err == nil
	}
	h.logf("%s %d is ending while it traces process %d: put back the program's bytes at %d of %d breakpoints before it let go, %d threads past one, SIGTRAP handler armed: %v", procName(h.tracer), h.tracer, h.pid, n, len(patches), len(h.past), armed)
	if h.dir != "" && n > 0 {
		// For snapctl's message, which would otherwise find none left.
		os.WriteFile(filepath.Join(h.dir, restoredFile), []byte(strconv.Itoa(n)), 0o600)
	}
	return n
}

// textBreakpoints lists the breakpoint instructions in the code of process
// pid (its executable mappings of files) where the files have other
// bytes, with the files' bytes; only where the instruction is one byte.
func textBreakpoints(pid int) []textPatch {
	if len(breakInsn) != 1 {
		return nil
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil
	}
	defer mem.Close()
	var out []textPatch
	for _, m := range readMaps(pid) {
		if !m.exec || !strings.HasPrefix(m.path, "/") {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end))
		if err != nil {
			continue
		}
		want := make([]byte, m.end-m.start)
		n, _ := f.ReadAt(want, int64(m.offset))
		f.Close()
		got := make([]byte, n)
		if _, err := mem.ReadAt(got, int64(m.start)); err != nil {
			continue
		}
		for i := range got {
			if got[i] == breakInsn[0] && want[i] != got[i] {
				out = append(out, textPatch{addr: m.start + uint64(i), orig: []byte{want[i]}})
			}
		}
	}
	return out
}

// repair puts right the threads the dead tracer left: once every thread
// has stopped at the SIGSTOP sent at its exit, it takes each (which
// clears a single step the tracer had set, as any detach does), moves
// the PC of those past a breakpoint back onto it, where the program's
// instruction is now, lets them go and continues the process.
func (h *tracerHold) repair() {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) && proc.Alive(h.pid) && !allStopped(h.pid) {
		time.Sleep(time.Millisecond)
	}
	h.logf("the tracer has ended: %s", threadsAt(h.pid, nil))
	moved := 0
	var seized []int
	for _, tid := range proc.Tasks(h.pid) {
		if seize(tid) != nil {
			continue
		}
		seized = append(seized, tid)
		addr, ok := h.past[tid]
		if !ok {
			continue
		}
		var regs syscall.PtraceRegs
		if syscall.PtraceGetRegs(tid, &regs) == nil && regs.PC() == addr+uint64(len(breakInsn)) {
			regs.SetPC(addr)
			if syscall.PtraceSetRegs(tid, &regs) == nil {
				moved++
			}
		}
	}
	h.mendStepCopy(seized)
	for _, tid := range seized {
		syscall.PtraceDetach(tid)
	}
	syscall.Kill(h.pid, syscall.SIGCONT)
	h.logf("took the %d threads of process %d the tracer left, moved %d back onto their breakpoint, and continued it", len(seized), h.pid, moved)
}

// tracesAny reports whether tracer traces a thread of process pid.
func tracesAny(pid, tracer int) bool {
	for _, tid := range proc.Tasks(pid) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "TracerPid:"); ok && strings.TrimSpace(v) == strconv.Itoa(tracer) {
				return true
			}
		}
	}
	return false
}

// allStopped reports whether every thread of process pid is stopped.
func allStopped(pid int) bool {
	for _, tid := range proc.Tasks(pid) {
		if st := proc.Stat(tid).State; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}

// procName is a process's command name, for messages.
func procName(pid int) string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if name := string(bytes.TrimSpace(data)); name != "" {
		return name
	}
	return "process"
}

// threadsAt describes the threads of process pid for the guardian's log:
// per thread its state, the signal its tracer has not collected (the last
// field of /proc/PID/task/TID/stat, the exit_code of a thread in a ptrace
// stop: 0 once its tracer's wait has taken it), its pending signals, and
// its PC when stopped, "+bp" when that is one byte past a breakpoint.
func threadsAt(pid int, patches []textPatch) string {
	var b strings.Builder
	st, _ := proc.Status(pid)
	fmt.Fprintf(&b, "ShdPnd %s;", strings.TrimSpace(st["ShdPnd"]))
	for _, tid := range proc.Tasks(pid) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) < 2 {
			continue
		}
		code := f[len(f)-1]
		ts, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", pid, tid))
		pnd := ""
		for _, l := range strings.Split(string(ts), "\n") {
			if v, ok := strings.CutPrefix(l, "SigPnd:"); ok {
				pnd = strings.TrimLeft(strings.TrimSpace(v), "0")
			}
		}
		fmt.Fprintf(&b, " %d %s code %s pnd %q", tid, f[0], code, pnd)
		if f[0] == "t" || f[0] == "T" {
			if _, pc, ok := proc.StoppedAt(pid, tid); ok {
				fmt.Fprintf(&b, " pc %#x", pc)
				for _, p := range patches {
					if pc == p.addr+uint64(len(breakInsn)) {
						b.WriteString("+bp")
					}
				}
			}
		}
		b.WriteString(";")
	}
	return b.String()
}
