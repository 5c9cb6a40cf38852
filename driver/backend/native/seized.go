package native

import (
	"context"
	"debug/elf"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snapctl/snapctl/driver/backend"
	ptrace "github.com/snapctl/snapctl/driver/backend/native/tracer"
	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/arenas"
	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/runjson"
)

// The stop taken by snapctl (docs/design.md, "The stop taken by
// snapctl"): under snapctl attach, where every breakpoint's hits are
// counted in the kernel and a stop needs nothing of gdb, gdb sets the run
// up (attaches, resolves the breakpoints) and detaches with no breakpoint
// in; snapctl seizes every thread (package tracer), only then places the
// kernel's probes, and takes each measured stop itself: the other threads
// interrupted, the heap read in Go (quick.go), every thread resumed. gdb
// or gdbserver stopping and resuming every thread at each stop was most
// of what a stop cost a threaded server (docs/facts.md, facts 117, 125,
// 134).

// StopsEnv names the environment variable that, set to "gdb" in a run's
// environment, has gdb take an attach's measured stops as before;
// otherwise snapctl takes them itself wherever it can (Seizable).
const StopsEnv = "SNAPCTL_STOPS"

// seizedRun is a process whose stops snapctl takes as its tracer.
type seizedRun struct {
	b     *Launch
	tr    *ptrace.Tracer
	glibc arenas.Glibc
	sigs  ptrace.Signals
	// stopped is the process at the measured stop being taken.
	stopped *ptrace.Stopped
}

// Seizable says why snapctl cannot take the run's stops itself, "" when
// it may try (Seize checks the rest with the process in hand).
func (b *Launch) Seizable() string {
	switch {
	case b.attach == 0:
		return "snapctl run keeps gdb at its stops"
	case envValue(b.env.Children, StopsEnv) == "gdb":
		return StopsEnv + "=gdb: gdb takes the stops"
	case b.backend == nil || b.backend.sitesOn:
		return "--sites needs gdb at each stop"
	case b.backend.trim:
		return "native.trim_probe calls into the program at each stop"
	}
	if err := uprobes.Available(); err != nil {
		return "the kernel does not count hits here: " + err.Error()
	}
	return ""
}

func envValue(env []string, key string) string {
	v := ""
	for _, e := range env {
		if x, ok := strings.CutPrefix(e, key+"="); ok {
			v = x
		}
	}
	return v
}

// Seize has gdb leave process b.attach, stopped since gdb attached, and
// takes it over (backend.Seizer).
func (b *Launch) Seize(ctx context.Context, bps []backend.SeizedBreakpoint) (backend.Seized, string, error) {
	pid := b.attach
	if pid == 0 || !b.attached || b.count.counter != nil {
		return nil, "the process is not gdb's to hand over", nil
	}
	// Everything that can refuse is asked before gdb leaves.
	g, err := arenas.Find(pid, &arenas.Process{Pid: pid}, arenas.Query{DebugDirs: b.debugDirs(ctx)})
	switch {
	case err != nil:
		return nil, "glibc's allocator cannot be read from Go: " + err.Error(), nil
	case g.Why != "":
		return nil, "glibc's allocator cannot be read from Go: " + g.Why, nil
	case g.TcacheWhy != "":
		return nil, "glibc's tcaches cannot be read from Go: " + g.TcacheWhy, nil
	}
	name, sig, why := pickSignal(pid, pid)
	if why != "" {
		return nil, why, nil
	}
	holdName, hold := holdSignal(pid, pid, sig)
	type placed struct {
		bp     backend.SeizedBreakpoint
		probes []uint64
	}
	var where []placed
	for _, bp := range bps {
		var probes []uint64
		for _, a := range bp.Addrs {
			e := b.entry(ctx, a)
			if _, err := uprobes.Locate(pid, e); err != nil {
				return nil, "the kernel cannot probe " + bp.Number + ": " + err.Error(), nil
			}
			probes = append(probes, e)
		}
		where = append(where, placed{bp, probes})
	}
	counter, err := uprobes.New(pid, sig, hold, len(bps))
	if err != nil {
		return nil, "the kernel does not count hits here: " + err.Error(), nil
	}

	// gdb leaves: its breakpoints deleted, the process resumed as a
	// run's start resumes it, then interrupted and detached as at a
	// run's end. Detached straight from its attach's stop, the process
	// died of SIGSEGV.
	_, err = b.gdb.Do(ctx, gdb.BreakDelete())
	if err == nil {
		err = b.Start(ctx)
	}
	if err == nil {
		err = b.gdbDetach()
	}
	if err != nil {
		counter.Close()
		return nil, "", fmt.Errorf("having gdb leave process %d: %w", pid, err)
	}
	b.attached = false
	if b.trap != nil {
		if err := removeTrapHandler(pid, b.trap.page); err == nil {
			b.guardian.say("untrap")
		}
		b.trap = nil
	}
	b.guardian.end(true)
	b.guardian = nil
	b.closeGuard()

	s := &seizedRun{b: b, glibc: g, sigs: ptrace.Signals{Stop: sig, Hold: hold}}
	watch := []syscall.Signal{sig}
	if hold != 0 {
		watch = append(watch, hold)
	}
	s.tr, err = ptrace.Seize(pid, ptrace.Config{Watch: watch, Patience: stopPatience(b.env.Times.Stop)})
	if err != nil {
		counter.Close()
		return nil, "", fmt.Errorf("tracing process %d: %w", pid, err)
	}
	c := &b.count
	c.counter, c.signal, c.hold, c.used, c.ids = counter, name, holdName, name, map[string]int{}
	for i, p := range where {
		c.ids[p.bp.Number] = i
		c.numbers = append(c.numbers, p.bp.Number)
		rule := uprobes.Rule{Skip: p.bp.Skip, Every: p.bp.Every, Last: p.bp.MaxHits}
		if err := counter.Add(i, rule, p.probes, 0, 0); err != nil {
			b.closeCounter()
			s.tr.Detach()
			return nil, "", fmt.Errorf("placing the kernel's probes: %w", err)
		}
	}
	s.tr.ResumeAll()
	b.seized = s
	return s, "", nil
}

// patienceBase is how long the tracer waits for the stops it is owed on
// an idle machine: every thread's stop comes within a millisecond there
// (docs/facts.md, fact 134), and seconds under load.
const patienceBase = 2 * time.Second

// stopPatience is how long the tracer waits for owed stops: patienceBase
// times the machine's load per core (loadStretch, read at most once a
// second), at least patienceBase, at most limit (the
// run's stop_timeout) when it is set. Run out, the stop fails and the
// run ends, snapctl detaching: never a hang.
func stopPatience(limit time.Duration) func() time.Duration {
	var last time.Time
	var d time.Duration
	return func() time.Duration {
		if time.Since(last) < time.Second {
			return d
		}
		last = time.Now()
		d = time.Duration(float64(patienceBase) * loadStretch())
		if limit > 0 {
			d = min(d, limit)
		}
		return d
	}
}

// debugDirs is gdb's debug-file-directory, where libc's separate debug
// file is looked for: the one before snapctl pointed gdb away from the
// libraries' debug files.
func (b *Launch) debugDirs(ctx context.Context) []string {
	if b.libDebugDirs != nil {
		return b.libDebugDirs
	}
	r, err := b.gdb.Do(ctx, gdb.Console("show debug-file-directory"))
	if err == nil {
		text := r.Console()
		if i, j := strings.IndexByte(text, '"'), strings.LastIndexByte(text, '"'); i >= 0 && j > i {
			return filepath.SplitList(text[i+1 : j])
		}
	}
	return []string{"/usr/lib/debug"}
}

// Loop takes the process's stops (backend.Seized). measure and resumed
// run on the tracer's thread.
func (s *seizedRun) Loop(stop <-chan struct{}, measure func(backend.SeizedHit) error, resumed func()) (backend.SeizedEnd, bool, error) {
	c := &s.b.count
	ev, ok, err := s.tr.Loop(c.counter, s.sigs, stop, func(h ptrace.Hit, st ptrace.Stopped) error {
		if h.ID >= len(c.numbers) {
			return nil
		}
		s.stopped = &st
		defer func() { s.stopped = nil }()
		return measure(backend.SeizedHit{Number: c.numbers[h.ID], Hit: int(h.N), Tid: h.Tid})
	}, resumed)
	if err != nil || !ok {
		return backend.SeizedEnd{}, false, err
	}
	switch ev.Kind {
	case ptrace.Exited:
		return backend.SeizedEnd{Exited: true, Code: ev.Code}, true, nil
	case ptrace.Exec:
		return backend.SeizedEnd{Exec: true}, true, nil
	}
	end := backend.SeizedEnd{Signal: unix.SignalName(ev.Sig)}
	if ev.PC != 0 {
		end.Frame = symbolize(ev.File, ev.Base, ev.PC)
	}
	return end, true, nil
}

// symbolize names the function of file, mapped from base, that holds pc.
func symbolize(file string, base, pc uint64) *runjson.Frame {
	f := &runjson.Frame{Addr: fmt.Sprintf("%#x", pc), From: file}
	ef, err := elf.Open(file)
	if err != nil {
		return f
	}
	defer ef.Close()
	off := pc
	if ef.Type == elf.ET_DYN {
		off = pc - base
	}
	syms, err := elfsym.Read(ef, elfsym.Static|elfsym.Dynamic)
	if err != nil {
		return f
	}
	for _, sym := range syms {
		if elf.ST_TYPE(sym.Info) == elf.STT_FUNC && sym.Value <= off && off < sym.Value+max(sym.Size, 1) {
			f.Function = sym.Name
			break
		}
	}
	return f
}

// Measure is the measurement of the stopped process (backend.Seized):
// each thread's thread pointer is its fs_base.
func (s *seizedRun) Measure() []byte {
	if s.stopped == nil {
		return nil
	}
	pid := s.tr.Pid()
	var tps []uint64
	for _, tid := range s.stopped.Threads() {
		regs, err := s.stopped.Regs(tid)
		if err != nil {
			continue
		}
		tps = append(tps, regs.Fs_base)
	}
	return s.b.backend.quick.seized(pid, &s.glibc, tps)
}

// Drop stops counting breakpoint number's hits (backend.Seized).
func (s *seizedRun) Drop(number string) { s.b.Drop(number) }

// release ends the takeover: the probes out first, then every thread
// detached with none of snapctl's signals; the process runs on. It says
// how it left the process when it could not.
func (s *seizedRun) release() bool {
	s.b.closeCounter()
	if err := s.tr.Detach(); err != nil {
		s.b.left = err.Error()
		return false
	}
	return true
}
