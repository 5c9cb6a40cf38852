package driver

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// The stop taken by snapctl (docs/design.md): where every breakpoint's
// hits are counted in the kernel and a stop needs nothing of gdb, a
// launcher that can (backend.Seizer) has gdb leave the process once the
// breakpoints are resolved, and takes the measured stops itself as the
// process's tracer. Each stop is recorded as gdb's stop loop records one
// under threads: none: the breakpoint, its hit, the thread, the frame of
// the breakpoint's resolved location, and the measurement. Without gdb
// there are no gdb thread numbers: a thread's id is the kernel's.

// Who took the stops (run.json's native.stops_by).
const (
	stopsBySnapctl = "snapctl"
	stopsByGDB     = "gdb"
)

// seizable says why the run's stops cannot be taken by its launcher, ""
// when they may.
func (s *session) seizable() string {
	sz, ok := s.launcher.(backend.Seizer)
	if !ok || s.opts.AttachPID == 0 {
		return "gdb takes the stops of this run"
	}
	if why := sz.Seizable(); why != "" {
		return why
	}
	for _, st := range s.rec.order {
		switch {
		case !st.counting:
			return fmt.Sprintf("breakpoint %q is counted by gdb (%s)", st.bp.Name, st.sum.CountedWhy)
		case !st.resolved:
			return fmt.Sprintf("breakpoint %q is pending: gdb resolves it when its library loads", st.bp.Name)
		case st.bp.AroundCall:
			return fmt.Sprintf("breakpoint %q has around_call, which gdb runs", st.bp.Name)
		case len(st.bp.Commands) > 0:
			return fmt.Sprintf("breakpoint %q has commands, which gdb runs", st.bp.Name)
		case st.bp.Threads != "" && st.bp.Threads != plan.ThreadsNone:
			return fmt.Sprintf("breakpoint %q records threads: %s, which gdb reads", st.bp.Name, st.bp.Threads)
		}
	}
	return ""
}

// seize tries to have the launcher take the run's stops: ok when it
// did, and the run's stops are then taken by seizedLoop. Not ok, the run
// is gdb's as before, and run.json says why.
func (s *session) seize(ctx context.Context) (*seized, error) {
	why := s.seizable()
	if why == "" {
		sl := s.newStopLoop()
		var bps []backend.SeizedBreakpoint
		for _, st := range s.rec.order {
			_, addrs, err := sl.breakInfo(ctx, st.number)
			if err != nil {
				return nil, err
			}
			if len(addrs) == 0 {
				why = fmt.Sprintf("gdb gave no address for breakpoint %q", st.bp.Name)
				break
			}
			st.addrs = addrs
			bps = append(bps, backend.SeizedBreakpoint{Number: st.number, Skip: st.bp.Skip, Every: st.bp.Every, MaxHits: st.bp.HitLimit(), Addrs: addrs})
		}
		var frames map[string]runjson.Frame
		if why == "" {
			var err error
			if frames, err = s.locationFrames(ctx); err != nil {
				return nil, err
			}
			sz, w, err := s.launcher.(backend.Seizer).Seize(ctx, bps)
			if err != nil {
				return nil, err
			}
			if w == "" {
				if s.m.Native != nil {
					s.m.Native.StopsBy = stopsBySnapctl
				}
				for _, st := range s.rec.order {
					st.kernel, st.counting = true, false
					st.sum.Counted = countedKernel
					number, drop := st.number, sz.Drop
					st.drop = func() { drop(number) }
				}
				fmt.Fprintf(s.opts.Warn, "note: snapctl takes the measured stops itself, as the process's tracer: gdb has left it\n")
				return &seized{Seized: sz, frames: frames}, nil
			}
			why = w
		}
	}
	if s.m.Native != nil && s.opts.AttachPID != 0 {
		s.m.Native.StopsBy, s.m.Native.StopsByWhy = stopsByGDB, why
	}
	return nil, nil
}

// seized is a run whose stops its launcher takes, with the frame of each
// breakpoint's resolved location by gdb's number.
type seized struct {
	backend.Seized
	frames map[string]runjson.Frame
}

// locationFrames reads from gdb the frame of each breakpoint's first
// resolved location, which its stops record: a measured stop is taken at
// the function's entry, where nothing the stop reads differs from the
// breakpoint's address (as counted.go takes one).
func (s *session) locationFrames(ctx context.Context) (map[string]runjson.Frame, error) {
	out := map[string]runjson.Frame{}
	for _, st := range s.rec.order {
		r, err := s.gdb.Do(ctx, gdb.BreakInfo(st.number))
		if err != nil {
			return nil, fmt.Errorf("reading breakpoint %s: %w", st.number, err)
		}
		for _, v := range r.List("BreakpointTable.body") {
			if v.String("func") == "" {
				for _, l := range v.List("locations") {
					v = l
					break
				}
			}
			out[st.number] = gdb.FrameOf(v)
			break
		}
	}
	return out, nil
}

// seizedLoop takes the run's stops through the launcher until the
// process ends, the run's context ends (Ctrl-C, --timeout), the workload
// or end_run_after ends the run, every breakpoint took its last hit, or a
// stop fails. The launcher leaves the process at the teardown.
func (s *session) seizedLoop(ctx context.Context, sz *seized) error {
	sl := s.newStopLoop()
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	defer halt()
	workload := s.end.done
	workloadEnded := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-workload:
			close(workloadEnded)
		case <-stop:
		}
		halt()
	}()
	var failed error
	refreshed := time.Now()
	measure := func(h backend.SeizedHit) error {
		st := s.rec.bps[h.Number]
		if st == nil {
			// Its last hit was taken at this same stop.
			for _, o := range s.rec.order {
				if o.number == h.Number {
					st = o
				}
			}
		}
		if st == nil || st.sum.Deleted {
			return nil
		}
		st.setHits(max(st.hits, h.Hit))
		stop := &runjson.Stop{Breakpoint: st.bp.Name, Hit: h.Hit, Phase: runjson.PhaseHit, Frame: sz.frames[h.Number],
			Thread: runjson.Thread{ID: strconv.Itoa(h.Tid), TargetID: "LWP " + strconv.Itoa(h.Tid)}}
		data := sz.Measure()
		if data == nil {
			s.rec.event(runjson.Event{Kind: runjson.EventStopAbandoned, Thread: stop.Thread,
				Message: fmt.Sprintf("breakpoint %q hit %d: snapctl could not read the stopped process's heap; the stop is not recorded", st.bp.Name, h.Hit)})
			return nil
		}
		if err := s.rec.take(stop, st, nil, backend.Measurement{Data: data}, time.Now()); err != nil {
			return err
		}
		if st.bp.Done(h.Hit) {
			s.rec.deleted(st)
		}
		return nil
	}
	resumed := func() {
		if err := sl.flush(); err != nil {
			failed = err
			halt()
			return
		}
		if time.Since(refreshed) >= time.Second {
			s.refreshManifest()
			refreshed = time.Now()
		}
		if sl.attachedDone() {
			halt()
		}
	}
	end, ended, err := sz.Loop(stop, measure, resumed)
	if ferr := sl.flush(); ferr != nil && failed == nil {
		failed = ferr
	}
	switch {
	case failed != nil:
		return failed
	case err != nil:
		s.rec.event(runjson.Event{Kind: runjson.EventStopAbandoned, Message: err.Error()})
		return err
	case ended && end.Exited:
		code := end.Code
		s.m.Target.ExitCode = &code
		return s.end.err
	case ended && end.Exec:
		prog := "another program"
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.opts.AttachPID)); err == nil {
			prog = exe
		}
		s.m.Target.Exec = prog
		xerr := &ExecError{Pid: s.opts.AttachPID, Program: prog, Stops: s.rec.stops.len(), Attached: true}
		s.rec.event(runjson.Event{Kind: runjson.EventTargetExec, Message: xerr.Error()})
		return xerr
	case ended:
		sig := end.Signal
		if s.end.bySnapctl(sig) {
			return s.end.err
		}
		s.m.Target.Signal = &sig
		ce := &CrashError{Signal: sig, Frame: end.Frame}
		if end.Frame != nil && fatalSignals[sig] {
			s.m.Target.Crash = &runjson.Crash{Signal: sig, Backtrace: []runjson.Frame{*end.Frame}}
		}
		return ce
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	select {
	case <-workloadEnded:
		s.end.workloadEnded()
	default:
	}
	return s.end.err
}
