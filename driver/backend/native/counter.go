package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/plan"
)

// Hits counted in the kernel (docs/design.md, "Hits counted in the
// kernel"): the launcher is the run's backend.Counter. gdb's breakpoint
// takes the first hit; there, every thread stopped, the launcher places
// uprobes at the breakpoint's addresses (package uprobes) and the run
// disables gdb's breakpoint. From then on only a measured hit stops the
// program: its thread gets stopSignals' signal, which gdb stops for and
// keeps from the program.

// stopSignals are the signals a measured hit may stop with, in order of
// preference: both are ignored by default, so that one that reaches the
// program (its tracer killed with it pending) does nothing. One the
// program catches or a thread blocks is not used.
var stopSignals = []struct {
	name string
	sig  syscall.Signal
}{{"SIGWINCH", syscall.SIGWINCH}, {"SIGURG", syscall.SIGURG}}

// holdSignals are the signals a held hit may stop with (uprobes.Counter's
// hold): one the tracer passes on without a stop (gdb's `handle SIG
// nostop noprint pass`) and the program ignores, neither caught nor
// blocked, other than the measured hits' signal.
var holdSignals = []struct {
	name string
	sig  syscall.Signal
}{{"SIGURG", syscall.SIGURG}, {"SIGWINCH", syscall.SIGWINCH}, {"SIGCHLD", syscall.SIGCHLD}}

// hitCost is what a hit costs when gdb counts it, for the warning of a
// run whose kernel refuses to.
const hitCost = "each hit, measured or not, then stops the program for about 0.3 ms (about 2 ms through gdbserver)"

// counting is the launcher's state of the hits it counts.
type counting struct {
	counter *uprobes.Counter
	signal  string
	hold    string // held hits' signal, "" when they stop with signal
	// used is the stop signal once the counter took over, kept after it
	// is closed: threads held with it may still have its stop pending.
	used    string
	ids     map[string]int // gdb's breakpoint number -> the counter's slot
	numbers []string
	warned  bool
}

// Counting says why the kernel cannot count bp's hits, "" when it can.
func (b *Launch) Counting(bp *plan.Breakpoint) string {
	if bp.GdbCondition() != "" {
		return "gdb evaluates its condition at every hit"
	}
	if bp.Skip == 0 && bp.Every <= 1 {
		// The agent takes such stops inside gdb, faster than a
		// signal's stop run on to the breakpoint.
		return "every hit is measured: each stops the program either way"
	}
	if optedOut(b.env.Children) {
		return "gdb counts hits: " + uprobes.ForceEnv + "=gdb is set"
	}
	err := uprobes.Available()
	if err == nil {
		return ""
	}
	if !b.count.warned {
		b.count.warned = true
		if w := b.warn(); w != nil {
			fmt.Fprintf(w, "warning: gdb counts every breakpoint's hits (%v): %s; as root, or with CAP_BPF and CAP_PERFMON, the kernel counts them and only measured hits stop\n", err, hitCost)
		}
	}
	return "the kernel does not count hits here: " + err.Error()
}

// optedOut reports whether the run's environment has SNAPCTL_HITS=gdb,
// which keeps every breakpoint with gdb, each hit a stop, as where the
// kernel refuses.
func optedOut(env []string) bool {
	v := ""
	for _, e := range env {
		if x, ok := strings.CutPrefix(e, uprobes.ForceEnv+"="); ok {
			v = x
		}
	}
	return v == "gdb"
}

func (b *Launch) warn() interface{ Write([]byte) (int, error) } {
	if b.backend == nil {
		return nil
	}
	return b.backend.cfg.Warn
}

// TakeOver has the kernel count the hits of gdb's breakpoint number from
// hits on (gdb's count, skip included), at addrs; thread lwp is stopped at
// one of them, its hit counted. Every thread is stopped and gdb's
// breakpoint is out of the program's memory. why says why the kernel
// cannot.
func (b *Launch) TakeOver(ctx context.Context, number string, bp *plan.Breakpoint, addrs []uint64, hits, lwp int) (why string, err error) {
	if b.pid == 0 {
		return "the program's process id is unknown", nil
	}
	c := &b.count
	if c.counter == nil {
		name, sig, why := pickSignal(b.pid, lwp)
		if why != "" {
			return why, nil
		}
		// A held hit stops with a signal gdb has its target pass on
		// without a stop: gdbserver keeps such a stop that comes
		// while it stops every thread, and passes the signal on as
		// they go on; gdb's own target lets the thread go as soon as
		// it sees its stop (docs/facts.md, fact 111). Either way a
		// thread let go is held again with the measured hits'
		// signal, a stop snapctl resumes (fact 116): under
		// `snapctl run` that is a held thread whose stop came before
		// the measured one's, where each held thread was a stop of
		// its own (fact 118).
		holdName, hold := holdSignal(b.pid, lwp, sig)
		counter, err := uprobes.New(b.pid, sig, hold, len(b.plan.Breakpoints))
		if err != nil {
			return "the kernel does not count hits here: " + err.Error(), nil
		}
		// gdb stops for the signal and never passes it on; a held
		// hit's signal it has its tracer pass on without a stop.
		handle := []string{"handle " + name + " stop print nopass"}
		if hold != 0 {
			handle = append(handle, "handle "+holdName+" nostop noprint pass")
		}
		for _, h := range handle {
			if _, err := b.gdb.Do(ctx, gdb.Console(h)); err != nil {
				counter.Close()
				return "", fmt.Errorf("having gdb %s: %w", h, err)
			}
		}
		c.counter, c.signal, c.hold, c.ids, c.used = counter, name, holdName, map[string]int{}, name
	}
	id, ok := c.ids[number]
	if !ok {
		id = len(c.numbers)
		if id >= len(b.plan.Breakpoints) {
			return "no slot is left in the kernel's counts", nil
		}
		c.ids[number] = id
		c.numbers = append(c.numbers, number)
	}
	rule := uprobes.Rule{Skip: bp.Skip, Every: bp.Every, Last: bp.HitLimit()}
	probes, window, err := b.entries(ctx, addrs, lwp)
	if err != nil {
		return "", err
	}
	skipTid := 0
	if slices.Equal(probes, addrs) {
		// The stopped thread runs the probed instruction again.
		skipTid = lwp
	}
	if err := c.counter.Add(id, rule, probes, uint64(hits+len(window)), skipTid); err != nil {
		var refused *uprobes.Refused
		if errors.As(err, &refused) {
			return "the kernel does not count hits here: " + err.Error(), nil
		}
		return err.Error(), nil
	}
	// The threads past a probe and short of gdb's breakpoint hit it
	// next: their hits follow gdb's count, and a measured one stops its
	// thread as the probe would have.
	for i, tid := range window {
		if h, ok := rule.Measured(uint64(hits + 1 + i)); ok {
			if err := c.counter.Stop(id, tid, h); err != nil {
				return "", err
			}
		}
	}
	return "", nil
}

// entries chooses where the kernel probes each of addrs, the addresses of
// a breakpoint's locations: the first instruction of the function, where
// the kernel emulates what is usually there (push %rbp, endbr64, a
// register move) at about 1 us a hit, rather than the breakpoint's
// address after the prologue, whose instruction the kernel single-steps
// out of line at about 12 us (docs/facts.md, fact 85). The stop of a
// measured hit then runs its thread on to the breakpoint's address
// (driver/counted.go, runTo). An address stays where it is when it is
// the function's first instruction, when gdb cannot say which function
// holds it, when the prologue before it jumps, calls or locks, or when
// an instruction of the function jumps to it or into the prologue.
// window lists the threads other than lwp stopped between a probe and
// its address (or just past the address, a hit whose report gdbserver
// holds, fact 84): they reach the address without passing the probe.
func (b *Launch) entries(ctx context.Context, addrs []uint64, lwp int) (probes []uint64, window []int, err error) {
	type span struct{ from, to uint64 }
	var spans []span
	for _, a := range addrs {
		e := b.entry(ctx, a)
		probes = append(probes, e)
		if e != a {
			spans = append(spans, span{e, a})
		}
	}
	if len(spans) == 0 {
		return probes, nil, nil
	}
	r, err := b.gdb.Do(ctx, gdb.ThreadInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("listing the threads: %w", err)
	}
	for _, t := range r.List("threads") {
		tid, ok := lwpOf(r.List("threads"), t.String("id"))
		if !ok || tid == lwp {
			continue
		}
		pc, err := strconv.ParseUint(t.String("frame.addr"), 0, 64)
		if err != nil {
			continue
		}
		for _, sp := range spans {
			if pc > sp.from && pc <= sp.to+1 {
				window = append(window, tid)
				break
			}
		}
	}
	return probes, window, nil
}

// entry is the first instruction of the function holding addr when the
// instructions from there to addr run straight into it, else addr.
func (b *Launch) entry(ctx context.Context, addr uint64) uint64 {
	r, err := b.gdb.Do(ctx, gdb.DisassembleAt(addr))
	if err != nil {
		return addr
	}
	insns := r.List("asm_insns")
	if len(insns) == 0 || insns[0].String("offset") != "0" {
		return addr
	}
	first, err := strconv.ParseUint(insns[0].String("address"), 0, 64)
	if err != nil || first >= addr || addr-first > 64 {
		return addr
	}
	reached := false
	for _, in := range insns {
		a, err := strconv.ParseUint(in.String("address"), 0, 64)
		if err != nil {
			return addr
		}
		if a == addr {
			reached = true
		}
		if a < addr && !straight(in.String("inst")) {
			return addr
		}
		// A jump to the breakpoint's address or into the prologue
		// (a loop's head, a tail call to itself) would skip the probe.
		if t, ok := target(in.String("inst")); ok && t > first && t <= addr {
			return addr
		}
	}
	if !reached {
		return addr
	}
	return first
}

// target is the address a direct jump or call as gdb prints it goes to
// ("jne    0x1150 <hot+23>").
func target(inst string) (uint64, bool) {
	f := strings.Fields(inst)
	if len(f) < 2 || !(strings.HasPrefix(f[0], "j") || strings.HasPrefix(f[0], "call") || strings.HasPrefix(f[0], "loop") || strings.HasPrefix(f[0], "xbegin")) {
		return 0, false
	}
	t, err := strconv.ParseUint(f[1], 0, 64)
	return t, err == nil
}

// straight reports whether an instruction as gdb prints it (AT&T) goes on
// to the next one, so that a thread run from the probe reaches the
// breakpoint's address: no jump, call, return, system call, trap, or
// lock-prefixed instruction.
func straight(inst string) bool {
	f := strings.Fields(inst)
	if len(f) == 0 {
		return false
	}
	op := f[0]
	for _, p := range []string{"j", "call", "ret", "loop", "lock", "syscall", "sysenter", "int", "ud", "hlt", "xbegin", "xabort", "iret", "enter", "leave", "bnd", "notrack"} {
		if strings.HasPrefix(op, p) {
			return false
		}
	}
	return true
}

// Signal is the signal of a measured hit's stop, "" while the kernel
// counts nothing.
func (b *Launch) Signal() string { return b.count.signal }

// Stopped says which measured hit a stop of thread lwp by signal is: gdb's
// breakpoint number and the hit, after skip. ok is false for a signal of
// the program's own.
func (b *Launch) Stopped(signal string, lwp int) (number string, hit int, ok bool) {
	c := &b.count
	if c.counter == nil || signal != c.signal {
		return "", 0, false
	}
	id, n, ok := c.counter.Take(lwp)
	if !ok || id >= len(c.numbers) {
		return "", 0, false
	}
	return c.numbers[id], int(n), true
}

// Pending is a thread whose measured stop is on its way, whose signal gdb
// has taken or will: ok false when there is none.
func (b *Launch) Pending() (lwp int, ok bool) {
	if b.count.counter == nil {
		return 0, false
	}
	return b.count.counter.Measuring()
}

// Hits is the kernel's count of breakpoint number's hits, skip included;
// problem says what kept measured hits from stopping, "" when nothing did.
func (b *Launch) Hits(number string) (hits int, problem string, ok bool) {
	c := &b.count
	id, ok := c.ids[number]
	if c.counter == nil || !ok {
		return 0, "", false
	}
	s, err := c.counter.Read(id)
	if err != nil {
		return 0, "", false
	}
	var p []string
	if s.Blocked > 0 {
		p = append(p, fmt.Sprintf("%d measured hits (the last: hit %d) did not stop: their thread blocked %s", s.Blocked, s.LastBlocked, c.signal))
	}
	if s.Failed > 0 {
		p = append(p, fmt.Sprintf("%d measured hits did not stop: the kernel refused to send %s", s.Failed, c.signal))
	}
	return int(s.Count), strings.Join(p, "; "), true
}

// Drop takes breakpoint number's probes out (its last hit was taken).
func (b *Launch) Drop(number string) {
	if id, ok := b.count.ids[number]; ok && b.count.counter != nil {
		b.probeLeft(b.count.counter.Remove(id))
	}
}

// probeLeft warns of a probe the kernel kept in the program after snapctl
// closed it: its hits may still send the program the stop signal.
func (b *Launch) probeLeft(err error) {
	if w := b.warn(); err != nil && w != nil {
		fmt.Fprintf(w, "warning: %v; until the kernel takes it out, its hits may send the program %s\n", err, b.count.signal)
	}
}

// closeCounter takes every probe out of the program: before gdb detaches
// or repairs anything, so that no probe's trap is taken for gdb's.
// quietSignal has gdb no longer stop for the measured hits' signal once
// the probes are gone: a thread held with it may still have its stop
// pending in gdb, which would stop a call of snapctl's in the process
// ("received a signal in another thread") and leave the calling thread
// in it. The signal is still kept from the program.
func (b *Launch) quietSignal(ctx context.Context) {
	if b.count.used != "" {
		b.gdb.Do(ctx, gdb.Console("handle "+b.count.used+" nostop noprint nopass"))
	}
}

func (b *Launch) closeCounter() {
	if b.count.counter != nil {
		b.probeLeft(b.count.counter.Close())
		b.count.counter = nil
		b.count.signal, b.count.hold = "", ""
	}
}

// pickSignal chooses the stop signal for process pid, whose thread lwp
// made the first hit: one that the program does not catch and that
// thread does not block, why when there is none. Other threads are not
// asked: glibc blocks every signal in a thread that creates one, and in
// the new thread until it starts, for a moment. A thread that blocks the
// signal at a measured hit later is not sent it, and the run says so
// (uprobes.Slot.Blocked).
func pickSignal(pid, lwp int) (name string, sig syscall.Signal, why string) {
	caught, err := sigMask(filepath.Join("/proc", strconv.Itoa(pid), "status"), "SigCgt:")
	if err != nil {
		return "", 0, fmt.Sprintf("reading the program's signals: %v", err)
	}
	blocked, err := sigMask(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(lwp), "status"), "SigBlk:")
	if err != nil {
		return "", 0, fmt.Sprintf("reading the thread's signals: %v", err)
	}
	for _, s := range stopSignals {
		bit := uint64(1) << (s.sig - 1)
		if caught&bit == 0 && blocked&bit == 0 {
			return s.name, s.sig, ""
		}
	}
	if blocked&(1<<(syscall.SIGWINCH-1)) != 0 && blocked&(1<<(syscall.SIGURG-1)) != 0 {
		return "", 0, fmt.Sprintf("thread %d blocks SIGWINCH and SIGURG, the signals a hit counted in the kernel stops with", lwp)
	}
	return "", 0, "the program catches or blocks SIGWINCH and SIGURG, the signals a hit counted in the kernel stops with"
}

// holdSignal chooses the signal of a held hit in process pid, whose
// thread lwp made the first hit: one of holdSignals that is not the
// measured hits' signal sig, that the program does not catch and that
// thread does not block; 0 when there is none, and held hits stop with
// sig.
func holdSignal(pid, lwp int, sig syscall.Signal) (string, syscall.Signal) {
	caught, err := sigMask(filepath.Join("/proc", strconv.Itoa(pid), "status"), "SigCgt:")
	if err != nil {
		return "", 0
	}
	blocked, err := sigMask(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(lwp), "status"), "SigBlk:")
	if err != nil {
		return "", 0
	}
	for _, s := range holdSignals {
		bit := uint64(1) << (s.sig - 1)
		if s.sig != sig && caught&bit == 0 && blocked&bit == 0 {
			return s.name, s.sig
		}
	}
	return "", 0
}

func sigMask(path, field string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path)
}
