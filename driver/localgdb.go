package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/runjson"
)

// What the run does when gdb runs the target as a process of its own
// (the launcher's Local: the native backend): a hit counted once, the
// scheduler lock an around_call's call outlives, the threads that ran
// during the call, and the fate of a process snapctl attach attached to.

// EventTargetLeft is the event that says how snapctl attach left the
// process when gdb could not detach from it.
const EventTargetLeft runjson.EventKind = "target-left"

// attachFate adds to the error a run ends with what became of the process
// snapctl attach attached to, when gdb could not detach from it, and
// records it as an event.
func (s *session) attachFate(err error) error {
	left := s.launcher.Fate()
	if left == "" {
		return err
	}
	s.rec.event(runjson.Event{Kind: EventTargetLeft, Message: left})
	var te *ToolError
	switch {
	case err == nil:
		s.term.clearStatus()
		fmt.Fprintf(s.opts.Warn, "warning: %s\n", left)
		return nil
	case errors.As(err, &te):
		te.Msg += "; " + left
		return err
	}
	return fmt.Errorf("%w; %s", err, left)
}

// newHitsOnly puts the agent's $_snapctl_hit() (native's agent/stepover.py) first in the condition of
// st's GDB/MI breakpoint under the native backend, so that gdb neither
// counts nor reports a hit that a signal during the step over the
// breakpoint makes it report again (docs/facts.md, fact 42).
func (s *session) newHitsOnly(ctx context.Context, st *bpState) error {
	if !s.launcher.Local() {
		return nil
	}
	cond := "$_snapctl_hit()"
	if c := st.bp.GdbCondition(); c != "" {
		cond += " && (" + c + ")"
	}
	if _, err := s.gdb.Do(ctx, gdb.BreakCondition(st.number, cond)); err != nil {
		return fmt.Errorf("setting the condition of breakpoint %q: %w", st.bp.Name, err)
	}
	return nil
}

// releaseLock goes on with an around_call whose call did not return
// within stop_timeout under scheduler-locking, and which an interrupt has
// stopped inside: it restores gdb's mode (every thread runs), records an
// event, and finishes the call's frame. It returns the stop that followed
// (the return, or whatever came first) or released false when the call's
// frame is not on the stack any more.
func (s *stopLoop) releaseLock(ctx context.Context, st *bpState, stop *runjson.Stop, hit int, restore func(context.Context) error, waits bool) (released bool, rec *mi.Record, err error) {
	lctx, cancel := context.WithTimeout(ctx, s.watch.limit)
	defer cancel()
	if err := restore(lctx); err != nil {
		return false, nil, err
	}
	r, err := s.gdb.Do(lctx, gdb.ThreadFrames(stop.Thread.ID))
	if err != nil {
		return false, nil, err
	}
	level := ""
	for _, f := range r.List("stack") {
		if f.String("func") == stop.Frame.Function {
			level = f.String("level") // the outermost: the call itself
		}
	}
	why := fmt.Sprintf("the call did not return within %v with only its thread running", s.watch.limit)
	if waits {
		why = "the call waits in the kernel for a lock or a condition (futex) that only a thread the lock keeps stopped can release"
	}
	s.rec.event(runjson.Event{Kind: runjson.EventSchedulerLockReleased, Thread: stop.Thread,
		Message: fmt.Sprintf("breakpoint %q hit %d: %s; scheduler-locking released, every thread runs until it returns", st.bp.Name, hit, why)})
	if level == "" {
		return false, nil, nil
	}
	if _, err := s.gdb.Do(lctx, gdb.FinishThread(stop.Thread.ID, level)); err != nil {
		return false, nil, err
	}
	rec, err = s.waitStopped(lctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil, err
		}
		return true, s.interrupt(), nil
	}
	return true, rec, nil
}

// taskSwitches returns the context switches of every thread of a native
// target by thread id (LWP), nil under massif: a thread that ran between
// two readings switched at least once.
func (s *stopLoop) taskSwitches() map[string]int64 {
	pid := s.launcher.Pid()
	if !s.launcher.Local() || pid == 0 {
		return nil
	}
	tids := proc.Tasks(pid)
	if tids == nil {
		return nil
	}
	out := make(map[string]int64, len(tids))
	for _, tid := range tids {
		st, err := proc.Status(tid)
		if err != nil {
			continue
		}
		var v, n int64
		fmt.Sscan(st["voluntary_ctxt_switches"], &v)
		fmt.Sscan(st["nonvoluntary_ctxt_switches"], &n)
		out[strconv.Itoa(tid)] = v + n
	}
	return out
}

// threadsRan names the threads other than self whose context switches
// changed since before (taskSwitches): they ran.
func (s *stopLoop) threadsRan(before map[string]int64, self runjson.Thread) []string {
	if before == nil {
		return nil
	}
	after := s.taskSwitches()
	lwp := ""
	if i := strings.Index(self.TargetID, "LWP "); i >= 0 {
		lwp = strings.TrimSuffix(self.TargetID[i+4:], ")")
	}
	var ran []string
	for tid, n := range after {
		if tid == lwp {
			continue
		}
		if m, ok := before[tid]; !ok || m != n {
			ran = append(ran, "LWP "+tid+": ran (context switches)")
		}
	}
	sort.Strings(ran)
	return ran
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// futexWaitConfirm is how long the thread that makes an around_call's
// call must stay waiting in futex(2) before the wait is taken for one on
// a thread that scheduler-locking keeps stopped.
const futexWaitConfirm = 50 * time.Millisecond

// watchFutexWait returns a context that ends with ctx, or as soon as the
// thread of stop, which runs an around_call's call alone under
// scheduler-locking, waits in futex(2): a lock or condition that only
// another thread can release, and every other thread is stopped, so the
// call would wait the whole stop_timeout. waits says whether that ended
// it. Natively only; the context ends with ctx elsewhere.
func (s *stopLoop) watchFutexWait(ctx context.Context, stop *runjson.Stop) (wctx context.Context, waits func() bool) {
	wctx, cancel := context.WithCancel(ctx)
	var seen atomic.Bool
	pid := s.launcher.Pid()
	lwp := ""
	if i := strings.Index(stop.Thread.TargetID, "LWP "); i >= 0 {
		lwp = strings.TrimSuffix(stop.Thread.TargetID[i+4:], ")")
	}
	if !s.launcher.Local() || pid == 0 || lwp == "" || stop.SchedulerLocking != "on" {
		return wctx, func() bool { cancel(); return false }
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/task/%s/syscall", pid, lwp)
		var since time.Time
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			data, err := os.ReadFile(path)
			if f := strings.Fields(string(data)); err != nil || len(f) == 0 || f[0] != strconv.Itoa(syscall.SYS_FUTEX) {
				since = time.Time{}
				continue
			}
			if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) >= futexWaitConfirm {
				seen.Store(true)
				cancel()
				return
			}
		}
	}()
	return wctx, func() bool {
		cancel()
		<-done
		return seen.Load()
	}
}
