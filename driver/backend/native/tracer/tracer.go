// Package tracer makes snapctl the ptrace tracer of every thread of one
// process, so that a measured stop needs neither gdb nor gdbserver: the
// thread that hit a measured probe reports its signal stop here, every
// other thread is stopped with PTRACE_INTERRUPT, the caller measures the
// stopped process, and every thread is resumed (docs/design.md, "The
// stop taken by snapctl"; docs/facts.md, fact 134).
//
// Every thread is seized (PTRACE_SEIZE, with PTRACE_O_TRACECLONE so that
// a thread started later is traced from its first instruction, and
// PTRACE_O_TRACEEXEC). One goroutine, locked to its OS thread, makes
// every ptrace call and every wait: the kernel takes ptrace requests only
// from the tracing thread. It waits with __WNOTHREAD, for its own
// tracees alone: a wait of any child of the process would reap
// snapctl's own children (gdb, a workload) under os/exec's feet. The
// kernel sends the tracer SIGCHLD at each tracee's stop and end, which
// wakes the wait; a poll every waitPoll is the net under a lost one.
//
// Every stop the tracer is owed is accounted for: a thread is either
// running or stopped, and each wait for stops is bounded by the caller's
// patience, after which the tracer takes the stop of a thread whose
// event another wait of the process took from its siginfo (unreported),
// and says which threads did not stop rather than wait on. Killed (kill
// -9 of snapctl, or its thread ended), the kernel detaches every thread
// and resumes it.
package tracer

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/snapctl/snapctl/internal/osthread"
	"github.com/snapctl/snapctl/internal/proc"
)

// waitPoll is how often a wait looks for events without a SIGCHLD.
const waitPoll = 20 * time.Millisecond

// Config is what the tracer needs of its caller.
type Config struct {
	// Watch are the signals whose stops Next reports (the measured
	// hits' signal and the hold signal); every other signal is the
	// program's and passes through with its number.
	Watch []syscall.Signal
	// Patience is how long one wait for owed stops may take: the
	// stops of every other thread at a measured stop, or at the
	// detach; nil or 0: 5 seconds. Called on one goroutine at a time.
	Patience func() time.Duration
}

// Kind is what an Event is.
type Kind int

// The kinds of Event.
const (
	// Signal: thread Tid stopped with one of Config.Watch's signals,
	// Sig; it stays stopped until the caller says what it does.
	Signal Kind = iota + 1
	// Exited: the process exited with Code.
	Exited
	// Killed: the process was ended by signal Sig. When one of its
	// threads received it first as a stop (a fault, an abort), Tid and
	// PC say where.
	Killed
	// Exec: thread Tid ran execve; the process runs another program.
	Exec
)

// Event is what Next reports.
type Event struct {
	Kind Kind
	Tid  int
	Sig  syscall.Signal
	Code int
	PC   uint64
	// File is the file mapped at PC, and Base where its first page
	// was mapped less that page's offset in it: the file's address 0
	// (a fatal signal's, read while the process lived).
	File string
	Base uint64
}

// thread is one traced thread's state. A thread is stopped when the
// tracer has seen a stop it has not resumed.
type thread struct {
	stopped bool
	// sig is the program's own signal delivered when it is resumed.
	sig syscall.Signal
	// watched is a stop by a watched signal not yet handed out.
	watched syscall.Signal
	// held keeps it stopped at ResumeAll until heldUntil (Hold).
	held      bool
	heldUntil time.Time
	// group is a group stop (SIGSTOP to the process): it is listened
	// through (PTRACE_LISTEN), not continued.
	group bool
	// dead is a thread the kernel no longer lets be stopped (a zombie
	// leader whose threads run on, one exiting): no stop is owed.
	dead bool
}

// Tracer traces one process.
type Tracer struct {
	pid  int
	cfg  Config
	reqs chan func()
	quit chan struct{}
	// wake has a value when the kernel sent SIGCHLD.
	wake chan os.Signal

	// The state, touched only on the tracer's thread.
	threads map[int]*thread
	// pending are events seen while waiting for something else,
	// handed out by Next first.
	pending []Event
	// fatal is the last fatal signal a thread received, with where.
	fatal *Event
	ended *Event
	// detached: no thread is traced any more.
	detached bool
	// kicked: the loop's stop is told by a signal to the process
	// (Loop), so that a wait may block in the kernel.
	kicked bool
	// events counts the ptrace events seen, started the threads
	// that started while traced.
	events, started int
}

// ErrEnded is returned by a request made after the process ended or the
// tracer detached.
var ErrEnded = errors.New("the process is no longer traced")

// NotStopped is the error of a wait for stops that ran out of patience.
type NotStopped struct {
	What    string
	Threads []int
	After   time.Duration
}

func (e *NotStopped) Error() string {
	return fmt.Sprintf("%s: thread %s did not stop within %v", e.What, joinInts(e.Threads), e.After.Round(time.Millisecond))
}

func joinInts(v []int) string {
	s := ""
	for i, n := range v {
		if i > 0 {
			s += ", "
		}
		s += strconv.Itoa(n)
	}
	return s
}

// Seize traces every thread of process pid and stops them all: it
// returns with the process stopped, for the caller to place its probes
// and ResumeAll.
func Seize(pid int, cfg Config) (*Tracer, error) {
	t := &Tracer{pid: pid, cfg: cfg, reqs: make(chan func()), quit: make(chan struct{}), wake: make(chan os.Signal, 1), threads: map[int]*thread{}}
	signal.Notify(t.wake, syscall.SIGCHLD)
	started := make(chan error, 1)
	osthread.Go(func() { t.serve(started) })
	if err := <-started; err != nil {
		return nil, err
	}
	var err error
	t.do(func() {
		if err = t.seizeAll(); err == nil {
			err = t.stopAll("stopping every thread after seizing them")
		}
		if err != nil {
			t.detachAll()
		}
	})
	if err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// serve runs requests on its thread of their own (osthread.Go) until
// Close: should it end with threads traced, the thread ends with it and
// the kernel detaches them.
func (t *Tracer) serve(started chan<- error) {
	started <- nil
	for {
		select {
		case f := <-t.reqs:
			f()
		case <-t.quit:
			return
		}
	}
}

// do runs f on the tracer's thread and waits for it.
func (t *Tracer) do(f func()) {
	done := make(chan struct{})
	select {
	case t.reqs <- func() { f(); close(done) }:
		<-done
	case <-t.quit:
	}
}

// Close ends the tracer's thread; threads still traced are detached by
// the kernel as it ends. Detach first.
func (t *Tracer) Close() {
	select {
	case <-t.quit:
	default:
		signal.Stop(t.wake)
		close(t.quit)
	}
}

// Pid is the traced process.
func (t *Tracer) Pid() int { return t.pid }

func (t *Tracer) patience() time.Duration {
	if t.cfg.Patience != nil {
		if d := t.cfg.Patience(); d > 0 {
			return d
		}
	}
	return 5 * time.Second
}

func ptrace(req int, tid int, addr, data uintptr) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req), uintptr(tid), addr, data, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// seizeAll seizes every thread of the process, until a look at its
// threads finds none new: a thread started meanwhile by one not yet
// seized is in the next look, one started by a seized thread is traced
// by the kernel (PTRACE_O_TRACECLONE) and reports its first stop.
func (t *Tracer) seizeAll() error {
	const opts = unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEEXEC
	for {
		tids, err := tasks(t.pid)
		if err != nil {
			return fmt.Errorf("listing the threads of process %d: %w", t.pid, err)
		}
		n := 0
		for _, tid := range tids {
			if t.threads[tid] != nil {
				continue
			}
			if err := ptrace(unix.PTRACE_SEIZE, tid, 0, opts); err != nil {
				switch {
				case err == unix.ESRCH:
					continue // it ended
				case err == unix.EPERM && !proc.Alive(tid):
					// It ended and is not yet released, which the
					// kernel refuses to trace: a thread that exits
					// (a server's short-lived helper), or a main
					// thread that called pthread_exit and waits as a
					// zombie for the rest of its group.
					continue
				case err == unix.EPERM && t.ours(tid):
					// Started by a thread seized already: the
					// kernel traces it for us (its clone event
					// and first stop are on their way).
				default:
					return fmt.Errorf("seizing thread %d of process %d: %w", tid, t.pid, err)
				}
			}
			t.threads[tid] = &thread{}
			n++
		}
		if n == 0 {
			if len(t.threads) == 0 {
				return fmt.Errorf("process %d has no thread to seize", t.pid)
			}
			return nil
		}
	}
}

// ours reports whether thread tid is traced by the tracer's thread.
func (t *Tracer) ours(tid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/status", t.pid, tid))
	if err != nil {
		return false
	}
	for l := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			return strings.TrimSpace(v) == strconv.Itoa(unix.Gettid())
		}
	}
	return false
}

func tasks(pid int) ([]int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// wait returns the next event of a tracee, waiting until deadline (the
// zero time: until one comes); ok false when none came by then. The
// wait sleeps until the kernel's SIGCHLD, or waitPoll.
//
// In Loop, with no deadline, it blocks in the kernel instead, woken by
// the next event alone: at a measured hit, the thread's stop reaches
// the tracer without a switch of threads. Loop's end kicks it (kick).
func (t *Tracer) wait(deadline time.Time, stop <-chan struct{}) (tid int, ws unix.WaitStatus, ok bool, err error) {
	var poll *time.Timer
	for {
		flags := unix.WALL | unix.WNOTHREAD | unix.WNOHANG
		if t.kicked && deadline.IsZero() {
			select {
			case <-stop:
				return 0, 0, false, nil
			default:
			}
			flags &^= unix.WNOHANG
		}
		tid, ws, ok, err := t.reap(flags)
		if ok || err != nil {
			return tid, ws, ok, err
		}
		d := waitPoll
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return 0, 0, false, nil
			}
			d = min(d, left)
		}
		if poll == nil {
			poll = time.NewTimer(d)
			defer poll.Stop()
		} else {
			poll.Reset(d)
		}
		select {
		case <-t.wake:
		case <-poll.C:
		case <-stop:
			return 0, 0, false, nil
		}
	}
}

// reap takes one tracee's wait status with wait4's flags: ok with the
// thread and its status, or neither when WNOHANG found none; an
// interrupted wait is tried again.
//
// The tracer's thread may have children of its own: Go runs goroutines
// on a pool of threads, and a goroutine that started a program on this
// thread before the tracer took it made that program this thread's
// child, which a wait for any child reports too, first. Taking its
// status would take it from the goroutine that waits for it (os/exec's
// "waitid: no child processes", docs/facts.md, fact 163). So reap looks
// first (WNOWAIT) and takes only a tracee's status; while such a child
// is in the way, it asks each traced thread in turn.
func (t *Tracer) reap(flags int) (tid int, ws unix.WaitStatus, ok bool, err error) {
	for {
		var si waitInfo
		err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&si)), flags|unix.WEXITED|unix.WSTOPPED|unix.WNOWAIT, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			return 0, 0, false, ErrEnded
		case err != nil:
			return 0, 0, false, fmt.Errorf("waiting for the traced threads: %w", err)
		case si.pid == 0:
			return 0, 0, false, nil
		}
		if t.tracee(int(si.pid)) {
			tid, err := unix.Wait4(int(si.pid), &ws, flags|unix.WNOHANG, nil)
			switch {
			case err == unix.EINTR || err == nil && tid == 0:
				continue
			case err != nil:
				return 0, 0, false, fmt.Errorf("waiting for traced thread %d: %w", si.pid, err)
			}
			t.events++
			return tid, ws, true, nil
		}
		for tid := range t.threads {
			got, err := unix.Wait4(tid, &ws, unix.WALL|unix.WNOTHREAD|unix.WNOHANG, nil)
			if err == nil && got == tid {
				t.events++
				return tid, ws, true, nil
			}
		}
		if flags&unix.WNOHANG != 0 {
			return 0, 0, false, nil
		}
		// Blocking: the other child stays first until its own waiter
		// takes it, within moments.
		time.Sleep(time.Millisecond)
	}
}

// waitInfo is the start of the kernel's siginfo_t as waitid fills it:
// x/sys/unix's Siginfo does not name si_pid.
type waitInfo struct {
	signo, errno, code, _ int32
	pid, uid, status      int32
	_                     [100]byte
}

// tracee reports whether pid is a thread of the traced process: one the
// tracer knows, or a new one whose clone event has not come yet.
func (t *Tracer) tracee(pid int) bool {
	if t.threads[pid] != nil {
		return true
	}
	st, err := proc.Status(pid)
	return err == nil && st["Tgid"] == strconv.Itoa(t.pid)
}

// poll returns the next event of a tracee by deadline, ok false when
// none came. It is for the stops the tracer is owed, which come within
// microseconds to milliseconds: it sleeps on its own thread, from 10 us
// up to 1 ms between looks, rather than be woken through the runtime's
// signal handling, a switch of threads each time.
func (t *Tracer) poll(deadline time.Time) (tid int, ws unix.WaitStatus, ok bool, err error) {
	nap := 10 * time.Microsecond
	for {
		tid, ws, ok, err := t.reap(unix.WALL | unix.WNOTHREAD | unix.WNOHANG)
		if ok || err != nil {
			return tid, ws, ok, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return 0, 0, false, nil
		}
		ts := unix.NsecToTimespec(int64(min(nap, left)))
		unix.Nanosleep(&ts, nil)
		nap = min(2*nap, time.Millisecond)
	}
}

// handle takes one wait status. It returns the event to report, if any.
// A stopped thread stays stopped (the caller resumes it) when it is one
// the tracer keeps (watched, held, or collecting: every thread is being
// stopped); any other is resumed at once.
func (t *Tracer) handle(tid int, ws unix.WaitStatus, collecting bool) *Event {
	th := t.threads[tid]
	if ws.Exited() || ws.Signaled() {
		delete(t.threads, tid)
		if tid != t.pid {
			return nil
		}
		// The thread group's leader reports last, once the others
		// are gone.
		ev := &Event{Kind: Exited, Code: ws.ExitStatus()}
		if ws.Signaled() {
			ev = &Event{Kind: Killed, Sig: ws.Signal()}
			if f := t.fatal; f != nil && f.Sig == ev.Sig {
				ev.Tid, ev.PC, ev.File, ev.Base = f.Tid, f.PC, f.File, f.Base
			}
		}
		t.ended = ev
		return ev
	}
	if !ws.Stopped() {
		return nil
	}
	if th == nil {
		// A new thread's first stop, which may come before its
		// parent's clone event.
		th = &thread{}
		t.threads[tid] = th
	}
	th.stopped, th.dead = true, false
	sig := ws.StopSignal()
	// The event of a ptrace stop is in the status's third byte (a
	// group stop's PTRACE_EVENT_STOP comes with the stopping signal,
	// not SIGTRAP); none in a signal-delivery stop.
	event := int(uint32(ws)>>16) & 0xff
	switch event {
	case unix.PTRACE_EVENT_CLONE:
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil && t.threads[int(msg)] == nil {
			// Traced from its first instruction: it reports a stop.
			t.threads[int(msg)] = &thread{stopped: false}
		}
		t.started++
	case unix.PTRACE_EVENT_EXEC:
		// Every other thread is gone; the thread is the leader now.
		if msg, err := unix.PtraceGetEventMsg(tid); err == nil && int(msg) != tid {
			delete(t.threads, int(msg))
		}
		for id := range t.threads {
			if id != tid {
				delete(t.threads, id)
			}
		}
		ev := &Event{Kind: Exec, Tid: tid}
		t.ended = ev
		return ev
	case unix.PTRACE_EVENT_STOP:
		if sig == syscall.SIGTRAP {
			// An interrupt's stop, or a new thread's first: an
			// interrupt sent to a thread that stopped for a signal
			// first comes after its resume.
			th.group = false
		} else {
			// A group stop: the process was stopped (SIGSTOP,
			// SIGTSTP...). It stays so until SIGCONT, which the
			// thread reports as another stop.
			th.group = true
		}
	case 0:
		// A signal-delivery stop.
		if slices.Contains(t.cfg.Watch, sig) {
			th.watched = sig
			if !collecting {
				return &Event{Kind: Signal, Tid: tid, Sig: sig}
			}
			return nil
		}
		th.sig = sig
		if fatal(sig) {
			ev := &Event{Tid: tid, Sig: sig}
			var regs unix.PtraceRegs
			if unix.PtraceGetRegs(tid, &regs) == nil {
				ev.PC = regs.Rip
				if maps, err := proc.Maps(t.pid); err == nil {
					for _, m := range maps {
						if m.Lo <= ev.PC && ev.PC < m.Hi && m.Path != "" {
							ev.File, ev.Base = m.Path, m.Lo-m.Offset
						}
					}
				}
			}
			t.fatal = ev
		}
	default:
		// Another event (none asked for): go on.
	}
	if !collecting && !th.held {
		t.resume(tid, th)
	}
	return nil
}

// fatal reports whether sig ends a process that does not handle it.
func fatal(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGABRT, syscall.SIGSYS:
		return true
	}
	return false
}

// resume lets a stopped thread go on: with the program's own signal, if
// it has one; a thread in a group stop is listened through.
func (t *Tracer) resume(tid int, th *thread) {
	if !th.stopped {
		return
	}
	var err error
	if th.group {
		err = ptrace(unix.PTRACE_LISTEN, tid, 0, 0)
	} else {
		err = ptrace(unix.PTRACE_CONT, tid, 0, uintptr(th.sig))
	}
	if err == unix.ESRCH {
		// Killed meanwhile (SIGKILL leaves no stop): its end comes.
		err = nil
	}
	th.stopped, th.sig, th.watched, th.held = false, 0, 0, false
}

// stopAll interrupts every running thread and waits until each has
// stopped, patience at most. Events of the process's end are kept for
// Next.
func (t *Tracer) stopAll(what string) error {
	for tid, th := range t.threads {
		if !th.stopped {
			// A thread started since, not yet stopped, stops by
			// itself; interrupting it too is harmless.
			err := ptrace(unix.PTRACE_INTERRUPT, tid, 0, 0)
			switch {
			case err == unix.ESRCH:
				th.dead = true
			case err != nil:
				return fmt.Errorf("%s: interrupting thread %d: %w", what, tid, err)
			}
		}
	}
	patience := t.patience()
	deadline := time.Now().Add(patience)
	for {
		var running []int
		for tid, th := range t.threads {
			if !th.stopped && !th.dead {
				running = append(running, tid)
			}
		}
		if len(running) == 0 || t.ended != nil {
			return nil
		}
		tid, ws, ok, err := t.poll(deadline)
		if err != nil {
			return err
		}
		if !ok {
			// A thread whose stop came without its event, one
			// that ended in a way not yet reported, or one that
			// does not stop (in the kernel for good).
			running = t.unreported(running)
			running = t.gone(running)
			if len(running) == 0 {
				return nil
			}
			sort.Ints(running)
			return &NotStopped{What: what, Threads: running, After: patience}
		}
		if ev := t.handle(tid, ws, true); ev != nil {
			t.pending = append(t.pending, *ev)
		}
	}
}

// unreported takes the stops of tids whose event no wait gave, and
// returns the threads still running. The kernel reports a traced
// thread's stop to one wait of the tracer's process: a thread group
// leader's goes to whichever wait comes first, and a wait for the
// program's end (os/exec's Wait, in the process that started it and
// traces it, as a test does) takes it as well as the tracer's own
// (docs/facts.md, fact 152). A thread in a stop of this tracer's has
// its siginfo to read; the stop is handled from it as its wait status
// would have been.
func (t *Tracer) unreported(tids []int) []int {
	var left []int
	for _, tid := range tids {
		ws, ok := stopStatus(tid)
		if !ok {
			left = append(left, tid)
			continue
		}
		if ev := t.handle(tid, ws, true); ev != nil {
			t.pending = append(t.pending, *ev)
		}
	}
	return left
}

// stopStatus is the wait status of thread tid's ptrace stop, read from
// its siginfo; ok false when it is not in one of the caller's. An
// event's stop (PTRACE_EVENT_STOP, a clone) has the event in si_code's
// second byte and its signal in the first; a signal's delivery has
// neither (the kernel's codes are small, the user's negative).
func stopStatus(tid int) (ws unix.WaitStatus, ok bool) {
	var si unix.Siginfo
	if ptrace(unix.PTRACE_GETSIGINFO, tid, 0, uintptr(unsafe.Pointer(&si))) != nil {
		return 0, false
	}
	status := uint32(si.Signo)<<8 | 0x7f
	if event := si.Code >> 8; event > 0 && event < 0x100 && si.Code&0xff == si.Signo {
		status |= uint32(event) << 16
	}
	return unix.WaitStatus(status), true
}

// gone forgets the threads of tids that no longer exist, and returns the
// others.
func (t *Tracer) gone(tids []int) []int {
	var left []int
	for _, tid := range tids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", t.pid, tid)); err != nil {
			delete(t.threads, tid)
			continue
		}
		left = append(left, tid)
	}
	return left
}

// Next waits for the next event: a watched signal's stop (the thread
// stays stopped until Continue, Hold or ResumeAll), the process's end or
// exec. Every other stop is handled on the way: the program's signals
// passed through, new threads traced, ended ones forgotten, group stops
// listened through. A held thread is resumed once its hold passed its
// time. stop ends the wait: ok false.
func (t *Tracer) Next(stop <-chan struct{}) (ev Event, ok bool, err error) {
	t.do(func() { ev, ok, err = t.next(stop) })
	if !ok && err == nil {
		select {
		case <-t.quit:
			err = ErrEnded
		default:
		}
	}
	return ev, ok, err
}

func (t *Tracer) next(stop <-chan struct{}) (ev Event, ok bool, err error) {
	if t.detached {
		return ev, false, ErrEnded
	}
	for {
		if len(t.pending) > 0 {
			ev = t.pending[0]
			t.pending = t.pending[1:]
			return ev, true, nil
		}
		if t.ended != nil {
			return *t.ended, true, nil
		}
		// A watched stop kept from a stopAll is handed out.
		for tid, th := range t.threads {
			if th.stopped && th.watched != 0 && !th.held {
				return Event{Kind: Signal, Tid: tid, Sig: th.watched}, true, nil
			}
		}
		deadline := t.releaseHeld()
		tid, ws, got, err := t.wait(deadline, stop)
		if err != nil {
			return ev, false, err
		}
		if !got {
			select {
			case <-stop:
				return ev, false, nil
			default:
				continue
			}
		}
		if e := t.handle(tid, ws, false); e != nil {
			return *e, true, nil
		}
	}
}

// releaseHeld resumes the held threads whose time has passed, and
// returns when the next one's will (zero: none is held).
func (t *Tracer) releaseHeld() time.Time {
	var next time.Time
	now := time.Now()
	for tid, th := range t.threads {
		if !th.held {
			continue
		}
		if !now.Before(th.heldUntil) {
			th.held = false
			t.resume(tid, th)
			continue
		}
		if next.IsZero() || th.heldUntil.Before(next) {
			next = th.heldUntil
		}
	}
	return next
}

// Continue resumes stopped thread tid, with signal sig (0: none).
func (t *Tracer) Continue(tid int, sig syscall.Signal) { t.do(func() { t.cont(tid, sig) }) }

func (t *Tracer) cont(tid int, sig syscall.Signal) {
	if th := t.threads[tid]; th != nil {
		th.held = false
		th.sig = sig
		t.resume(tid, th)
	}
}

// Hold keeps stopped thread tid stopped, without its signal, until
// ResumeAll or patience has passed.
func (t *Tracer) Hold(tid int) { t.do(func() { t.hold(tid) }) }

func (t *Tracer) hold(tid int) {
	if th := t.threads[tid]; th != nil && th.stopped {
		th.held, th.watched, th.sig = true, 0, 0
		th.heldUntil = time.Now().Add(t.patience())
	}
}

// StopAll stops every thread and returns the threads that stopped with
// a watched signal besides (each with its signal, to be handed to the
// caller's accounting). On a NotStopped error some threads still run.
func (t *Tracer) StopAll() (watched []Event, err error) {
	t.do(func() { watched, err = t.stopAllWatched() })
	return watched, err
}

func (t *Tracer) stopAllWatched() (watched []Event, err error) {
	if t.ended != nil || t.detached {
		return nil, ErrEnded
	}
	err = t.stopAll("stopping every thread for a measured stop")
	for tid, th := range t.threads {
		if th.stopped && th.watched != 0 {
			watched = append(watched, Event{Kind: Signal, Tid: tid, Sig: th.watched})
			th.watched = 0
		}
	}
	sort.Slice(watched, func(i, j int) bool { return watched[i].Tid < watched[j].Tid })
	return watched, err
}

// ResumeAll resumes every stopped thread, held ones too, with none of
// the watched signals; the program's own go with their numbers.
func (t *Tracer) ResumeAll() { t.do(t.resumeAll) }

func (t *Tracer) resumeAll() {
	for tid, th := range t.threads {
		t.resume(tid, th)
	}
}

// Deliver has stopped thread tid take signal sig when it is resumed
// (the program's own signal that happened to be a watched one).
func (t *Tracer) Deliver(tid int, sig syscall.Signal) { t.do(func() { t.deliver(tid, sig) }) }

func (t *Tracer) deliver(tid int, sig syscall.Signal) {
	if th := t.threads[tid]; th != nil {
		th.sig, th.watched = sig, 0
	}
}

// Threads are the traced threads, sorted.
func (t *Tracer) Threads() []int {
	var out []int
	t.do(func() {
		for tid := range t.threads {
			out = append(out, tid)
		}
	})
	sort.Ints(out)
	return out
}

// Regs reads the registers of stopped thread tid.
func (t *Tracer) Regs(tid int) (regs unix.PtraceRegs, err error) {
	err = ErrEnded
	t.do(func() { err = unix.PtraceGetRegs(tid, &regs) })
	return regs, err
}

// Started is the number of threads that started while traced.
func (t *Tracer) Started() (n int) {
	t.do(func() { n = t.started })
	return n
}

// Stopped is the process at a measured stop, every thread stopped: what
// Loop's measure may read of it, on the tracer's thread.
type Stopped struct{ t *Tracer }

// Threads are the stopped threads, sorted.
func (s Stopped) Threads() []int {
	var out []int
	for tid, th := range s.t.threads {
		if th.stopped {
			out = append(out, tid)
		}
	}
	sort.Ints(out)
	return out
}

// Regs reads the registers of stopped thread tid.
func (s Stopped) Regs(tid int) (regs unix.PtraceRegs, err error) {
	err = unix.PtraceGetRegs(tid, &regs)
	return regs, err
}

// Events is the number of ptrace events the tracer has seen.
func (t *Tracer) Events() (n int) {
	t.do(func() { n = t.events })
	return n
}

// Detach stops every thread (patience at most), then detaches each: the
// program's own pending signal is delivered, none of the watched ones.
// The process runs on as before. A thread that did not stop cannot be
// detached: the error names it, and the kernel detaches it when snapctl
// ends.
func (t *Tracer) Detach() error {
	var err error
	t.do(func() {
		if t.detached {
			return
		}
		if t.ended == nil {
			err = t.stopAll("stopping every thread to detach")
		}
		if derr := t.detachAll(); err == nil {
			err = derr
		}
	})
	t.Close()
	return err
}

// detachAll detaches every stopped thread, forgetting every thread.
func (t *Tracer) detachAll() error {
	var failed []int
	for tid, th := range t.threads {
		if th.dead {
			continue
		}
		if !th.stopped {
			failed = append(failed, tid)
			continue
		}
		// A thread in a group stop stays in it, as it was.
		if err := ptrace(unix.PTRACE_DETACH, tid, 0, uintptr(th.sig)); err != nil && err != unix.ESRCH {
			failed = append(failed, tid)
		}
	}
	t.threads = map[int]*thread{}
	t.detached = true
	if len(failed) > 0 {
		sort.Ints(failed)
		return fmt.Errorf("detaching from process %d: thread %s could not be detached; the kernel detaches it when snapctl ends", t.pid, joinInts(failed))
	}
	return nil
}
