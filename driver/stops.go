package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/snapshots"
)

// defaultStopTimeout bounds one stop's actions when the plan sets none.
const defaultStopTimeout = 30 * time.Second

// fatalSignals end the target unless it handles them; the frame where one
// arrived is kept as the crash site.
var fatalSignals = map[string]bool{
	"SIGSEGV": true, "SIGBUS": true, "SIGILL": true, "SIGFPE": true,
	"SIGABRT": true, "SIGSYS": true, "SIGKILL": true,
}

// loop handles gdb's *stopped records until the target exits, the context
// ends or a child fails.
func (s *session) loop(ctx context.Context) error {
	vgDone := s.vg.done
	var vgGone <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			s.interrupt()
			return context.Cause(ctx)
		case <-s.gdb.Done():
			return s.gdbGone()
		case <-vgDone:
			// The exit record normally follows at once; if it does not,
			// valgrind died under gdb's feet.
			vgDone = nil
			vgGone = time.After(3 * time.Second)
		case <-vgGone:
			return &ToolError{Tool: "valgrind", Msg: "exited without gdb reporting the target's exit", Err: exitErr(s.vg.err), Tail: logTail(filepath.Join(s.dir, valgrindLog), 8)}
		case rec, ok := <-s.gdb.Events():
			if !ok {
				return s.gdbGone()
			}
			if rec.Type == mi.TypeLog && lostTarget(rec.Text) {
				return s.targetLost(rec.Text)
			}
			if rec.Type != mi.TypeExec || rec.Class != "stopped" {
				continue
			}
			done, err := s.handleStop(ctx, rec)
			if err != nil {
				return s.explain(ctx, err)
			}
			if done {
				return nil
			}
		}
	}
}

func (s *session) gdbGone() error {
	return &ToolError{Tool: "gdb", Msg: "exited during the run", Err: s.gdb.Err()}
}

// lostTarget reports whether gdb's words mean that the connection to
// valgrind's gdbserver is gone.
func lostTarget(msg string) bool {
	return strings.Contains(msg, "Remote connection closed") ||
		strings.Contains(msg, "Remote communication error") ||
		strings.Contains(msg, "The program is not being run")
}

// targetLost names the child that took the connection down: valgrind when
// it was killed, else vgdb (valgrind still runs, or it ran the target to
// its end once vgdb was gone).
func (s *session) targetLost(what string) error {
	select {
	case <-s.vg.done:
	case <-time.After(500 * time.Millisecond):
	}
	what = strings.TrimSpace(what)
	if s.vg.exited() {
		var ee *exec.ExitError
		if errors.As(s.vg.err, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return &ToolError{Tool: "valgrind", Msg: fmt.Sprintf("was killed by %v during the run", ws.Signal()),
					Tail: logTail(filepath.Join(s.dir, valgrindLog), 8)}
			}
		}
	}
	return &ToolError{Tool: "vgdb", Msg: fmt.Sprintf("the connection to valgrind was lost (gdb: %q); vgdb exited or was killed", what)}
}

// explain turns an error that ends the run into one that names its cause.
func (s *session) explain(ctx context.Context, err error) error {
	var te *ToolError
	var me *mi.Error
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &te):
		return err
	case errors.Is(err, mi.ErrExited):
		return &ToolError{Tool: "gdb", Msg: "exited during the run", Err: s.gdb.Err()}
	case errors.As(err, &me) && lostTarget(me.Msg):
		return s.targetLost(me.Msg)
	}
	return err
}

// handleStop deals with one *stopped record. It resumes the target unless
// the target has exited (done).
func (s *session) handleStop(ctx context.Context, rec *mi.Record) (done bool, err error) {
	switch reason := rec.String("reason"); reason {
	case "breakpoint-hit":
		st := s.bps[rec.String("bkptno")]
		if st == nil {
			s.event(Event{Kind: "unexpected-stop", Reason: reason, Thread: Thread{ID: rec.String("thread-id")}, Frame: recFrame(rec),
				Message: "breakpoint " + rec.String("bkptno") + " is not the plan's"})
			return false, s.cont(ctx)
		}
		return s.atBreakpoint(ctx, st, rec)
	case "exited-normally":
		code := 0
		s.m.Target.ExitCode = &code
		return true, nil
	case "exited":
		// gdb prints the exit code in octal ("012" for 10).
		n, perr := strconv.ParseInt(rec.String("exit-code"), 8, 32)
		if perr != nil {
			n, _ = strconv.ParseInt(rec.String("exit-code"), 10, 32)
		}
		code := int(n)
		s.m.Target.ExitCode = &code
		return true, nil
	case "exited-signalled":
		sig := rec.String("signal-name")
		s.m.Target.Signal = &sig
		ce := &CrashError{Signal: sig}
		if c := s.m.Target.Crash; c != nil && c.Signal == sig {
			ce.Frame = userFrame(c.Backtrace)
		}
		return true, ce
	case "signal-received":
		return false, s.onSignal(ctx, rec)
	default:
		s.event(Event{Kind: "unexpected-stop", Reason: reason, Thread: Thread{ID: rec.String("thread-id")}, Frame: recFrame(rec)})
		return false, s.cont(ctx)
	}
}

// onSignal records a signal the target received and passes it on. A fatal
// one keeps the stack where it arrived: if the target dies of it, that is
// the crash site.
func (s *session) onSignal(ctx context.Context, rec *mi.Record) error {
	sig := rec.String("signal-name")
	ev := Event{Kind: "signal", Signal: sig, Reason: "signal-received", Thread: Thread{ID: rec.String("thread-id")}, Frame: recFrame(rec)}
	if r, err := s.send(ctx, "-stack-list-frames"); err == nil {
		ev.Backtrace = framesOf(r.List("stack"))
	}
	s.event(ev)
	if fatalSignals[sig] {
		s.m.Target.Crash = &Crash{Signal: sig, Thread: ev.Thread, Backtrace: ev.Backtrace}
	}
	return s.cont(ctx)
}

// atBreakpoint handles a stop at a plan breakpoint.
func (s *session) atBreakpoint(ctx context.Context, st *bpState, rec *mi.Record) (bool, error) {
	hit := st.hits + st.step
	st.hits, st.sum.Hits = hit, hit
	if !st.bp.ShouldSnapshot(hit) {
		return false, s.resume(ctx, st, hit)
	}
	timeout := s.plan.StopTimeout
	if timeout <= 0 {
		timeout = defaultStopTimeout
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	tid := rec.String("thread-id")
	threads, frames, err := s.inspect(sctx)
	if err != nil {
		return false, s.stopFailed(ctx, err)
	}
	stop := Stop{Breakpoint: st.bp.Name, Hit: hit, Phase: phaseHit, Thread: findThread(threads, tid), Threads: threads, Backtrace: frames}
	if len(frames) > 0 {
		stop.Frame = frames[0]
	} else if f := recFrame(rec); f != nil {
		stop.Frame = *f
	}

	resumes := st.bp.AroundCall || len(st.bp.Commands) > 0
	restore, err := s.lockScheduler(sctx, resumes)
	if err != nil {
		return false, s.stopFailed(ctx, err)
	}
	if resumes {
		stop.SchedulerLocking = s.plan.SchedulerLocking
	}
	hitSnap, err := s.snapshot(sctx, st, &stop)
	if err != nil {
		return false, s.stopFailed(ctx, err)
	}
	for _, c := range st.bp.Commands {
		stop.Commands = append(stop.Commands, s.command(sctx, c))
	}
	s.addStop(stop)
	if !st.bp.AroundCall {
		s.an.addHit(st.bp.Name, stop.Seq, hitSnap)
		if err := restore(sctx); err != nil {
			return false, s.stopFailed(ctx, err)
		}
		return false, s.resume(ctx, st, hit)
	}
	s.an.addHit(st.bp.Name, stop.Seq, hitSnap)

	// around_call: run to the return of the function and snapshot again.
	if _, err := s.send(sctx, "-exec-finish"); err != nil {
		s.event(Event{Kind: "around-call-failed", Thread: stop.Thread, Message: "finish: " + miMessage(err)})
		if err := restore(sctx); err != nil {
			return false, s.stopFailed(ctx, err)
		}
		return false, s.resume(ctx, st, hit)
	}
	rec2, err := s.waitStopped(sctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		// The call does not return in time (blocked, or waiting for a
		// thread that valgrind does not schedule): give up this stop.
		s.interrupt()
		s.event(Event{Kind: "stop-abandoned", Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: the call did not return within %v; stop abandoned", st.bp.Name, hit, timeout)})
		return false, s.resume(ctx, st, hit)
	}
	if r := rec2.String("reason"); r != "function-finished" && r != "location-reached" {
		// Another stop came first: a breakpoint in another thread, a
		// signal, the exit. The return snapshot of this hit is lost.
		s.event(Event{Kind: "around-call-cut-short", Reason: r, Thread: stop.Thread,
			Message: fmt.Sprintf("breakpoint %q hit %d: %s before the call returned", st.bp.Name, hit, r)})
		restore(context.WithoutCancel(sctx))
		return s.handleStop(ctx, rec2)
	}
	after, err := s.threadInfo(sctx)
	if err != nil {
		return false, s.stopFailed(ctx, err)
	}
	ret := Stop{Breakpoint: st.bp.Name, Hit: hit, Phase: phaseReturn, Thread: findThread(after, stop.Thread.ID), Threads: after,
		SchedulerLocking: stop.SchedulerLocking}
	if f := recFrame(rec2); f != nil {
		ret.Frame = *f
	}
	changed := threadsChanged(stop.Thread.ID, threads, after)
	ran := len(changed) > 0
	ret.OtherThreadsRan, ret.ThreadsChanged = &ran, changed
	retSnap, err := s.snapshot(sctx, st, &ret)
	if err != nil {
		return false, s.stopFailed(ctx, err)
	}
	s.addStop(ret)
	s.an.addReturn(st.bp.Name, stop.Seq, hitSnap, ret.Seq, retSnap)
	if err := restore(sctx); err != nil {
		return false, s.stopFailed(ctx, err)
	}
	return false, s.resume(ctx, st, hit)
}

// inspect collects every thread with its frame and the stopped thread's
// backtrace.
func (s *session) inspect(ctx context.Context) ([]Thread, []Frame, error) {
	threads, err := s.threadInfo(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.send(ctx, "-stack-list-frames")
	if err != nil {
		return nil, nil, fmt.Errorf("listing frames: %w", err)
	}
	return threads, framesOf(r.List("stack")), nil
}

func (s *session) threadInfo(ctx context.Context) ([]Thread, error) {
	r, err := s.send(ctx, "-thread-info")
	if err != nil {
		return nil, fmt.Errorf("listing threads: %w", err)
	}
	return threadsOf(r.List("threads")), nil
}

// lockScheduler sets the plan's scheduler-locking mode when the stop's
// actions resume the target and the mode differs from gdb's; the returned
// function restores gdb's mode. Valgrind ignores the mode (DESIGN.md fact
// 1); it is set so a plan behaves the same under a target that honours it.
func (s *session) lockScheduler(ctx context.Context, resumes bool) (func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	if !resumes || s.plan.SchedulerLocking == "" {
		return noop, nil
	}
	if s.schedMode == "" {
		r, err := s.send(ctx, "-gdb-show", "scheduler-locking")
		if err != nil {
			return nil, fmt.Errorf("reading scheduler-locking: %w", err)
		}
		s.schedMode = r.String("value")
	}
	prev := s.schedMode
	if prev == s.plan.SchedulerLocking {
		return noop, nil
	}
	if _, err := s.send(ctx, "-gdb-set", "scheduler-locking", s.plan.SchedulerLocking); err != nil {
		return nil, fmt.Errorf("setting scheduler-locking %s: %w", s.plan.SchedulerLocking, err)
	}
	return func(ctx context.Context) error {
		if _, err := s.send(ctx, "-gdb-set", "scheduler-locking", prev); err != nil {
			return fmt.Errorf("restoring scheduler-locking %s: %w", prev, err)
		}
		return nil
	}, nil
}

// snapshot takes a detailed massif snapshot into the private directory
// (absolute, no spaces: facts 5 and 6), moves it into the run directory and
// reads it once for its totals. It fills the stop's sequence number,
// snapshot path and totals and returns the parsed snapshot.
func (s *session) snapshot(ctx context.Context, st *bpState, stop *Stop) (*snapshots.Snapshot, error) {
	tmp := filepath.Join(s.priv, "snap.massif")
	r, err := s.send(ctx, "-interpreter-exec", "console", mi.Quote("monitor detailed_snapshot "+tmp))
	if err != nil {
		return nil, fmt.Errorf("taking a snapshot: %w", err)
	}
	// Success prints nothing; errors come back as target-stream text with
	// a ^done (fact 5).
	if msg := r.Target(); msg != "" {
		return nil, &ToolError{Tool: "valgrind", Msg: "snapshot failed", Tail: msg}
	}
	s.seq++
	stop.Seq = s.seq
	stop.Time = stamp(time.Now())
	stop.Snapshot = snapshotName(s.seq, st.bp.Name, stop.Hit, stop.Phase)
	dst := filepath.Join(s.dir, stop.Snapshot)
	if err := moveFile(tmp, dst); err != nil {
		return nil, fmt.Errorf("keeping snapshot %s: %w", stop.Snapshot, err)
	}
	f, err := snapshots.ParseFile(dst)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	if len(f.Snapshots) == 0 {
		return nil, fmt.Errorf("snapshot %s holds no snapshot", stop.Snapshot)
	}
	snap := f.Snapshots[0]
	stop.HeapBytes, stop.HeapExtraBytes, stop.StacksBytes = snap.HeapBytes, snap.HeapExtraBytes, snap.StacksBytes
	st.sum.Snapshots++
	return snap, nil
}

// command runs one of a breakpoint's gdb commands and records its output.
func (s *session) command(ctx context.Context, line string) CommandOutput {
	out := CommandOutput{Command: line}
	r, err := s.send(ctx, "-interpreter-exec", "console", mi.Quote(line))
	if err != nil {
		out.Error = miMessage(err)
		return out
	}
	out.Output = r.Console() + r.Target()
	return out
}

// resume applies every and max_hits after a hit and continues the target.
func (s *session) resume(ctx context.Context, st *bpState, hit int) error {
	if st.bp.Done(hit) {
		if _, err := s.send(ctx, "-break-delete", st.number); err != nil {
			return fmt.Errorf("deleting breakpoint %q: %w", st.bp.Name, err)
		}
		st.sum.Deleted = true
		delete(s.bps, st.number)
	} else if n := st.bp.NextIgnore(); n > 0 {
		// gdb skips the hits that take no snapshot, so each stop stands
		// for Every hits. The ignore count is re-armed after every stop.
		if _, err := s.send(ctx, "-break-after", st.number, strconv.Itoa(n)); err != nil {
			return fmt.Errorf("setting the ignore count of %q: %w", st.bp.Name, err)
		}
		st.step = n + 1
	}
	return s.cont(ctx)
}

// cont resumes the target.
func (s *session) cont(ctx context.Context) error {
	if _, err := s.send(ctx, "-exec-continue"); err != nil {
		return fmt.Errorf("resuming the target: %w", err)
	}
	return nil
}

// waitStopped waits for the next *stopped record.
func (s *session) waitStopped(ctx context.Context) (*mi.Record, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-s.gdb.Done():
			return nil, s.gdbGone()
		case rec, ok := <-s.gdb.Events():
			if !ok {
				return nil, s.gdbGone()
			}
			if rec.Type == mi.TypeExec && rec.Class == "stopped" {
				return rec, nil
			}
		}
	}
}

// interrupt stops a running target (best effort, bounded): used when the
// run is cancelled and when a stop's actions hang.
func (s *session) interrupt() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := s.gdb.Send(ctx, "-exec-interrupt"); err != nil {
		return
	}
	s.waitStopped(ctx)
}

// stopFailed decides what a failure at a stop means: the end of the run
// when the context ended or gdb is gone, else a recorded event and the run
// goes on.
func (s *session) stopFailed(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		s.event(Event{Kind: "stop-abandoned", Message: err.Error()})
		s.interrupt()
		return s.cont(ctx)
	}
	return s.explain(ctx, err)
}

func (s *session) addStop(st Stop) {
	s.m.Stops = append(s.m.Stops, st)
	if s.status != nil {
		s.status.update(st.Breakpoint, st.Phase, st.HeapBytes)
	}
}

func (s *session) event(ev Event) {
	ev.Time = stamp(time.Now())
	s.m.Events = append(s.m.Events, ev)
	switch ev.Kind {
	case "stop-abandoned", "around-call-cut-short", "around-call-failed":
		// Not prefixed "snapctl:": that line is kept for the one
		// message that says how the run ended.
		s.clearStatus()
		fmt.Fprintf(s.opts.Warn, "warning: %s\n", ev.Message)
	}
}

func (s *session) clearStatus() {
	if s.status != nil {
		s.status.clear()
	}
}

func recFrame(rec *mi.Record) *Frame {
	v := rec.Results.Tuple("frame")
	if v == nil {
		return nil
	}
	f := frameOf(v)
	return &f
}

// userFrame returns the innermost frame of the program's own code: the
// first whose source file is on this machine (the C library's sources
// usually are not), else the first with a file, else the first.
func userFrame(frames []Frame) *Frame {
	for i := range frames {
		if f := frames[i].FullName; f != "" {
			if _, err := os.Stat(f); err == nil {
				return &frames[i]
			}
		}
	}
	for i := range frames {
		if frames[i].File != "" {
			return &frames[i]
		}
	}
	if len(frames) > 0 {
		return &frames[0]
	}
	return nil
}

// findThread returns the thread with gdb id id from threads, or a thread
// with only the id.
func findThread(threads []Thread, id string) Thread {
	for _, t := range threads {
		if t.ID == id {
			t.Frame = nil // the stop's frame is recorded once
			return t
		}
	}
	return Thread{ID: id}
}
