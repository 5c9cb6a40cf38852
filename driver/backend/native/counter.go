package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/driver/mi"
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

// hitCost is what a hit costs when gdb counts it, for the warning of a
// run whose kernel refuses to.
const hitCost = "each hit, measured or not, then stops the program for about 0.3 ms (about 2 ms through gdbserver)"

// counting is the launcher's state of the hits it counts.
type counting struct {
	counter *uprobes.Counter
	signal  string
	ids     map[string]int // gdb's breakpoint number -> the counter's slot
	numbers []string
	warned  bool
}

// Counting says why the kernel cannot count bp's hits, "" when it can.
func (b *Launch) Counting(bp *plan.Breakpoint) string {
	if bp.GdbCondition() != "" {
		return "gdb evaluates its condition at every hit"
	}
	if !optedIn(b.env.Children) {
		return "gdb counts hits unless " + uprobes.ForceEnv + "=kernel is set"
	}
	if b.attach != 0 && b.backend != nil && b.backend.sitesOn {
		// Under attach --sites gdb is the process's tracer, with
		// heaptrack injected: a server whose snapctl was held stopped
		// (SIGSTOP, then SIGCONT) while its hits were counted in the
		// kernel died of SIGSEGV in TestHarmUnderLoad, 2 runs of 2,
		// where gdb's breakpoints leave it serving.
		return "attach --sites keeps gdb's breakpoints: the kernel's counting is not proven safe there yet"
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

// optedIn reports whether the run's environment has SNAPCTL_HITS=kernel:
// counting in the kernel is opt-in while a threaded program's measured
// stops can land at other moments than gdb's (docs/native.md, "Hits
// counted in the kernel").
func optedIn(env []string) bool {
	v := ""
	for _, e := range env {
		if x, ok := strings.CutPrefix(e, uprobes.ForceEnv+"="); ok {
			v = x
		}
	}
	return v == "kernel"
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
		counter, err := uprobes.New(b.pid, sig, len(b.plan.Breakpoints))
		if err != nil {
			return "the kernel does not count hits here: " + err.Error(), nil
		}
		// gdb stops for the signal and never passes it on.
		if _, err := b.gdb.Send(ctx, "-interpreter-exec", "console", mi.Quote("handle "+name+" stop print nopass")); err != nil {
			counter.Close()
			return "", fmt.Errorf("having gdb stop for %s: %w", name, err)
		}
		c.counter, c.signal, c.ids = counter, name, map[string]int{}
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
	if err := c.counter.Add(id, rule, addrs, uint64(hits), lwp); err != nil {
		var refused *uprobes.Refused
		if errors.As(err, &refused) {
			return "the kernel does not count hits here: " + err.Error(), nil
		}
		return err.Error(), nil
	}
	return "", nil
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
		b.count.counter.Remove(id)
	}
}

// closeCounter takes every probe out of the program: before gdb detaches
// or repairs anything, so that no probe's trap is taken for gdb's.
func (b *Launch) closeCounter() {
	if b.count.counter != nil {
		b.count.counter.Close()
		b.count.counter = nil
		b.count.signal = ""
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
