package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// recorder is the run's record of its stops, whichever path took them
// (gdb's agent or GDB/MI) and whichever backend measured them. It is the
// one place that numbers stops, in the order they happened; it keeps each
// breakpoint's summary and hit counts, applies max_hits and end_run_after,
// and spools the stops and events that run.json lists.
//
// Its ordering rules: the agent's stops are read (agentStops) inside the
// call that numbers a stop taken over MI, and before any stop gdb reports
// over MI is handled, so that they keep their place before it; a stop's
// measurement is read (flush) only once the target runs again, in the
// order the stops were numbered; the breakpoints' summaries are all made
// before any state points into them.
type recorder struct {
	bps   map[string]*bpState // by gdb breakpoint number
	order []*bpState          // plan order
	seq   int
	// pending are the stops numbered whose measurements are not read yet.
	pending []*stopRecord
	// stops, events and diffs spool the lists of run.json: the stops, the
	// events, and the backend's diffs.
	stops, events, diffs *spool
	// listed is the place in stops up to which run.json, last written,
	// lists the stops: the measurement files of the stops after it keep
	// a hidden name until a run.json that lists them is written (see
	// publish).
	listed mark
	// agentFirst reads the stops gdb's agent took since it was last
	// asked; nil when the agent does not run.
	agentFirst func() error
	// stage and read are the backend's: stage takes a stop's measurement
	// while the target is stopped, read reads it once it runs again.
	stage func(backend.Measurement, *runjson.Stop) (string, error)
	read  func(*stopRecord) error
	// onStop shows a recorded stop (the status line), onEvent an event
	// the user must see at once; endRun ends the run (end_run_after).
	onStop  func(*runjson.Stop)
	onEvent func(runjson.Event)
	endRun  func(why string)
}

// bpState is one plan breakpoint during the run.
type bpState struct {
	bp     *plan.Breakpoint
	sum    *runjson.BreakpointSummary
	number string // gdb's number
	hits   int    // hits counted as the plan counts them
	step   int    // hits one stop stands for (Every when gdb ignores the others)
	// hitSnapshots counts the hit-phase snapshots read, for end_run_after.
	hitSnapshots int
	// times is gdb's hit count as its last =breakpoint-modified gave it
	// (MI breakpoints; 0 until one came).
	times int
	// agent is set when gdb's agent takes the breakpoint's stops.
	agent bool
	// counting is set while the launcher may take over counting the
	// breakpoint's hits at its first stop; kernel once it has, and drop
	// then stops its counting (counted.go).
	counting, kernel bool
	drop             func()
	// addrs are the addresses the launcher counts hits at.
	addrs []uint64
	// frames are the frames gdb gave a measured stop run on to each of
	// addrs (counted.go, runTo): a later stop whose thread nothing
	// else looks at is taken where it stopped, with that frame.
	frames map[uint64]*mi.Value
	// resolvedAtStart says that the breakpoint resolved when inserted.
	resolvedAtStart bool
	// resolved says that gdb found a code location for the breakpoint at
	// some point of the run (see resolvedAt): after an exec it may be
	// pending again, but it was not unresolved.
	resolved bool
}

// setHits sets the breakpoint's hits as the plan counts them (after its
// skip) and run.json's summary of them: the stop loop's count, gdb's,
// the agent's and the launcher's all go through here.
func (st *bpState) setHits(n int) { st.hits, st.sum.Hits = n, n }

// setTimes sets the breakpoint's hits from a count of the times the
// program reached it, skipped hits included (gdb's, the agent's, the
// launcher's).
func (st *bpState) setTimes(times int) { st.setHits(max(times-st.bp.Skip, 0)) }

// newRecorder is the record of a run of p, whose summaries are m's, with
// its spools in the run directory dir: a full TMPDIR stops the
// measurements, but the stops already taken still reach run.json.
func newRecorder(p *plan.Plan, m *runjson.Manifest, keepOverride, dir string) *recorder {
	r := &recorder{
		bps:    make(map[string]*bpState),
		stops:  newSpool(".stops-*.jsonl"),
		events: newSpool(".events-*.jsonl"),
		diffs:  newSpool(".diffs-*.jsonl"),
	}
	r.stops.dir, r.events.dir, r.diffs.dir = dir, dir, dir
	for i := range p.Breakpoints {
		bp := &p.Breakpoints[i]
		if keepOverride != "" {
			bp.KeepSnapshots = keepOverride
		}
		sum := runjson.BreakpointSummary{Name: bp.Name, Location: bp.Location, Optional: bp.Optional}
		if bp.KeepSnapshots != plan.KeepAll {
			sum.KeepSnapshots = bp.KeepSnapshots
		}
		m.Breakpoints = append(m.Breakpoints, sum)
	}
	// Every summary is in place: m.Breakpoints does not move again.
	for i := range p.Breakpoints {
		r.order = append(r.order, &bpState{bp: &p.Breakpoints[i], sum: &m.Breakpoints[i], step: 1})
	}
	return r
}

// inserted records gdb's number for st's breakpoint, which gdb's agent
// takes the stops of when agent is set.
func (r *recorder) inserted(st *bpState, number string, agent bool) {
	st.number, st.agent = number, agent
	st.sum.Number = number
	r.bps[number] = st
}

// take numbers a stop that was just measured (m is what the backend's
// command wrote) and has the backend stage its measurement; the stop joins
// the pending ones, which flush reads once the target runs again. hitOf is
// the hit of a return-phase stop. A stop taken over MI comes after every
// stop the agent recorded: those are read and numbered first.
func (r *recorder) take(stop *runjson.Stop, st *bpState, hitOf *stopRecord, m backend.Measurement, at time.Time) error {
	if err := r.agentStops(); err != nil {
		return err
	}
	return r.number(stop, st, hitOf, m, at)
}

// agentStops reads and numbers the stops gdb's agent took since it was
// last asked: every stop gdb reports over MI, and every stop taken over
// MI, comes after them.
func (r *recorder) agentStops() error {
	if r.agentFirst == nil {
		return nil
	}
	return r.agentFirst()
}

// number numbers one stop, in the order stops are taken, and keeps its
// measurement.
func (r *recorder) number(stop *runjson.Stop, st *bpState, hitOf *stopRecord, m backend.Measurement, at time.Time) error {
	r.seq++
	stop.Seq = r.seq
	stop.Time = runjson.Stamp(at)
	raw, err := r.stage(m, stop)
	if err != nil {
		return err
	}
	t := &stopRecord{Stop: backend.Stop{Stop: stop, Breakpoint: st.bp, Raw: raw}, bp: st}
	if hitOf != nil {
		t.HitOf = &hitOf.Stop
	}
	r.pending = append(r.pending, t)
	return nil
}

// flush has the backend read the measurements of the pending stops in
// order, which feeds its analysis, and records the stops in run.json. On
// failure run.json lists no stop from there on, and their files go.
func (r *recorder) flush() error {
	pending := r.pending
	r.pending = nil
	for i, t := range pending {
		if err := r.read(t); err != nil {
			for _, u := range pending[i:] {
				if u.Raw != "" {
					os.Remove(u.Raw)
				}
			}
			return err
		}
		r.measured(t)
	}
	return nil
}

// measured is a stop's bookkeeping once its backend has read it, the same
// for every backend: the breakpoint's snapshot count, end_run_after, a
// measurement file kept the same as an earlier one (keep_snapshots:
// changed) or waiting for run.json to list it (publish), and the stop in
// run.json.
func (r *recorder) measured(t *stopRecord) {
	stop := t.Stop.Stop
	t.bp.sum.Snapshots++
	if stop.Phase == runjson.PhaseHit {
		t.bp.hitSnapshots++
		if n := t.bp.bp.EndRunAfter; n > 0 && t.bp.hitSnapshots == n {
			r.endRun(fmt.Sprintf("breakpoint %q took %d snapshots (end_run_after)", t.bp.bp.Name, n))
		}
	}
	if stop.Snapshot == "" && stop.SameAsSeq != 0 {
		t.bp.sum.Unchanged++
	}
	r.add(stop)
}

// add records a stop in run.json.
func (r *recorder) add(st *runjson.Stop) {
	r.stops.add(st)
	r.onStop(st)
}

// event records an event in run.json.
func (r *recorder) event(ev runjson.Event) {
	ev.Time = runjson.Stamp(time.Now())
	r.events.add(&ev)
	r.onEvent(ev)
}

// deleted records that st's breakpoint is gone after its last hit
// (max_hits), whichever path took its stops.
func (r *recorder) deleted(st *bpState) {
	st.sum.Deleted = true
	if st.drop != nil {
		st.drop()
	}
	delete(r.bps, st.number)
}

// allDeleted reports whether every breakpoint reached its max_hits.
func (r *recorder) allDeleted() bool {
	for _, st := range r.order {
		if !st.sum.Deleted {
			return false
		}
	}
	return true
}

// resumed checks gdb's answers to resumeCmds and records their effect:
// the breakpoint deleted at max_hits, or how many hits its next stop
// stands for.
func (r *recorder) resumed(st *bpState, cmds []mi.Command, errs []error) error {
	st.step = 1 // unless gdb is told to ignore hits
	for i, c := range cmds {
		switch err := errs[i]; {
		case c.Name == gdb.NameBreakDelete && err != nil:
			return fmt.Errorf("deleting breakpoint %q: %w", st.bp.Name, err)
		case c.Name == gdb.NameBreakDelete:
			r.deleted(st)
		case c.Name == gdb.NameBreakAfter && err != nil:
			return fmt.Errorf("setting the ignore count of %q: %w", st.bp.Name, err)
		case c.Name == gdb.NameBreakAfter:
			n, _ := strconv.Atoi(c.Args[1])
			st.step = n + 1
		case err != nil && !gdb.RefusedRunning(err):
			// (A target that runs already is as the resume leaves it:
			// see stopLoop.cont.)
			return fmt.Errorf("resuming the target: %w", err)
		}
	}
	return nil
}

// note keeps what gdb announces of the plan's breakpoints between stops:
// where a breakpoint resolved, and its new hit count (gdb's "times", sent
// with every hit, ignored ones included), which numbers the next stop of
// that breakpoint as gdb counts its hits.
func (r *recorder) note(rec *mi.Record) {
	st := r.bps[rec.String("bkpt.number")]
	if st == nil {
		return
	}
	switch rec.Class {
	case "breakpoint-created":
		st.resolvedAt(rec)
	case "breakpoint-modified":
		st.resolvedAt(rec)
		if !st.agent {
			if n, err := strconv.Atoi(rec.String("bkpt.times")); err == nil {
				st.times = n
			}
		}
	}
}

// settleUnresolved clears the unresolved mark of every breakpoint that
// resolved at some point of the run, or was hit.
func (r *recorder) settleUnresolved() {
	for _, st := range r.order {
		if st.resolved || st.hits > 0 || st.sum.Snapshots > 0 {
			st.sum.Unresolved = false
		}
	}
}

// neverHit reports the non-optional breakpoints without a single hit, or,
// when no breakpoint took a snapshot (nothing), every breakpoint,
// optional or not: a run that measured nothing never passes.
func (r *recorder) neverHit(nothing bool) error {
	var names, unresolved []string
	for _, st := range r.order {
		if st.hits == 0 && (!st.bp.Optional || nothing) {
			names = append(names, st.bp.Name)
			if st.sum.Unresolved {
				unresolved = append(unresolved, st.bp.Name)
			}
		}
	}
	if names == nil && !nothing {
		return nil
	}
	return &NeverHitError{Breakpoints: names, Unresolved: unresolved, Nothing: nothing}
}

// closeSpools removes the spools, once run.json is written.
func (r *recorder) closeSpools() {
	r.stops.close()
	r.events.close()
	r.diffs.close()
}

// publish gives the measurement files run.json lists now, in the run
// directory dir, their own names (see "The run directory").
func (r *recorder) publish(dir string) error {
	err := publish(dir, r.stops, r.listed)
	r.listed = r.stops.end()
	return err
}

// dropUnlisted removes the files no run.json lists, when run.json could
// not be written: the one written last stands, with its files. Their
// names are not read back from the stops' spool, which failed with
// run.json when the run directory is full: every measurement file is
// named after its stop's number (sites.SnapshotName), and under its
// hidden name (unlistedPath), or staged, it is one the run has not
// published; the run directory held none of them when the run began
// (clearRunFiles).
func (r *recorder) dropUnlisted(dir string) {
	hidden, _ := filepath.Glob(filepath.Join(dir, snapshotDir, ".[0-9]*"))
	for _, path := range hidden {
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
			os.Remove(path)
		}
	}
	r.listed = r.stops.end()
}
