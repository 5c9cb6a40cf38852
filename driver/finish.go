package driver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// The end of a session: tearing the children down and writing the run
// directory (run.json, report.md, report.html) however the run ended.

// teardown ends gdb, vgdb and valgrind: gdb first (which ends vgdb), then
// valgrind's process group, with a grace period before signals. A gdb
// whose program is gone is only killed: reap waits for its end, after the
// run directory is written.
func (s *session) teardown(ended bool) (reap func()) {
	left := s.kids.leftovers(s.gdb.Pid(), s.launcher)
	// Detached is the native settings' (the backend that attaches sets
	// them from the session's start); a launcher that detaches without
	// them has nowhere to say so, and its run must still end.
	if s.launcher.BeforeClose(s.m.Target.ExitCode != nil || s.m.Target.Signal != nil) && s.m.Native != nil {
		s.m.Native.Detached = true
	}
	reap = func() {}
	var skip []int
	// gdb dies while the run directory is written (Run reaps it).
	if s.gdb != nil {
		if r := s.gdb.Close(ended && s.opts.AttachPID == 0); r != nil {
			reap, skip = r, []int{s.gdb.Pid()}
		}
	}
	s.launcher.AfterClose(ended)
	s.end.stop()
	// What left the children's process groups: a target that called
	// daemon() or setsid() under valgrind, a vgdb in a session of its own.
	// Not the dying gdb, which would hold the sweep up until it is gone.
	s.kids.sweepAtEnd(left, s.launcher, s.rec.event, skip...)
	if s.term.console != nil {
		s.term.console.Close(s.opts.Grace)
	}
	if s.term.status != nil {
		s.term.status.Clear()
	}
	return reap
}

// finish analyses what was collected, sets the status and writes run.json
// and report.md. It returns err, or the gate error when the run completed.
func (s *session) finish(res *Result, err error) (*Result, error) {
	s.m.FinishedAt = time.Now().UTC()
	// Stops whose actions were cut short still have their snapshots, and
	// so do the agent's stops since the loop last read its records.
	if s.agent != nil {
		if ferr := s.agent.read(); ferr != nil && err == nil {
			err = ferr
		}
	}
	if ferr := diskFull(s.rec.flush(), s.priv.dir, s.out.dir); ferr != nil && err == nil {
		err = ferr
	}
	s.rec.settleUnresolved()
	var crash *CrashError
	switch {
	case err == nil:
		s.m.Status = runjson.StatusCompleted
	case errors.As(err, &crash):
		s.m.Status = runjson.StatusCrashed
	case errors.Is(err, ErrTimeout):
		s.m.Status = runjson.StatusTimeout
	case errors.Is(err, ErrInterrupted):
		s.m.Status = runjson.StatusInterrupt
	default:
		s.m.Status = runjson.StatusFailed
	}
	s.m.Error = ""
	if err != nil {
		s.m.Error = strings.SplitN(err.Error(), "\n", 2)[0]
	}
	found := s.backend.Findings("snapctl run: " + backend.CommandLine(s.prog.argv))
	s.m.Suspects, s.m.Stacks, s.m.Verdicts, s.m.Modules, s.m.Phases = found.Suspects, found.Stacks, found.Verdicts, found.Modules, found.Phases
	if s.m.Native != nil {
		s.m.Native.Allocator = found.Allocator
		s.m.Native.StopsMeasuredBySnapctl = found.MeasuredItself
	}
	for _, p := range found.Problems {
		s.rec.events.add(&runjson.Event{Time: runjson.Stamp(time.Now()), Kind: runjson.EventAnalysisError, Message: p})
	}
	res.Report = found.Report
	res.Stops, res.Diffs = s.rec.stops.len(), s.rec.diffs.len()
	s.rec.unmeasured(s.m)
	if err == nil {
		// A completed run still fails for CI on a target that ended
		// before any breakpoint hit, on a breakpoint that never hit, then
		// on a fail_on limit.
		if err = endedEarly(s.m, s.end.why != ""); err == nil {
			err = s.rec.neverHit(measuredNothing(s.m))
		}
		if err == nil {
			err = s.backend.Gate(s.plan.Report.FailOn, found)
		}
		// A measurement that failed (the tool named) says so in run.json
		// and the reports, as a run that failed does.
		var tool *backend.ToolError
		if errors.As(err, &tool) {
			s.m.Error = strings.SplitN(err.Error(), "\n", 2)[0]
		}
	}
	code, reason := ExitStatus(err)
	s.m.ExitCode, s.m.ExitReason = &code, reason
	// A writing during the run must not land after this one.
	s.refreshed(true)
	if werr := writeManifest(s.out.dir, s.m, manifestSpools{stops: s.rec.stops, events: s.rec.events, diffs: s.rec.diffs}); werr != nil {
		return s.failedWriting(res, err, werr)
	}
	if werr := s.rec.publish(s.out.dir); werr != nil {
		return res, errors.Join(err, werr)
	}
	if werr := writeReport(filepath.Join(s.out.dir, reportFile), res); werr != nil {
		return res, errors.Join(err, werr)
	}
	if werr := s.writeHTML(res); werr != nil {
		return res, errors.Join(err, werr)
	}
	return res, err
}

// failedWriting ends a run whose last writing of run.json failed (werr; a
// full disk): the snapshots no run.json lists go, which gives the disk
// some room back, and run.json is written again, saying what happened:
// status failed, the error, and the stops the run.json written last
// listed (their snapshot files have their own names), none after. That
// one said that the run had not ended, and the report on the terminal
// said how the run itself ended; both now say that it failed. A disk that
// something else keeps full (a log, another run) takes the room back at
// once: the run.json written last is then overwritten in place, in the
// room that file already has, with the same stops. Where even that does
// not fit, the run.json written last stands, with the snapshots it lists.
func (s *session) failedWriting(res *Result, err, werr error) (*Result, error) {
	stops, listed := s.rec.stops.len(), s.out.stops
	s.rec.dropUnlisted(s.out.dir)
	werr = fmt.Errorf("writing run.json: %w", werr)
	err = errors.Join(err, werr)
	s.m.Status = runjson.StatusFailed
	s.m.Error = fmt.Sprintf("%s; run.json lists %d of the run's %d stops", strings.SplitN(werr.Error(), "\n", 2)[0], listed, stops)
	code, reason := ExitStatus(err)
	s.m.ExitCode, s.m.ExitReason = &code, reason
	res.Stops, res.Diffs = listed, 0
	var sp manifestSpools
	if listed > 0 {
		v, verr := s.rec.stops.view()
		if verr != nil {
			return res, err
		}
		defer v.closeView()
		v.n = min(v.n, listed)
		sp.stops = v
	}
	if writeManifest(s.out.dir, s.m, sp) != nil {
		// The spools take room too: the stops' view keeps its own.
		s.rec.closeSpools()
		if writeManifest(s.out.dir, s.m, sp) != nil {
			// A disk that something else keeps full has no room for a
			// second file: the run.json there, written when the run
			// began or last during it and listing these stops, is
			// overwritten in place (docs/facts.md, fact 144).
			overwriteManifest(filepath.Join(s.out.dir, manifestFile), s.m, sp.stops)
		}
	}
	return res, err
}

// overwriteManifest writes m, with the stops streamed from stops (nil for
// none) and no events or diffs, over the run.json at path in place, when it
// fits in that file's size: on a full disk there is no room for the
// temporary file an atomic writing needs. The file is torn if snapctl dies
// in the middle: only for the last resort.
func overwriteManifest(path string, m *runjson.Manifest, stops *spool) error {
	mm := *m
	mm.Suspects, mm.Stacks = []snapshots.Suspect{}, [][]snapshots.Frame{}
	var data bytes.Buffer
	if err := encodeManifest(&data, &mm, manifestSpools{stops: stops}); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// The room is the blocks the file has, a whole block at least.
	room := int64(-1)
	if st, err := f.Stat(); err == nil {
		room = st.Size()
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			room = max(room, sys.Blocks*512)
		}
	}
	if room < int64(data.Len()) {
		return fmt.Errorf("no room for run.json in place")
	}
	if _, err := f.WriteAt(data.Bytes(), 0); err != nil {
		return err
	}
	return f.Truncate(int64(data.Len()))
}

// refreshManifest rewrites run.json, status failed, with the stops and
// events so far, when some came since it was last written and its interval
// (Options.ManifestEvery) has passed, and then gives the snapshots it
// lists their own names (publish): a snapctl killed with SIGKILL cannot
// write it at the end, and run.json then still lists the stops taken up
// to its last writing, with their snapshots. Best effort: the final
// write says how the run ended. The diffs wait for the final writing:
// their sites name their stacks by number in the table the backend hands
// over only at the end (Findings), and a run.json whose diffs name stacks
// it does not hold cannot be read back (a killed attach --sites left
// one); the snapshots listed keep every figure the diffs are made of.
//
// The writing goes on in the background (refresh) while the loop goes on:
// it takes longer the more stops run.json lists, and a loop held up that
// long would find a backlog of the agent's stops, held
// in memory, that grew with the run.
func (s *session) refreshManifest() {
	if s.out.running != nil && !s.refreshed(false) {
		return
	}
	if n := s.rec.stops.len(); n == s.out.stops || time.Since(s.out.at) < s.opts.ManifestEvery {
		return
	}
	var sp manifestSpools
	var err error
	if sp.stops, err = s.rec.stops.view(); err != nil {
		return
	}
	if sp.events, err = s.rec.events.view(); err != nil {
		sp.close()
		return
	}
	// The loop goes on changing the manifest: the writing gets a copy.
	m := *s.m
	m.Breakpoints = slices.Clone(s.m.Breakpoints)
	if m.Native != nil {
		native := *m.Native
		m.Native = &native
	}
	r := &refresh{done: make(chan error, 1), stops: s.rec.stops.len(), to: sp.stops.end()}
	from := s.rec.listed
	s.out.running, s.out.at = r, time.Now()
	go func() {
		err := writeManifest(s.out.dir, &m, sp)
		if err == nil {
			// At once: the loop may not look for a while. The view
			// reads the stops written when it was made, no more.
			publish(s.out.dir, sp.stops, from)
		}
		sp.close()
		r.done <- err
	}()
}

// refresh is a writing of run.json in the background (refreshManifest).
type refresh struct {
	done  chan error
	stops int  // the stops it lists
	to    mark // where they end in the spool: their files are published
}

// refreshed reports whether the background writing of run.json is over,
// waiting for it with wait. The snapshots it lists took their own names
// once it was written; if it failed, they wait for the next writing.
func (s *session) refreshed(wait bool) bool {
	r := s.out.running
	if r == nil {
		return true
	}
	var err error
	if wait {
		err = <-r.done
	} else {
		select {
		case err = <-r.done:
		default:
			return false
		}
	}
	s.out.running = nil
	if err != nil {
		return true
	}
	s.out.stops, s.rec.listed = r.stops, r.to
	return true
}

// resolvedAt notes that gdb's =breakpoint-created or =breakpoint-modified
// record rec gives the breakpoint a code location.
func (st *bpState) resolvedAt(rec *mi.Record) {
	if addr := rec.String("bkpt.addr"); addr != "" && addr != "<PENDING>" && rec.String("bkpt.pending") == "" {
		st.resolved = true
	}
}

// endedEarly reports a target that exited with a failure before any
// breakpoint took a snapshot, on its own (snapctl did not end it): a
// program that could not start under the plan's conditions (memcached
// refusing its file limit under valgrind). One that exited with 0 ran
// without reaching the breakpoints, which neverHit reports.
func endedEarly(m *runjson.Manifest, ended bool) error {
	if !measuredNothing(m) || ended || m.Target.ExitCode == nil || *m.Target.ExitCode == 0 {
		return nil
	}
	return &EndedEarlyError{ExitCode: *m.Target.ExitCode}
}

// unmeasured records, as events, what the run could not measure: every
// pending breakpoint whose location never resolved, and a run in which no
// breakpoint took a snapshot, with why.
func (r *recorder) unmeasured(m *runjson.Manifest) {
	now := runjson.Stamp(time.Now())
	for _, b := range m.Breakpoints {
		if b.Unresolved {
			r.events.add(&runjson.Event{Time: now, Kind: runjson.EventBreakpointUnresolved,
				Message: fmt.Sprintf("breakpoint %q (%s) never resolved: no library loaded during the run defines its location", b.Name, b.Location)})
		}
	}
	if measuredNothing(m) {
		r.events.add(&runjson.Event{Time: now, Kind: runjson.EventNothingMeasured, Message: "nothing measured: " + whyNothing(m)})
	}
}

func measuredNothing(m *runjson.Manifest) bool { return backend.MeasuredNothing(m) }
func whyNothing(m *runjson.Manifest) string    { return backend.WhyNothing(m) }
