package driver

import (
	"fmt"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// analysis turns the stops' snapshots into run.json's diffs and suspects as
// they arrive: one incremental snapshots.Series per breakpoint for the
// between-hits diffs, and a within-call diff per hit/return pair. It holds
// one summary per breakpoint, never every tree, so memory stays flat
// however many stops a run makes.
type analysis struct {
	opts   snapshots.Options
	series map[string]*snapshots.Series
	order  []string // breakpoints in plan order
	diffs  []*snapshots.Diff
	// problems are diffs that could not be made (a snapshot without a
	// tree), kept as events.
	problems []string
}

func newAnalysis(plan *breakpoints.Plan) *analysis {
	opts := snapshots.Options{
		Library: plan.Report.LibraryFrames,
		Ignore:  plan.Report.Ignore,
	}
	if g, err := snapshots.ParseGroupBy(plan.Report.GroupBy); err == nil {
		opts.GroupBy = g
	}
	if opts.GroupBy == snapshots.GroupByStack {
		opts.Depth = plan.Report.Depth
	}
	a := &analysis{opts: opts, series: make(map[string]*snapshots.Series)}
	for _, bp := range plan.Breakpoints {
		a.order = append(a.order, bp.Name)
	}
	return a
}

// addHit feeds the hit-phase snapshot of breakpoint bp taken at stop seq;
// from the second hit on it adds a between-hits diff.
func (a *analysis) addHit(bp string, seq int, snap *snapshots.Snapshot) {
	s := a.series[bp]
	if s == nil {
		s = snapshots.NewSeries(bp, a.opts)
		a.series[bp] = s
	}
	d, err := s.Add(seq, snap)
	if err != nil {
		a.problems = append(a.problems, err.Error())
		return
	}
	if d != nil {
		a.diffs = append(a.diffs, d)
	}
}

// addReturn adds the within-call diff of an around_call breakpoint.
func (a *analysis) addReturn(bp string, hitSeq int, hit *snapshots.Snapshot, retSeq int, ret *snapshots.Snapshot) {
	d, err := snapshots.DiffSnapshots(hit, ret, a.opts)
	if err != nil {
		a.problems = append(a.problems, fmt.Sprintf("within-call diff %d..%d of %q: %v", hitSeq, retSeq, bp, err))
		return
	}
	d.Kind, d.Breakpoint, d.FromSeq, d.ToSeq = "within-call", bp, hitSeq, retSeq
	a.diffs = append(a.diffs, d)
}

// report returns the analysis for the renderers and run.json.
func (a *analysis) report(title string) *snapshots.Report {
	var suspects []snapshots.Suspect
	for _, name := range a.order {
		if s := a.series[name]; s != nil {
			suspects = append(suspects, s.Suspects()...)
		}
	}
	snapshots.SortSuspects(suspects)
	if suspects == nil {
		suspects = []snapshots.Suspect{}
	}
	diffs := a.diffs
	if diffs == nil {
		diffs = []*snapshots.Diff{}
	}
	return &snapshots.Report{Title: title, Breakpoints: a.order, Diffs: diffs, Suspects: suspects}
}

// gate applies the plan's report.fail_on limits to the suspects.
func gate(limits breakpoints.FailOn, suspects []snapshots.Suspect) error {
	var over []string
	for _, s := range suspects {
		switch {
		case limits.GrowthPerHit > 0 && s.GrowthPerHit > limits.GrowthPerHit:
			over = append(over, fmt.Sprintf("%s %s per hit at breakpoint %q", snapshots.FrameString(s.Frame),
				snapshots.FormatDelta(s.GrowthPerHit), s.Breakpoint))
		case limits.TotalGrowth > 0 && s.TotalGrowth > limits.TotalGrowth:
			over = append(over, fmt.Sprintf("%s %s in total at breakpoint %q", snapshots.FrameString(s.Frame),
				snapshots.FormatDelta(s.TotalGrowth), s.Breakpoint))
		}
	}
	if over == nil {
		return nil
	}
	return &LeakError{GrowthPerHit: limits.GrowthPerHit, TotalGrowth: limits.TotalGrowth, Suspects: over}
}
