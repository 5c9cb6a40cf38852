package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// fatalSignals end the target unless it handles them; the frame where one
// arrived is kept as the crash site.
var fatalSignals = map[string]bool{
	"SIGSEGV": true, "SIGBUS": true, "SIGILL": true, "SIGFPE": true,
	"SIGABRT": true, "SIGSYS": true, "SIGKILL": true,
}

// loop handles gdb's *stopped records until the target exits, the context
// ends or a child fails. Once the context ends (the first Ctrl-C, SIGTERM
// or SIGHUP, or --timeout) no stop is taken: the agent stops measuring at
// once (haltAgent), and a stop gdb reports over MI ends the loop as it
// stands.
func (s *stopLoop) loop(ctx context.Context) error {
	if s.agent != nil {
		defer context.AfterFunc(ctx, haltAgent(s.priv))()
	}
	// The process that runs the target under gdb, when gdb does not
	// run it itself (valgrind).
	runnerDone := s.launcher.Ended()
	var runnerGone <-chan time.Time
	var goneAt time.Time // when the runner was found gone
	var gdbCPU uint64    // gdb's CPU time then, in clock ticks
	// The agent's records are read every agentPoll; without the agent,
	// stalls are looked for every second.
	every := time.Second
	if s.agent != nil {
		every = agentPoll
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			if s.agent != nil {
				if err := s.agent.read(); err != nil {
					return s.watch.explain(ctx, err)
				}
			}
			if err := s.watch.toolGone(); err != nil {
				return err
			}
			if err := s.watch.check(); err != nil {
				return err
			}
			if err := s.strayOverdue(); err != nil {
				return err
			}
			s.refresh()
			s.end.poll()
			if s.attachedDone() {
				return s.end.err
			}
		case <-ctx.Done():
			return s.interrupted(ctx)
		case <-s.gdb.Done():
			return s.watch.gdbGone()
		case <-s.end.done:
			s.end.workloadEnded()
			if s.attachedDone() {
				return s.end.err
			}
		case <-runnerDone:
			// The exit record normally follows at once; if it does not,
			// the process died under gdb's feet.
			if s.watch.killedAtEnd() {
				return s.end.err
			}
			runnerDone = nil
			runnerGone, goneAt, gdbCPU = time.After(3*time.Second), time.Now(), proc.Stat(s.gdb.Pid()).CPU
		case <-runnerGone:
			// gdb reports the end as it reaps the program; on a
			// loaded machine it may still be catching up (a --sites
			// run's gdb has much to do at the end): wait on while it
			// uses CPU, a minute at most.
			if pid := s.gdb.Pid(); pid != 0 && time.Since(goneAt) < time.Minute {
				if cpu := proc.Stat(pid).CPU; cpu != gdbCPU {
					gdbCPU, runnerGone = cpu, time.After(time.Second)
					break
				}
			}
			err := s.launcher.Gone()
			var killed *backend.TargetKilledError
			if errors.As(err, &killed) {
				// The signal snapctl sent to end the target is
				// no crash, however late gdb is to report it.
				if s.end.bySnapctl(killed.Signal) {
					return s.end.err
				}
				return killedCrash(killed)
			}
			return err
		case rec, ok := <-s.gdb.Events():
			if !ok {
				return s.watch.gdbGone()
			}
			if rec.Type == mi.TypeLog && gdb.LostTarget(rec.Text) {
				return s.watch.targetLost(rec.Text)
			}
			s.gdb.Note(rec)
			if rec.Type != mi.TypeExec || rec.Class != "stopped" {
				continue
			}
			if ctx.Err() != nil {
				// The target is stopped already; an exit is recorded.
				if gdb.ExitRecord(rec) {
					s.handleStop(ctx, rec)
				}
				return context.Cause(ctx)
			}
			done, err := s.handleStop(ctx, rec)
			if err != nil {
				if ctx.Err() != nil && s.gdb.Running() {
					// The context ended as the stop resumed the
					// target.
					return s.interrupted(ctx)
				}
				return s.watch.explain(ctx, err)
			}
			if done || s.attachedDone() {
				return s.end.err
			}
		}
	}
}

// interrupted ends the loop once the run's context has ended with the
// target running: the run ends whatever stopped the target, and an exit
// that came first is still recorded. A target left running would keep
// gdb from exiting (it refuses while the program runs), and its process
// from ending on snapctl's SIGTERM: under valgrind, a gdbserver still
// connected to a gdb that was killed holds the signal for it.
func (s *stopLoop) interrupted(ctx context.Context) error {
	if rec := s.gdb.Interrupt(); rec != nil && gdb.ExitRecord(rec) {
		s.handleStop(ctx, rec)
	}
	return context.Cause(ctx)
}

// agentHalt is the file, in the private directory, whose existence tells
// gdb's agent to take no more stops (agent.py, SnapBreakpoint.stop).
const agentHalt = "agent-halt"

// haltAgent returns what tells gdb's agent, whose private directory is
// priv, to take no more stops: the loop runs it the moment the run's
// context ends, whatever the loop is doing then, since the agent takes
// stops inside gdb without the loop, and an interrupt through vgdb takes
// a while (up to seconds under massif) to stop the target.
func haltAgent(priv string) func() {
	return func() {
		if f, err := os.OpenFile(filepath.Join(priv, agentHalt), os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
		}
	}
}

// handleStop deals with one *stopped record. It resumes the target unless
// the target has exited (done).
func (s *stopLoop) handleStop(ctx context.Context, rec *mi.Record) (done bool, err error) {
	if err := s.rec.agentStops(); err != nil {
		return false, err
	}
	if s.strayInterrupt && gdb.OwnStop(rec) {
		// The stop of an interrupt given up on: nothing of the
		// target's own.
		s.strayInterrupt = false
		return false, s.cont(ctx)
	}
	switch reason := rec.String("reason"); reason {
	case "breakpoint-hit":
		st := s.rec.bps[rec.String("bkptno")]
		if st == nil {
			s.rec.event(runjson.Event{Kind: runjson.EventUnexpectedStop, Reason: reason, Thread: runjson.Thread{ID: rec.String("thread-id")}, Frame: gdb.RecFrame(rec),
				Message: "breakpoint " + rec.String("bkptno") + " is not the plan's"})
			return false, s.cont(ctx)
		}
		if st.agent {
			return false, s.agentStopped(ctx, st)
		}
		if st.counting {
			return s.takeOver(ctx, st, rec)
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
		if s.end.bySnapctl(sig) {
			return true, nil
		}
		s.m.Target.Signal = &sig
		ce := &CrashError{Signal: sig}
		if c := s.m.Target.Crash; c != nil && c.Signal == sig {
			ce.Frame = userFrame(c.Backtrace)
		}
		return true, ce
	case "signal-received":
		if s.counter != nil && s.counter.Signal() != "" && rec.String("signal-name") == s.counter.Signal() {
			return s.countedStop(ctx, rec)
		}
		if s.counter != nil {
			if spent, err := s.spentTrap(ctx, rec); err != nil || spent {
				if err != nil {
					return false, err
				}
				// gdb does not pass SIGTRAP on.
				return false, s.cont(ctx)
			}
		}
		return false, s.onSignal(ctx, rec)
	case "exec":
		return true, s.execStop(rec)
	default:
		s.rec.event(runjson.Event{Kind: runjson.EventUnexpectedStop, Reason: reason, Thread: runjson.Thread{ID: rec.String("thread-id")}, Frame: gdb.RecFrame(rec)})
		return false, s.cont(ctx)
	}
}

// execStop ends the run at the target's exec, which the native backend's
// catchpoint stops (see followParent): the stops taken so far are kept,
// and teardown ends the process, or detaches from one snapctl attach
// attached to, breakpoints deleted first.
func (s *stopLoop) execStop(rec *mi.Record) error {
	prog := rec.String("new-exec")
	s.m.Target.Exec = prog
	err := &ExecError{Pid: s.launcher.Pid(), Program: prog, Stops: s.rec.stops.len(), Attached: s.opts.AttachPID != 0}
	s.rec.event(runjson.Event{Kind: runjson.EventTargetExec, Message: err.Error()})
	return err
}

// onSignal records a signal the target received and passes it on. A fatal
// one keeps the stack where it arrived: if the target dies of it, that is
// the crash site.
func (s *stopLoop) onSignal(ctx context.Context, rec *mi.Record) error {
	sig := rec.String("signal-name")
	ev := runjson.Event{Kind: runjson.EventSignal, Signal: sig, Reason: "signal-received", Thread: runjson.Thread{ID: rec.String("thread-id")}, Frame: gdb.RecFrame(rec)}
	if r, err := s.gdb.Do(ctx, gdb.Frames()); err == nil {
		ev.Backtrace = gdb.FramesOf(r.List("stack"))
	}
	s.rec.event(ev)
	if fatalSignals[sig] {
		s.m.Target.Crash = &runjson.Crash{Signal: sig, Thread: ev.Thread, Backtrace: ev.Backtrace}
	}
	return s.cont(ctx)
}

// cont resumes the target. A target that runs already, after an
// interrupt whose stop did not come in time, is as cont leaves it.
func (s *stopLoop) cont(ctx context.Context) error {
	if _, err := s.gdb.Do(ctx, gdb.Continue()); err != nil && !gdb.RefusedRunning(err) {
		return fmt.Errorf("resuming the target: %w", err)
	}
	return nil
}

// waitStopped waits for the next *stopped record within a stop (a
// thread run on alone, a step): the run ends as the loop would end it
// when gdb is gone, when gdb says it lost the target, and when a process
// of the launcher's (gdbserver) has died or stays stopped. gdb says
// "Target disconnected" of a gdbserver killed while it waits for one
// thread, and no stop ever comes.
func (s *stopLoop) waitStopped(ctx context.Context) (*mi.Record, error) {
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-s.gdb.Done():
			return nil, s.watch.gdbGone()
		case <-poll.C:
			if err := s.watch.toolGone(); err != nil {
				return nil, err
			}
			if err := s.watch.check(); err != nil {
				return nil, err
			}
		case rec, ok := <-s.gdb.Events():
			if !ok {
				return nil, s.watch.gdbGone()
			}
			if rec.Type == mi.TypeLog && gdb.LostTarget(rec.Text) {
				return nil, s.watch.targetLost(rec.Text)
			}
			s.gdb.Note(rec)
			if rec.Type == mi.TypeExec && rec.Class == "stopped" {
				return rec, nil
			}
		}
	}
}

// afterInterrupt goes on from the stop that an interrupt returned: a stop
// of the interrupt's own resumes the target; any other is handled as the
// stop loop would, so that a breakpoint hit or the target's exit is not
// lost. It reports whether the target has exited.
func (s *stopLoop) afterInterrupt(ctx context.Context, rec *mi.Record) (done bool, err error) {
	if rec == nil || gdb.OwnStop(rec) {
		return false, s.cont(ctx)
	}
	return s.handleStop(ctx, rec)
}

// stopFailed decides what a failure at a stop means: the end of the run
// when the context ended or gdb is gone, else a recorded event and the run
// goes on. It reports whether the target has exited meanwhile.
func (s *stopLoop) stopFailed(ctx context.Context, err error) (done bool, _ error) {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && s.watch.diagnose().stuck {
		// No interrupt can reach a target through a stopped or dead
		// process.
		return false, s.watch.stalled(err.Error())
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		s.rec.event(runjson.Event{Kind: runjson.EventStopAbandoned, Message: err.Error()})
		return s.afterInterrupt(ctx, s.interrupt())
	}
	return false, s.watch.explain(ctx, err)
}

func userFrame(frames []runjson.Frame) *runjson.Frame { return backend.UserFrame(frames) }

// attachedDone reports whether a run attached to a process has nothing
// left to do: every breakpoint reached its max_hits and was deleted, or
// the workload or end_run_after ended the run (ending.end). The
// process is left running (see the native backend's Launch.BeforeClose).
func (s *stopLoop) attachedDone() bool {
	if s.opts.AttachPID == 0 {
		return false
	}
	if s.end.why != "" {
		return true // the workload ended, or end_run_after
	}
	return s.rec.allDeleted()
}

// stopLoop is the stop loop: it waits for what gdb reports and handles
// each stop (a plan breakpoint's, measured over GDB/MI or left to the
// agent; a signal; the target's end), every and max_hits, until the run
// ends. It has what a stop needs and nothing of the run's start or end.
type stopLoop struct {
	gdb   *gdb.Conn
	rec   *recorder
	agent *agent // nil when the agent does not run
	// counter counts hits without gdb, nil when the launcher cannot.
	counter  backend.Counter
	backend  backend.Backend
	launcher backend.Launcher
	watch    *watch
	end      *ending
	plan     *plan.Plan
	opts     *Options
	// m is run.json's manifest, where the target's end is recorded.
	m *runjson.Manifest
	// priv is the private directory, where a stop's measurement is made;
	// dir the run directory.
	priv, dir string
	// refresh rewrites run.json while stops come in.
	refresh func()
	// lwps are the kernel's ids of gdb's threads, which never change;
	// targets their target ids, as a stop under threads: none keeps
	// them.
	lwps    map[string]int
	targets map[string]runjson.Thread
	// strayInterrupt is set when an interrupt's stop did not come within
	// Interrupt's wait: the target ran on, and the stop may come later,
	// which then only resumes it (handleStop). strayAt is when the
	// interrupt was given up on: the stop has until stop_timeout after
	// (strayOverdue).
	strayInterrupt bool
	strayAt        time.Time
}

// interrupt stops the running target (gdb.Conn.Interrupt) and returns
// the stop that followed, or nil, when none came in time: the target
// still runs then, and the interrupt's stop may come later.
func (s *stopLoop) interrupt() *mi.Record {
	rec := s.gdb.Interrupt()
	switch {
	case rec == nil:
		s.strayInterrupt, s.strayAt = true, time.Now()
	case gdb.OwnStop(rec):
		// SIGINTs pending together are one: a stray interrupt's
		// stop, if one was due, is this one.
		s.strayInterrupt = false
	}
	return rec
}

// strayOverdue ends the run when the stop of an interrupt given up on has
// not come within stop_timeout: gdb then waits for a stop the program
// cannot make, and nothing else would end the wait. When every thread
// that could take the interrupt's SIGINT is held stopped by gdb and the
// running ones block it (heaptrack's timer thread blocks every signal),
// the SIGINT stays pending for ever, as when a finish ran that timer
// thread alone (docs/facts.md, fact 159). The program's threads and
// their states are in the error.
func (s *stopLoop) strayOverdue() error {
	if !s.strayInterrupt {
		return nil
	}
	lasted := time.Since(s.strayAt)
	if lasted < s.watch.limit {
		return nil
	}
	what := fmt.Sprintf("the stop of snapctl's interrupt has not come %v after it was given up on (stop_timeout %v)", lasted.Round(100*time.Millisecond), s.watch.limit)
	if threads := threadStates(s.end.pid()); threads != "" {
		what += "; the program's threads: " + threads
	}
	return s.watch.stalled(what)
}

// threadStates lists process pid's threads with their states, "888
// stopped by a tracer (gdb 880, at 0x401136), 889 waiting", and the
// signals pending for the whole process: where each held thread stands
// and why an interrupt could not land (docs/facts.md, fact 159); "" when
// pid is 0 or gone.
func threadStates(pid int) string {
	if pid == 0 {
		return ""
	}
	var out []string
	for _, tid := range proc.Tasks(pid) {
		st := proc.Stat(tid)
		if !st.OK {
			continue
		}
		desc := fmt.Sprintf("%d %s", tid, describe(st))
		if st.State == 't' {
			desc += tracingStop(pid, tid)
		}
		out = append(out, desc)
	}
	list := strings.Join(out, ", ")
	if status, err := proc.Status(pid); err == nil && list != "" {
		if sigs := signalNames(status["ShdPnd"]); sigs != "" {
			list += "; pending for the process: " + sigs
		}
	}
	return list
}

// tracingStop says who traces thread tid, where it stands and what is
// pending for it alone: " (gdb 880, at 0x401136, pending SIGSTOP)". The
// kernel names the tracer by its thread (TracerPid), which for gdb is
// its main thread, its process id.
func tracingStop(pid, tid int) string {
	var parts []string
	status, err := proc.Status(tid)
	if err != nil {
		return ""
	}
	if tracer, _ := strconv.Atoi(status["TracerPid"]); tracer > 0 {
		parts = append(parts, fmt.Sprintf("%s %d", proc.Name(tracer), tracer))
	}
	if _, pc, ok := proc.StoppedAt(pid, tid); ok {
		parts = append(parts, fmt.Sprintf("at %#x", pc))
	}
	if sigs := signalNames(status["SigPnd"]); sigs != "" {
		parts = append(parts, "pending "+sigs)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// signalNames names the signals of a /proc status mask ("0000000000000002"
// is SIGINT), "" for none.
func signalNames(mask string) string {
	bits, err := strconv.ParseUint(mask, 16, 64)
	if err != nil {
		return ""
	}
	var names []string
	for i := range 64 {
		if bits&(1<<i) == 0 {
			continue
		}
		names = append(names, child.SignalName(syscall.Signal(i+1)))
	}
	return strings.Join(names, " ")
}

// newStopLoop is the stop loop of s, once gdb runs and the breakpoints
// are in.
func (s *session) newStopLoop() *stopLoop {
	return &stopLoop{gdb: s.gdb, rec: s.rec, agent: s.agent, counter: s.counter(), backend: s.backend, launcher: s.launcher, watch: s.watch,
		end: s.end, plan: s.plan, opts: &s.opts, m: s.m, priv: s.priv.dir, dir: s.out.dir, refresh: s.refreshManifest}
}

// flush has the backend read the measurements of the pending stops.
func (s *stopLoop) flush() error {
	if err := s.rec.flush(); err != nil {
		return diskFull(err, s.priv, s.dir)
	}
	return nil
}
