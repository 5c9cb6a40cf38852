package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// stopRecord is a stop numbered and measured, whose measurement the
// backend kept (massif: its snapshot file, staged in the run directory)
// but has not yet read: that waits until the target runs again, so
// snapctl's own work overlaps the target's. Stop records wait in
// recorder.pending; flush has the backend read them, also when a run ends
// in the middle of a stop, so every kept measurement has its stop in
// run.json.
type stopRecord struct {
	backend.Stop
	bp *bpState
}

// atBreakpoint handles a stop at a plan breakpoint: snapshot, commands,
// around_call's return snapshot, every/max_hits, continue. The snapshots
// are read and analysed once the target runs again.
func (s *stopLoop) atBreakpoint(ctx context.Context, st *bpState, rec *mi.Record) (bool, error) {
	hit := st.hits + st.step
	if st.times > 0 {
		// gdb's own count, which also holds when another thread hit the
		// breakpoint while an earlier stop's actions ran.
		hit = max(st.times-st.bp.Skip, 1)
	}
	st.setHits(hit)
	if !st.bp.ShouldSnapshot(hit) {
		return false, s.resume(ctx, st, hit)
	}
	return s.atHit(ctx, st, rec, hit)
}

// atHit takes the stop of st's hit that the plan measures (rec): the
// snapshot, commands, around_call's return snapshot, then the resume.
func (s *stopLoop) atHit(ctx context.Context, st *bpState, rec *mi.Record, hit int) (bool, error) {
	st.setHits(max(st.hits, hit))
	timeout := s.watch.limit
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The threads, the backtrace and the snapshot only read the stopped
	// target: they go to gdb at once, without waiting for each answer.
	tid := rec.String("thread-id")
	stop := &runjson.Stop{Breakpoint: st.bp.Name, Hit: hit, Phase: runjson.PhaseHit}
	if f := gdb.RecFrame(rec); f != nil {
		stop.Frame = *f
	}
	resumes := st.bp.AroundCall || len(st.bp.Commands) > 0
	var then []mi.Command
	if !resumes {
		// Nothing else happens at this stop: the resume joins the
		// snapshot in one exchange with gdb, and the snapshot is read
		// while the target runs.
		then = resumeCmds(st, hit)
	}
	threads, err := s.inspectAndSnapshot(sctx, st, stop, tid, true, nil, then)
	if err != nil {
		return s.stopFailed(ctx, err)
	}
	if !resumes {
		return false, s.flush()
	}

	restore, err := s.gdb.LockScheduler(sctx, s.plan.SchedulerLocking)
	if err != nil {
		return s.stopFailed(ctx, err)
	}
	stop.SchedulerLocking = s.plan.SchedulerLocking
	var blocked string
	stop.Commands, blocked = s.runCommands(sctx, st.bp.Commands)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if blocked != "" {
		// A command held gdb past stop_timeout: it was interrupted,
		// and the rest of the stop is given up. The target has not
		// moved, so it is left as any stop is, with fresh time.
		s.rec.event(runjson.Event{Kind: runjson.EventStopAbandoned, Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: gdb command %q did not finish within %v; interrupted, stop abandoned", st.bp.Name, hit, blocked, timeout)})
		return s.leaveStop(ctx, context.WithoutCancel(ctx), st, hit, restore)
	}
	if !st.bp.AroundCall {
		return s.leaveStop(ctx, sctx, st, hit, restore)
	}

	// around_call: run to the return of the function and snapshot again.
	switches := s.taskSwitches()
	if _, err := s.gdb.Do(sctx, gdb.Finish()); err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		s.rec.event(runjson.Event{Kind: runjson.EventAroundCallFailed, Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: finish: %s", st.bp.Name, hit, gdb.Message(err))})
		return s.leaveStop(ctx, sctx, st, hit, restore)
	}
	// A call that waits on a lock a stopped thread holds is released at
	// once rather than at stop_timeout.
	wctx, futexWait := s.watchFutexWait(sctx, stop)
	rec2, err := s.waitStopped(wctx)
	waits := futexWait()
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		// The call does not return in time (blocked, or waiting for a
		// thread that valgrind does not schedule): give this stop up.
		irec := s.interrupt()
		released := false
		if irec != nil && gdb.OwnStop(irec) && s.launcher.Local() && stop.SchedulerLocking == "on" {
			// Natively the lock holds: the call may wait for a
			// thread that the lock keeps stopped. The deadline
			// releases it and the call goes on with every thread.
			released, rec2, err = s.releaseLock(ctx, st, stop, hit, restore, waits)
			if err != nil {
				return s.stopFailed(ctx, err)
			}
			restore = func(context.Context) error { return nil }
		}
		if released && gdb.Returned(rec2) {
			ret := &runjson.Stop{Breakpoint: st.bp.Name, Hit: hit, Phase: runjson.PhaseReturn, SchedulerLocking: stop.SchedulerLocking, SchedulerLockReleased: true}
			if f := gdb.RecFrame(rec2); f != nil {
				ret.Frame = *f
			}
			after, err := s.inspectAndSnapshot(ctx, st, ret, stop.Thread.ID, false, s.rec.pending[len(s.rec.pending)-1], nil)
			if err != nil {
				return s.stopFailed(ctx, err)
			}
			changed := append(gdb.ThreadsChanged(stop.Thread.ID, threads, after), "scheduler-locking released")
			ran := true
			ret.OtherThreadsRan, ret.ThreadsChanged = &ran, changed
			return s.leaveStop(ctx, ctx, st, hit, restore)
		}
		if released {
			irec = rec2
		}
		s.rec.event(runjson.Event{Kind: runjson.EventStopAbandoned, Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: the call did not return within %v; stop abandoned", st.bp.Name, hit, timeout)})
		if irec == nil || gdb.OwnStop(irec) || gdb.Returned(irec) {
			return s.leaveStop(ctx, context.WithoutCancel(ctx), st, hit, restore)
		}
		// Another stop came before the interrupt took effect.
		return s.otherStop(ctx, context.WithoutCancel(ctx), st, hit, restore, irec)
	}
	if r := rec2.String("reason"); !gdb.Returned(rec2) {
		// Another stop came first: a breakpoint in another thread, a
		// signal, the exit. The return snapshot of this hit is lost.
		s.rec.event(runjson.Event{Kind: runjson.EventAroundCallCutShort, Reason: r, Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: %s before the call returned", st.bp.Name, hit, r)})
		return s.otherStop(ctx, context.WithoutCancel(sctx), st, hit, restore, rec2)
	}
	ret := &runjson.Stop{Breakpoint: st.bp.Name, Hit: hit, Phase: runjson.PhaseReturn, SchedulerLocking: stop.SchedulerLocking}
	if f := gdb.RecFrame(rec2); f != nil {
		ret.Frame = *f
	}
	after, err := s.inspectAndSnapshot(sctx, st, ret, stop.Thread.ID, false, s.rec.pending[len(s.rec.pending)-1], nil)
	if err != nil {
		return s.stopFailed(ctx, err)
	}
	changed := gdb.ThreadsChanged(stop.Thread.ID, threads, after)
	changed = append(changed, s.threadsRan(switches, stop.Thread)...)
	ran := len(changed) > 0
	ret.OtherThreadsRan, ret.ThreadsChanged = &ran, changed
	return s.leaveStop(ctx, sctx, st, hit, restore)
}

// leaveStop restores gdb's scheduler-locking mode, resumes the target and
// then reads the stop's snapshots.
//
// A stop's commands may have run the target to its end (a breakpoint
// command that continues, a call that exits): gdb then refuses both, and
// the exit is the run's normal end.
func (s *stopLoop) leaveStop(ctx, sctx context.Context, st *bpState, hit int, restore func(context.Context) error) (bool, error) {
	if err := restore(sctx); err != nil {
		if rec := s.exitedMeanwhile(); rec != nil {
			return s.endAtStop(ctx, rec)
		}
		return s.stopFailed(ctx, err)
	}
	if err := s.resume(ctx, st, hit); err != nil {
		if rec := s.exitedMeanwhile(); rec != nil {
			return s.endAtStop(ctx, rec)
		}
		return false, err
	}
	return false, s.flush()
}

// exitedMeanwhile looks among the records gdb has sent for the target's
// exit, waiting briefly for one that is still on its way, and returns it;
// nil when the target has not exited. It is asked only once gdb refused
// a command at a stop, so the other records it reads are not needed.
func (s *stopLoop) exitedMeanwhile() *mi.Record {
	wait := time.After(time.Second)
	for {
		select {
		case rec, ok := <-s.gdb.Events():
			if !ok {
				return nil
			}
			s.gdb.Note(rec)
			if rec.Type == mi.TypeExec && rec.Class == "stopped" && gdb.ExitRecord(rec) {
				return rec
			}
		case <-s.gdb.Done():
			return nil
		case <-wait:
			return nil
		}
	}
}

// endAtStop ends a stop at which the target exited (rec): it reads the
// stop's snapshots and records the exit.
func (s *stopLoop) endAtStop(ctx context.Context, rec *mi.Record) (bool, error) {
	if err := s.flush(); err != nil {
		return false, err
	}
	return s.handleStop(ctx, rec)
}

// otherStop leaves an around_call stop at which another stop (rec) came
// before the call returned: it restores gdb's scheduler-locking mode,
// applies every and max_hits for the hit, reads the stop's snapshots and
// handles rec as the stop loop would.
func (s *stopLoop) otherStop(ctx, sctx context.Context, st *bpState, hit int, restore func(context.Context) error, rec *mi.Record) (bool, error) {
	if gdb.ExitRecord(rec) {
		// The call ended the program (exit() in it): there is no
		// target left to restore a setting on.
		return s.endAtStop(ctx, rec)
	}
	if err := restore(sctx); err != nil {
		// gdb cannot take a setting while the target is stopped:
		// resuming under the wrong mode, or at all, is no better.
		return false, s.watch.explain(ctx, err)
	}
	if err := s.settle(sctx, st, hit); err != nil {
		return false, s.watch.explain(ctx, err)
	}
	return s.endAtStop(ctx, rec)
}

// inspectAndSnapshot reads the thread state the plan asks for (and, with
// backtrace, the stopped thread's frames), takes the snapshot and then
// sends the commands in then (the resume of a stop with nothing else to
// do), all in one exchange with gdb. It fills stop's threads, frames and
// snapshot file and returns the threads.
func (s *stopLoop) inspectAndSnapshot(ctx context.Context, st *bpState, stop *runjson.Stop, tid string, backtrace bool, hitOf *stopRecord, then []mi.Command) ([]runjson.Thread, error) {
	tmp := filepath.Join(s.priv, "snap"+s.backend.Ext())
	mode := st.bp.Threads
	if st.bp.AroundCall {
		// Whether another thread ran during the call is told from
		// every thread's state before and after it.
		mode = plan.ThreadsAll
	}
	var cmds []mi.Command
	if backtrace && mode != plan.ThreadsNone {
		cmds = append(cmds, gdb.Frames("0", strconv.Itoa(gdb.BacktraceDepth-1)))
	}
	var threads []runjson.Thread
	switch mode {
	case plan.ThreadsAll:
		threads = s.gdb.KnownThreads(tid, stop.Frame)
		if threads == nil {
			cmds = append(cmds, gdb.ThreadInfo())
		}
	default:
		// Valgrind's details of a thread cost a round trip through vgdb:
		// they are read again only when the set of threads changed.
		// Under threads: none the stop keeps only the thread's target
		// id, read the same way.
		if t, ok := s.gdb.Thread(tid); ok {
			threads = []runjson.Thread{t}
		} else if t, ok := s.targets[tid]; ok && mode == plan.ThreadsNone {
			// A thread's target id never changes: threads that
			// started or ended since do not make it stale.
			threads = []runjson.Thread{t}
		} else {
			cmds = append(cmds, gdb.ThreadInfo(tid))
		}
	}
	snap := len(cmds)
	// A backend that measures the stopped target itself does so now,
	// before gdb's commands run; else gdb's command measures it.
	ms := backend.Measurement{Path: tmp}
	if m, ok := s.backend.(backend.SelfMeasurer); ok {
		if data := m.MeasureStopped(); data != nil {
			ms = backend.Measurement{Data: data}
		}
	}
	measured := snap
	if ms.Data == nil {
		cmds = append(cmds, gdb.Console(s.backend.Command(tmp)))
		measured++
	}
	// A backend that stages its measurement from the stopped target has
	// it resumed only once the stop is taken.
	stopped := backend.StagesStopped(s.backend)
	if !stopped {
		cmds = append(cmds, then...)
	}
	var res []*mi.Result
	var errs []error
	if len(cmds) > 0 {
		res, errs = s.gdb.SendBatch(ctx, cmds)
	}
	for i, err := range errs[:measured] {
		if err != nil {
			// The measurement's file may not fit in a full TMPDIR.
			return nil, diskFull(fmt.Errorf("at breakpoint %q: %s: %w", st.bp.Name, cmds[i].Name, err), s.priv, s.dir)
		}
	}
	if backtrace && mode != plan.ThreadsNone {
		stop.Backtrace = gdb.FramesOf(res[0].List("stack"))
		if len(stop.Backtrace) > 0 {
			stop.Frame = stop.Backtrace[0]
		}
	}
	switch {
	case threads == nil && mode == plan.ThreadsAll:
		threads = gdb.ThreadsOf(res[snap-1].List("threads"))
		s.gdb.SetThreads(threads)
	case threads == nil:
		threads = gdb.ThreadsOf(res[snap-1].List("threads"))
		if len(threads) == 1 {
			s.gdb.SetThread(tid, threads[0])
		}
	case mode != plan.ThreadsNone:
		threads = []runjson.Thread{threads[0]}
		f := stop.Frame
		threads[0].Frame = &f
	}
	if mode == plan.ThreadsNone {
		t := gdb.FindThread(threads, tid)
		stop.Thread = runjson.Thread{ID: t.ID, TargetID: t.TargetID, State: t.State}
		if t.TargetID != "" {
			if s.targets == nil {
				s.targets = map[string]runjson.Thread{}
			}
			s.targets[tid] = stop.Thread
		}
		threads = nil
	} else {
		stop.Thread = gdb.FindThread(threads, tid)
	}
	stop.Threads = threads
	// Errors come back as target-stream text with a ^done
	// (docs/facts.md, fact 5).
	if ms.Data == nil {
		if msg := s.backend.Failure(res[snap].Target()); msg != "" {
			return nil, &ToolError{Tool: s.backend.Tool(), Msg: fmt.Sprintf("snapshot at breakpoint %q failed", st.bp.Name), Tail: msg}
		}
	}
	// The agent's stops since the last one came before this snapshot,
	// also those while around_call's finish ran the call: the recorder
	// numbers them first.
	if err := s.rec.take(stop, st, hitOf, ms, time.Now()); err != nil {
		return nil, err
	}
	if len(then) > 0 {
		thenErrs := errs[measured:]
		if stopped {
			_, thenErrs = s.gdb.SendBatch(ctx, then)
		}
		if err := s.rec.resumed(st, then, thenErrs); err != nil {
			return nil, err
		}
	}
	return threads, nil
}

// runCommands runs a breakpoint's gdb commands and records their output.
// Frame arguments are printed as gdb's default does (see frameArguments).
// When a command still holds gdb as ctx's deadline passes (`shell sleep
// 30`, a Python loop), gdb is interrupted, the commands after it are not
// run, and blocked names it.
func (s *stopLoop) runCommands(ctx context.Context, cmds []string) (out []runjson.CommandOutput, blocked string) {
	if len(cmds) == 0 {
		return nil, ""
	}
	out = make([]runjson.CommandOutput, 0, len(cmds))
	for _, c := range cmds {
		o, err := s.command(ctx, c)
		out = append(out, o)
		if errors.Is(err, context.DeadlineExceeded) && context.Cause(ctx) == context.DeadlineExceeded {
			s.gdb.InterruptCommand()
			return out, c
		}
	}
	return out, ""
}

// command runs one of a breakpoint's gdb commands and records its output.
func (s *stopLoop) command(ctx context.Context, line string) (runjson.CommandOutput, error) {
	out := runjson.CommandOutput{Command: line}
	r, err := s.gdb.Do(ctx, gdb.Console(line))
	if err != nil {
		out.Error = gdb.Message(err)
		return out, err
	}
	out.Output = r.Console() + r.Target()
	return out, nil
}

// resume applies every and max_hits after a hit and continues the target.
func (s *stopLoop) resume(ctx context.Context, st *bpState, hit int) error {
	cmds := resumeCmds(st, hit)
	_, errs := s.gdb.SendBatch(ctx, cmds)
	return s.rec.resumed(st, cmds, errs)
}

// settle applies every and max_hits after a hit without resuming the
// target, for a stop that another stop took over.
func (s *stopLoop) settle(ctx context.Context, st *bpState, hit int) error {
	cmds := resumeCmds(st, hit)
	cmds = cmds[:len(cmds)-1] // the -exec-continue
	if len(cmds) == 0 {
		return nil
	}
	_, errs := s.gdb.SendBatch(ctx, cmds)
	return s.rec.resumed(st, cmds, errs)
}

// resumeCmds are the commands that apply every and max_hits after a hit
// and continue the target.
func resumeCmds(st *bpState, hit int) []mi.Command {
	var cmds []mi.Command
	if st.kernel {
		// gdb's breakpoint is disabled: the kernel's count decides.
		if st.bp.Done(hit) {
			cmds = append(cmds, gdb.BreakDelete(st.number))
		}
		return append(cmds, gdb.Continue())
	}
	if st.bp.Done(hit) {
		cmds = append(cmds, gdb.BreakDelete(st.number))
	} else if n := st.bp.NextIgnore(hit); n > 0 {
		// gdb skips the hits that take no snapshot, so each stop stands
		// for Every hits. The ignore count is re-armed after every stop.
		cmds = append(cmds, gdb.BreakAfter(st.number, n))
	}
	return append(cmds, gdb.Continue())
}
