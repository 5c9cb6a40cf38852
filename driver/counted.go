package driver

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// Hits counted outside gdb (docs/design.md, "Hits counted in the
// kernel"): a backend whose launcher is a backend.Counter counts a
// breakpoint's hits itself once gdb's breakpoint has stopped the program
// the first time, and only the hits the plan measures stop it again, each
// as a signal stop of the thread that hit it.

// Counted says who counted a breakpoint's hits (run.json's
// breakpoints[].counted).
const (
	countedKernel = "kernel"
	countedGDB    = "gdb"
)

// takeOver is the first stop of gdb's breakpoint of st, which the
// launcher may count: every thread is stopped, and the counting passes to
// the launcher with gdb's count; gdb's breakpoint is disabled. When the
// launcher cannot, gdb keeps the breakpoint, with the plan's skip as the
// ignore count it was inserted without, and the run says why.
func (s *stopLoop) takeOver(ctx context.Context, st *bpState, rec *mi.Record) (bool, error) {
	st.counting = false // one try
	times, addrs, err := s.breakInfo(ctx, st.number)
	if err != nil {
		return false, s.watch.explain(ctx, err)
	}
	why := ""
	lwp := s.lwp(ctx, rec.String("thread-id"))
	switch {
	case len(addrs) == 0:
		why = "gdb gave no address for it"
	case lwp == 0:
		why = "the stopped thread's id is unknown"
	default:
		// gdb takes its breakpoint instruction out of the program's
		// memory before the kernel puts its probe there.
		if _, err := s.gdb.Do(ctx, gdb.BreakDisable(st.number)); err != nil {
			return false, s.watch.explain(ctx, err)
		}
		if why, err = s.counter.TakeOver(ctx, st.number, st.bp, addrs, times, lwp); err != nil {
			return false, s.watch.explain(ctx, err)
		}
		if why != "" {
			if _, err := s.gdb.Do(ctx, gdb.BreakEnable(st.number)); err != nil {
				return false, s.watch.explain(ctx, err)
			}
		}
	}
	st.times = times
	if why != "" {
		st.sum.CountedWhy = why
		if s.launcher.Local() && !st.resolvedAtStart {
			// As setup does for gdb's breakpoints (newHitsOnly),
			// which a pending one could not have; a breakpoint the
			// launcher may count has no condition of the plan's.
			if _, err := s.gdb.Do(ctx, gdb.BreakCondition(st.number, "$_snapctl_hit()")); err != nil {
				return false, s.watch.explain(ctx, err)
			}
		}
		if n := st.bp.Skip - times; n >= 0 {
			// The hits skip passes over, this one included.
			cmds := []mi.Command{gdb.BreakAfter(st.number, n), gdb.Continue()}
			_, errs := s.gdb.SendBatch(ctx, cmds)
			return false, s.rec.resumed(st, cmds, errs)
		}
		return s.atBreakpoint(ctx, st, rec)
	}
	st.kernel = true
	st.addrs = addrs
	st.sum.Counted = countedKernel
	counter, number := s.counter, st.number
	st.drop = func() { counter.Drop(number) }
	hit := times - st.bp.Skip
	if hit < 1 || !st.bp.ShouldSnapshot(hit) {
		st.setTimes(times)
		return false, s.resume(ctx, st, max(hit, 0))
	}
	return s.atHit(ctx, st, rec, hit)
}

// countedStop is a stop by the counter's signal: a measured hit that the
// launcher counted, or the program's own signal, which gdb was told not
// to pass on and is passed here.
func (s *stopLoop) countedStop(ctx context.Context, rec *mi.Record) (bool, error) {
	sig := rec.String("signal-name")
	number, hit, ok := s.counter.Stopped(sig, s.lwp(ctx, rec.String("thread-id")))

	if !ok {
		ev := runjson.Event{Kind: runjson.EventSignal, Signal: sig, Reason: "signal-received", Thread: runjson.Thread{ID: rec.String("thread-id")}, Frame: gdb.RecFrame(rec)}
		s.rec.event(ev)
		if _, err := s.gdb.Do(ctx, gdb.Console("signal "+sig)); err != nil {
			return false, fmt.Errorf("resuming the target with %s: %w", sig, err)
		}
		return false, nil
	}
	st := s.rec.bps[number]
	if hit == 0 {
		// A hit held while another thread's measured stop was on its
		// way: the kernel counted it, and the thread goes on.
		if lwp, ok := s.counter.Pending(); ok {
			return s.takePending(ctx, lwp)
		}
		return false, s.cont(ctx)
	}
	if st == nil {
		// Its last hit was taken meanwhile, before this one's stop
		// (gdb reports pending stops in no fixed order): it is
		// taken all the same.
		for _, o := range s.rec.order {
			if o.number == number && o.kernel {
				st = o
			}
		}
	}
	if st == nil || !st.kernel {
		return false, s.cont(ctx)
	}
	if pc, err := strconv.ParseUint(rec.String("frame.addr"), 0, 64); err == nil && !slices.Contains(st.addrs, pc) {
		if addr, ok := nextAddr(st.addrs, pc); ok {
			if f := st.frames[addr]; f != nil && !looksAtThread(st) {
				// The prologue between the probe and the
				// breakpoint's address changes nothing that the
				// stop reads: it is taken where the thread
				// stopped, in gdb's breakpoint's frame, without
				// running the thread on (a stop of its own).
				return s.atHit(ctx, st, withFrame(rec, f), hit)
			}
			at, err := s.runTo(ctx, rec, addr)
			if err != nil || at == nil {
				return false, err
			}
			if !atAddr(at, rec.String("thread-id"), addr) {
				s.rec.event(runjson.Event{Kind: runjson.EventHitsNotStopped, Thread: runjson.Thread{ID: rec.String("thread-id")}, Frame: gdb.RecFrame(at),
					Message: fmt.Sprintf("breakpoint %q: measured hit %d stopped at the function's entry, and its thread did not reach the breakpoint's address %#x", st.bp.Name, hit, addr)})
				return s.handleStop(ctx, at)
			}
			if st.frames == nil {
				st.frames = map[uint64]*mi.Value{}
			}
			st.frames[addr] = at.Results.Tuple("frame")
			rec = at
		}
	}
	return s.atHit(ctx, st, rec, hit)
}

// looksAtThread reports whether a stop of st reads more of its thread
// than the breakpoint's frame: its backtrace or every thread's frame,
// commands, around_call's run to the return.
func looksAtThread(st *bpState) bool {
	return st.bp.Threads != "" && st.bp.Threads != plan.ThreadsNone || st.bp.AroundCall || len(st.bp.Commands) > 0
}

// withFrame is the stop rec with frame f instead of its own.
func withFrame(rec *mi.Record, f *mi.Value) *mi.Record {
	fields := slices.Clone(rec.Results.Fields())
	for i := range fields {
		if fields[i].Name == "frame" {
			fields[i].Value = f
		}
	}
	r := *rec
	r.Results = mi.NewTuple(fields...)
	return &r
}

// takePending has gdb report the measured stop of thread lwp, which gdb
// holds while it reports held hits first (in no fixed order): that thread
// alone is resumed (scheduler-locking on), so that gdb reports the stop it
// holds, or the thread takes its signal at once. Resuming every thread
// instead would let each held one run a call further before gdb came to
// the measured stop (docs/facts.md, fact 94).
func (s *stopLoop) takePending(ctx context.Context, lwp int) (bool, error) {
	// The newest of gdb's threads with that id, as stops told it: the
	// kernel reuses the ids of threads that ended, gdb never its
	// numbers. A thread gone since is looked up again.
	tid, newest := "", 0
	for id, n := range s.lwps {
		if k, _ := strconv.Atoi(id); n == lwp && k > newest {
			tid, newest = id, k
		}
	}
	restore, err := s.gdb.LockScheduler(ctx, "on")
	if err != nil {
		return false, err
	}
	resumed := false
	if tid != "" {
		_, err := s.gdb.Do(ctx, gdb.ContinueThread(tid))
		resumed = err == nil
	}
	if !resumed {
		if tid, err = s.threadOf(ctx, lwp); err != nil || tid == "" {
			restore(ctx)
			if err != nil {
				return false, err
			}
			return false, s.cont(ctx)
		}
		if _, err := s.gdb.Do(ctx, gdb.ContinueThread(tid)); err != nil {
			restore(ctx)
			return false, fmt.Errorf("resuming thread %s: %w", tid, err)
		}
	}
	rec, err := s.waitStopped(ctx)
	if err != nil {
		return false, err
	}
	if err := restore(ctx); err != nil {
		return false, err
	}
	return s.handleStop(ctx, rec)
}

// threadOf is gdb's id of the thread whose kernel id is lwp, "" when gdb
// lists none.
func (s *stopLoop) threadOf(ctx context.Context, lwp int) (string, error) {
	r, err := s.gdb.Do(ctx, gdb.ThreadInfo())
	if err != nil {
		return "", fmt.Errorf("listing the threads: %w", err)
	}
	tid := ""
	for _, t := range gdb.ThreadsOf(r.List("threads")) {
		if targetLWP(t.TargetID) == lwp {
			tid = t.ID
		}
	}
	return tid, nil
}

// nextAddr is the address of addrs that a thread at pc, stopped in a
// function's prologue by a probe at its first instruction, runs into
// next: the nearest after pc, within a prologue's reach.
func nextAddr(addrs []uint64, pc uint64) (uint64, bool) {
	best, ok := uint64(0), false
	for _, a := range addrs {
		if a > pc && a-pc <= 64 && (!ok || a < best) {
			best, ok = a, true
		}
	}
	return best, ok
}

// runTo runs the thread of rec, stopped by a measured hit at its
// function's probe, on to addr, the breakpoint's address, every other
// thread held (scheduler-locking on), so that the stop is where gdb's
// breakpoint would have taken it (docs/facts.md, fact 95). It
// returns the stop that ended the run.
func (s *stopLoop) runTo(ctx context.Context, rec *mi.Record, addr uint64) (*mi.Record, error) {
	tid := rec.String("thread-id")
	restore, err := s.gdb.LockScheduler(ctx, "on")
	if err != nil {
		return nil, err
	}
	// One exchange: a stop costs each round trip to gdb again.
	res, errs := s.gdb.SendBatch(ctx, []mi.Command{
		gdb.BreakInsert("-t", "-p", tid, fmt.Sprintf("*%#x", addr)),
		gdb.Continue(),
	})
	for _, err := range errs {
		if err != nil {
			if errs[0] == nil {
				s.gdb.Do(ctx, gdb.BreakDelete(res[0].String("bkpt.number")))
			}
			restore(ctx)
			return nil, fmt.Errorf("running thread %s on to the breakpoint at %#x: %w", tid, addr, err)
		}
	}
	number := res[0].String("bkpt.number")
	at, err := s.waitStopped(ctx)
	if err != nil {
		return nil, err
	}
	if !atAddr(at, tid, addr) || at.String("bkptno") != number {
		// The temporary breakpoint goes only when it is hit.
		s.gdb.Do(ctx, gdb.BreakDelete(number))
	}
	if err := restore(ctx); err != nil {
		return nil, err
	}
	return at, nil
}

// atAddr reports whether rec is thread tid's stop at addr.
func atAddr(rec *mi.Record, tid string, addr uint64) bool {
	pc, err := strconv.ParseUint(rec.String("frame.addr"), 0, 64)
	return err == nil && pc == addr && rec.String("thread-id") == tid
}

// spentTrap handles rec when it is a SIGTRAP at an address the launcher
// counts: another thread's hit of gdb's breakpoint that gdbserver took
// before the counting passed to the kernel and reports once gdb's
// breakpoint is gone as a plain signal, the thread's pc still past the
// breakpoint instruction, since the probe's breakpoint instruction is at
// that address now (docs/facts.md, fact 84). The pc is put back on
// the address, and the thread then runs into the probe, which counts the
// hit. It reports whether rec was one.
func (s *stopLoop) spentTrap(ctx context.Context, rec *mi.Record) (bool, error) {
	if rec.String("signal-name") != "SIGTRAP" {
		return false, nil
	}
	pc, err := strconv.ParseUint(rec.String("frame.addr"), 0, 64)
	if err != nil {
		return false, nil
	}
	for _, st := range s.rec.order {
		if !st.kernel {
			continue
		}
		if slices.Contains(st.addrs, pc) {
			return true, nil
		}
		if slices.Contains(st.addrs, pc-1) {
			if _, err := s.gdb.Do(ctx, gdb.EvaluateThread(rec.String("thread-id"), fmt.Sprintf("$pc = %#x", pc-1))); err != nil {
				return true, fmt.Errorf("putting thread %s back on breakpoint %q: %w", rec.String("thread-id"), st.bp.Name, err)
			}
			return true, nil
		}
	}
	return false, nil
}

// breakInfo reads gdb's count of breakpoint number's hits and the
// addresses of its locations.
func (s *stopLoop) breakInfo(ctx context.Context, number string) (times int, addrs []uint64, err error) {
	r, err := s.gdb.Do(ctx, gdb.BreakInfo(number))
	if err != nil {
		return 0, nil, fmt.Errorf("reading breakpoint %s: %w", number, err)
	}
	for _, v := range r.List("BreakpointTable.body") {
		if n, err := strconv.Atoi(v.String("times")); err == nil {
			times = n
		}
		if a, err := strconv.ParseUint(v.String("addr"), 0, 64); err == nil {
			addrs = append(addrs, a)
		}
		for _, l := range v.List("locations") {
			if l.String("enabled") == "n" {
				continue
			}
			if a, err := strconv.ParseUint(l.String("addr"), 0, 64); err == nil {
				addrs = append(addrs, a)
			}
		}
	}
	return times, addrs, nil
}

var lwpPattern = regexp.MustCompile(`\bLWP (\d+)|^process (\d+)|^Thread \d+\.(\d+)`)

// lwp is the kernel's id of gdb's thread tid, 0 when unknown.
func (s *stopLoop) lwp(ctx context.Context, tid string) int {
	if n, ok := s.lwps[tid]; ok {
		return n
	}
	t, ok := s.gdb.Thread(tid)
	if !ok || t.TargetID == "" {
		r, err := s.gdb.Do(ctx, gdb.ThreadInfo(tid))
		if err != nil {
			return 0
		}
		threads := gdb.ThreadsOf(r.List("threads"))
		if len(threads) != 1 {
			return 0
		}
		t = threads[0]
		s.gdb.SetThread(tid, t)
	}
	n := targetLWP(t.TargetID)
	if n != 0 {
		if s.lwps == nil {
			s.lwps = map[string]int{}
		}
		s.lwps[tid] = n
	}
	return n
}

// targetLWP reads the kernel's thread id from gdb's target id of a
// thread: "Thread 0x7ffff7d8a740 (LWP 1234)", "LWP 1234", "process
// 1234", or gdbserver's "Thread 1233.1234".
func targetLWP(id string) int {
	m := lwpPattern.FindStringSubmatch(id)
	for _, g := range m[min(1, len(m)):] {
		if n, err := strconv.Atoi(g); err == nil {
			return n
		}
	}
	return 0
}

// kernelHits sets the hits of each breakpoint the launcher counted from
// its count, however the run ended; a breakpoint deleted after its last
// hit keeps the loop's. What kept measured hits from stopping becomes an
// event.
func (s *session) kernelHits() {
	counter := s.counter()
	if counter == nil {
		return
	}
	for _, st := range s.rec.order {
		if !st.kernel {
			continue
		}
		hits, problem, ok := counter.Hits(st.number)
		if !ok {
			continue
		}
		if problem != "" {
			s.rec.event(runjson.Event{Kind: runjson.EventHitsNotStopped, Message: fmt.Sprintf("breakpoint %q: %s", st.bp.Name, problem)})
		}
		if !st.sum.Deleted {
			st.setTimes(hits)
		}
	}
}
