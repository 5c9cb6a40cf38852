package native

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/osthread"
	"github.com/snapctl/snapctl/internal/proc"
)

// Leaving a process that snapctl attach attached to. gdb deletes its
// breakpoints and detaches, and the process runs on. When gdb cannot (it
// died of an internal error, was killed, or hangs), the int3 bytes it
// wrote stay in the process, which dies of SIGTRAP at the next hit:
// snapctl then puts the original bytes back itself. It knows where they
// go from gdb's breakpoint table, read once the breakpoints are set, and
// what they were from the program's files (docs/facts.md, fact 34).

// attachArgs are the arguments of the gdb that attaches. gdb goes on
// after an internal error (the command that met it fails) rather than
// quit: a gdb that quits leaves its breakpoints in the process, and the
// threads it stopped run on at once, into them, before snapctl can take
// them out (docs/facts.md, fact 34); a gdb that lives can still delete
// them and detach.
var attachArgs = []string{
	"-iex", "maint set internal-error quit no",
	"-iex", "maint set internal-warning quit no",
}

// textPatch is one address at which gdb writes a breakpoint instruction
// into the attached process, and the bytes of the program there.
type textPatch struct {
	addr uint64
	orig []byte
}

// breakInsn is the instruction gdb writes at a breakpoint (int3 on x86,
// brk #0 on arm64); nil where snapctl does not know it.
var breakInsn = map[string][]byte{
	"amd64": {0xcc}, "386": {0xcc},
	"arm64": {0x00, 0x00, 0x20, 0xd4},
}[runtime.GOARCH]

// guardBreakpoints reads where gdb will insert breakpoints in the
// attached process (`maint info breakpoints`: the plan's, the agent's and
// gdb's own, such as the dynamic loader's shlib event) and the bytes of
// the program at each. gdb has the process stopped and its breakpoints
// out of its memory (all-stop, always-inserted off), but the bytes are
// read from the mapped files, which no breakpoint ever touches; memory
// only where no file maps the address. Best effort: what cannot be read
// is not guarded, and a location that resolves later (a library loaded
// after the attach) is not either.
func (b *Launch) guardBreakpoints(ctx context.Context) {
	if breakInsn == nil {
		return
	}
	r, err := b.gdb.Do(ctx, gdb.Console("maint info breakpoints"))
	if err != nil {
		return
	}
	maps := readMaps(b.attach)
	for _, addr := range breakpointAddrs(r.Console()) {
		if slices.ContainsFunc(b.patches, func(p textPatch) bool { return p.addr == addr }) {
			continue
		}
		if orig := originalBytes(b.attach, maps, addr, len(breakInsn)); orig != nil && !bytes.Equal(orig, breakInsn) {
			b.patches = append(b.patches, textPatch{addr: addr, orig: orig})
		}
	}
	b.guardian.patches(b.patches)
}

// breakpointAddrs returns the addresses in the table that `maint info
// breakpoints` prints: the first hexadecimal field of each line, on the
// lines of breakpoints and of their locations alike.
func breakpointAddrs(table string) []uint64 {
	var addrs []uint64
	for _, line := range strings.Split(table, "\n") {
		for _, f := range strings.Fields(line) {
			if !strings.HasPrefix(f, "0x") {
				continue
			}
			if a, err := strconv.ParseUint(f[2:], 16, 64); err == nil && !slices.Contains(addrs, a) {
				addrs = append(addrs, a)
			}
			break
		}
	}
	return addrs
}

// mapping is one mapping of process pid with a file behind it
// (proc.Maps).
type mapping struct {
	start, end, offset uint64
	path               string
	exec               bool // mapped executable: code
	deleted            bool // the file was replaced since it was mapped
}

func readMaps(pid int) []mapping {
	all, err := proc.Maps(pid)
	if err != nil {
		return nil
	}
	var out []mapping
	for _, m := range all {
		if strings.HasPrefix(m.Path, "/") {
			out = append(out, mapping{start: m.Lo, end: m.Hi, offset: m.Offset, path: m.Path, exec: strings.Contains(m.Perms, "x"), deleted: m.Deleted})
		}
	}
	return out
}

// originalBytes reads n bytes of the program at addr: from the file that
// maps addr, through the process's own view of it (/proc/PID/map_files,
// which holds even when the file was replaced on disk), else from the
// process's memory.
func originalBytes(pid int, maps []mapping, addr uint64, n int) []byte {
	buf := make([]byte, n)
	for _, m := range maps {
		if addr < m.start || addr+uint64(n) > m.end {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end))
		if err != nil && !m.deleted {
			// A replaced file's path names the new one: only the
			// process's memory still has the old bytes.
			f, err = os.Open(m.path)
		}
		if err != nil {
			break
		}
		_, err = f.ReadAt(buf, int64(addr-m.start+m.offset))
		f.Close()
		if err == nil {
			return buf
		}
		break
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, int64(addr)); err != nil {
		return nil
	}
	return buf
}

// restoreText puts the original bytes back wherever a breakpoint
// instruction of gdb's is still in process pid, and returns how many it
// put back. Every thread is stopped meanwhile (PTRACE_SEIZE and
// PTRACE_INTERRUPT, which send the process no signal its parent would
// see), so that none runs into a breakpoint while the bytes change; then
// each is detached and runs on. gdb must be gone: a process has one
// tracer.
func restoreText(pid int, patches []textPatch) (int, error) {
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	// ptrace requests come from the thread that attached: a thread
	// of its own, which ends with it.
	osthread.Go(func() {
		n, err := restoreStopped(pid, patches)
		done <- result{n, err}
	})
	r := <-done
	return r.n, r.err
}

// The ptrace requests Go's syscall package has no function for.
const (
	ptraceSeize     = 0x4206
	ptraceInterrupt = 0x4207
	waitAll         = 0x40000000 // __WALL: clone threads too
)

func restoreStopped(pid int, patches []textPatch) (int, error) {
	var seized []int
	defer func() {
		for _, tid := range seized {
			syscall.PtraceDetach(tid)
		}
	}()
	// Threads may start while others are seized: look until no new one
	// shows up.
	for {
		tids := proc.Tasks(pid)
		if len(tids) == 0 {
			return 0, fmt.Errorf("process %d has exited", pid)
		}
		added := false
		for _, tid := range tids {
			if slices.Contains(seized, tid) {
				continue
			}
			groupStopped := proc.Stat(tid).State == 'T'
			err := seize(tid)
			// The guardian may hold the thread for a moment, putting
			// right what a dead tracer left (hold.go).
			for deadline := time.Now().Add(2 * time.Second); errors.Is(err, syscall.EPERM) && time.Now().Before(deadline); err = seize(tid) {
				time.Sleep(time.Millisecond)
			}
			if err != nil {
				if errors.Is(err, syscall.ESRCH) {
					continue // the thread exited
				}
				return 0, fmt.Errorf("stopping thread %d: %w", tid, err)
			}
			seized, added = append(seized, tid), true
			if groupStopped {
				backOntoBreakpoint(tid, patches)
			}
		}
		if !added {
			break
		}
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer mem.Close()
	// A thread a dead tracer left in gdb's step copy, which the guardian
	// did not mend (stepcopy.go).
	if a, ok := readStepArea(pid); ok {
		for _, tid := range seized {
			a.mend(pid, tid, 0, patches, mem)
		}
		a.restore(mem)
	}
	n := 0
	cur := make([]byte, len(breakInsn))
	var errs []error
	for _, p := range patches {
		if _, err := mem.ReadAt(cur, int64(p.addr)); err != nil || !bytes.Equal(cur, breakInsn) {
			continue // gdb took it out, or the library is gone
		}
		if _, err := mem.WriteAt(p.orig, int64(p.addr)); err != nil {
			errs = append(errs, fmt.Errorf("writing at %#x: %w", p.addr, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// backOntoBreakpoint moves the PC of seized thread tid back onto the
// breakpoint it is just past, if any: a thread a dead tracer held in a
// breakpoint's stop, which the guardian stopped with a SIGSTOP as the
// tracer ended (gdbserver puts a PC back only as it resumes the thread,
// fact 100). It is called for threads found group-stopped only: one
// that ran there by itself is never in a group stop right after the
// breakpoint's one-byte instruction but by a rare chance.
func backOntoBreakpoint(tid int, patches []textPatch) {
	var regs syscall.PtraceRegs
	if syscall.PtraceGetRegs(tid, &regs) != nil {
		return
	}
	for _, p := range patches {
		if regs.PC() == p.addr+uint64(len(breakInsn)) {
			regs.SetPC(p.addr)
			syscall.PtraceSetRegs(tid, &regs)
			return
		}
	}
}

// seize makes the calling thread the tracer of thread tid and stops it
// (PTRACE_SEIZE and PTRACE_INTERRUPT, which send the process no signal
// its parent would see). The caller detaches it. The wait for the stop
// is waitInterrupted's, polled and bounded: a blocking wait4 here never
// returned in a CI run, the thread in its PTRACE_EVENT_STOP already
// (docs/facts.md, fact 152).
func seize(tid int) error {
	if _, _, e := syscall.Syscall6(syscall.SYS_PTRACE, ptraceSeize, uintptr(tid), 0, 0, 0, 0); e != 0 {
		return e
	}
	syscall.Syscall6(syscall.SYS_PTRACE, ptraceInterrupt, uintptr(tid), 0, 0, 0, 0)
	var ws syscall.WaitStatus
	waitInterrupted(tid, &ws)
	return nil
}

// detach leaves the process snapctl attach attached to running, with no
// breakpoint of snapctl's in it, however gdb is: a stopped gdb is
// continued first; gdb deletes the breakpoints and detaches; a gdb that
// is gone or cannot is ended, and snapctl puts the original bytes back
// itself. It says what it did when gdb could not detach (b.left).
func (b *Launch) detach(exited bool) (detached bool) {
	if !b.attached || b.gdb == nil {
		return false
	}
	b.attached = false
	pid := b.attach
	defer b.closeGuard()
	// The guardian goes first (it holds a copy of gdb's connection to
	// gdbserver): at once when the process is left as it should be, else
	// it tries again once snapctl has gone.
	defer func() {
		b.guardian.end(exited || detached && (b.sites == nil || !b.sites.injected) || !detached && endOf(pid) != "")
		b.guardian = nil
	}()
	if exited {
		return false // the process has ended: nothing to leave running
	}
	defer func() {
		// Once nothing traces the process: snapctl's SIGTRAP handler
		// goes (trap.go).
		if detached && b.trap != nil {
			if err := removeTrapHandler(pid, b.trap.page); err != nil {
				b.left += "; snapctl's SIGTRAP handler stays in it (" + err.Error() + ")"
			} else {
				b.guardian.say("untrap")
			}
			b.trap = nil
		}
	}()
	// A process that died before the detach (of a fault in a call of
	// snapctl's, of a signal of its own) is not left running, whatever
	// gdb would say of its detach: its end is what there is to say. One
	// that ends after it (a program at its end) was left running.
	if fate := endOf(pid); fate != "" {
		b.left = fmt.Sprintf("process %d %s", pid, fate)
		return false
	}
	var did []string
	if proc.Stat(b.gdb.Pid()).State == 'T' {
		// gdb answers nothing while stopped (SIGSTOP, SIGTSTP).
		syscall.Kill(-b.gdb.Pid(), syscall.SIGCONT)
		did = append(did, "continued the stopped gdb")
	}
	select {
	case <-b.gdb.Done():
	default:
		err := b.gdbDetach()
		if err == nil {
			if len(did) > 0 {
				b.left = fmt.Sprintf("process %d runs on: snapctl %s, which deleted the breakpoints and detached", pid, strings.Join(did, ", "))
			}
			return true
		}
		did = append(did, "ended gdb, which could not detach ("+err.Error()+")")
		b.gdb.Kill()
		select {
		case <-b.gdb.Done():
		case <-time.After(5 * b.env.Times.Grace):
		}
	}
	if left, ok := b.releaseGuarded(); ok {
		b.left = left
		if len(did) > 0 {
			b.left += " (snapctl " + strings.Join(did, ", ") + ")"
		}
		b.left += b.sites.rescue(pid)
		return true
	}
	if fate := endOf(pid); fate != "" {
		b.left = fmt.Sprintf("process %d %s", pid, fate)
		return false
	}
	// The guardian's hold puts right what gdb left as it died; its
	// threads are the guardian's meanwhile (hold.go).
	waitHoldEnded(b.env.Private, 5*b.env.Times.Grace)
	n, err := restoreText(pid, b.patches)
	// A process gdb left stopped (its attach sends SIGSTOP; so does its
	// stopping of threads) stays stopped without a SIGCONT.
	time.Sleep(10 * time.Millisecond)
	if st := proc.Stat(pid); st.State == 'T' {
		syscall.Kill(pid, syscall.SIGCONT)
		did = append(did, "continued the process, which gdb had left stopped")
	}
	removed := "no breakpoint of snapctl's was left in it"
	if n > 0 {
		removed = "snapctl removed its " + backend.Plural(n, "breakpoint") + " itself"
	} else if g := guardianRestored(b.env.Private); g > 0 {
		removed = "snapctl's guardian put back the program's code under its " + backend.Plural(g, "breakpoint") + " as its tracer died"
	}
	switch fate := endOf(pid); {
	case fate != "":
		b.left = fmt.Sprintf("process %d %s", pid, fate)
	case err != nil:
		b.left = fmt.Sprintf("snapctl could not take its breakpoints out of process %d, which may die of SIGTRAP at the next one (%v); it removed %d", pid, err, n)
	default:
		b.left = fmt.Sprintf("process %d runs on: %s", pid, removed)
		detached = true
	}
	if len(did) > 0 {
		b.left += " (snapctl " + strings.Join(did, ", ") + ")"
	}
	if detached {
		b.left += b.sites.rescue(pid)
	}
	return detached
}

// endOf says how process pid ended ("was killed by SIGSEGV", "exited
// with status 1", "has exited"), "" while it runs or is still ending. A
// process attached to is not snapctl's child: it stays a zombie, its
// /proc entry there, until its own parent reaps it.
func endOf(pid int) string {
	if fate, ended := proc.Fate(pid); ended {
		return fate
	}
	return ""
}

// gdbDetach has gdb delete its breakpoints and detach: gdb detaches from a
// stopped process only; one stopped at its exec is already.
func (b *Launch) gdbDetach() error {
	grace := b.env.Times.Grace
	ctx, cancel := context.WithTimeout(context.Background(), 10*grace)
	defer cancel()
	if gdb.Running(ctx, b.gdb) {
		b.gdb.SendInterrupt(ctx)
		wctx, wcancel := context.WithTimeout(ctx, 2*grace)
		b.gdb.WaitStopped(wctx)
		wcancel()
	}
	// gdb interrupts an all-stop target with a SIGINT to the process. When
	// a breakpoint's stop overtook it, that SIGINT still waits in the
	// process, and once detached the process would die of it: gdb lets
	// the process take it, and stops at it without passing it on.
	for range 5 {
		if !sigintPending(b.attach) {
			break
		}
		if _, err := b.gdb.Do(ctx, gdb.Continue()); err != nil {
			break
		}
		wctx, wcancel := context.WithTimeout(ctx, 2*grace)
		b.gdb.WaitStopped(wctx)
		wcancel()
	}
	b.quietSignal(ctx)
	// The breakpoints go before heaptrack_stop is called: a thread that
	// runs into one during the call has gdb step it over in place,
	// every thread stopped, and such a call did not return; ended with
	// gdb, it returned onto gdb's return address on its stack, and the
	// process died of SIGSEGV (docs/facts.md, fact 115).
	b.gdb.Do(ctx, gdb.BreakDelete())
	if b.sites != nil {
		// The library goes idle before the detach: it writes no more
		// into the FIFO that snapctl closes.
		if err := b.sites.stop(ctx, b.gdb); err != nil {
			return err
		}
	}
	if _, err := b.gdb.Do(ctx, gdb.Detach()); err != nil {
		return errors.New(gdb.Message(err))
	}
	return nil
}

// sigintPending reports whether a SIGINT waits in process pid, for the
// process (ShdPnd) or one of its threads (SigPnd, read from /proc/TID,
// which Linux serves for every thread).
func sigintPending(pid int) bool {
	const sigint = 1 << (syscall.SIGINT - 1)
	pending := func(id int, key string) bool {
		st, err := proc.Status(id)
		mask, perr := strconv.ParseUint(st[key], 16, 64)
		return err == nil && perr == nil && mask&sigint != 0
	}
	if pending(pid, "ShdPnd") {
		return true
	}
	return slices.ContainsFunc(proc.Tasks(pid), func(tid int) bool { return pending(tid, "SigPnd") })
}
