package sites

import (
	"fmt"
	"sort"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/snapshots"
)

// analysis turns the stops' snapshots into run.json's diffs and suspects as
// they arrive: one incremental snapshots.Series per breakpoint for the
// between-hits diffs, and a within-call diff per hit/return pair. It holds
// one summary per breakpoint, never every tree, and spools the diffs to
// disk keeping only the few the report shows, so memory stays flat however
// many stops a run makes.
type analysis struct {
	opts   snapshots.Options
	series map[string]*snapshots.Series
	order  []string // breakpoints in plan order
	// diffs spools every diff for run.json; shown keeps the largest of
	// each breakpoint and kind, for the reports.
	diffs func(any)
	// stacks numbers the distinct stacks of the spooled diffs and of the
	// suspects: run.json stores each once (its "stacks").
	stacks *snapshots.StackTable
	shown  map[shownKey][]*snapshots.Diff
	// counts counts every diff made, per breakpoint and kind (those
	// keep_snapshots: changed spools no diff for included), so that the
	// reports give true counts of the intervals in which no site changed.
	counts map[shownKey]*snapshots.IntervalCount
	// problems are diffs that could not be made (a snapshot without a
	// tree), kept as events.
	problems []string
}

func newAnalysis(plan *plan.Plan, allocFns, programs []string, diffs func(any)) *analysis {
	opts := snapshots.Options{
		Library: plan.Report.LibraryFrames,
		Ignore:  plan.Report.Ignore,
		// The xtmemory snapshots keep the frames of the allocation
		// wrappers (massif's --alloc-fn): the analysis passes them
		// through.
		AllocFns: allocFns,
		Programs: programs,
	}
	if g, err := snapshots.ParseGroupBy(plan.Report.GroupBy); err == nil {
		opts.GroupBy = g
	}
	if opts.GroupBy == snapshots.GroupByStack {
		opts.Depth = plan.Report.Depth
	}
	a := &analysis{opts: opts, series: make(map[string]*snapshots.Series),
		diffs: diffs, stacks: snapshots.NewStackTable(), shown: make(map[shownKey][]*snapshots.Diff),
		counts: make(map[shownKey]*snapshots.IntervalCount)}
	for _, bp := range plan.Breakpoints {
		a.order = append(a.order, bp.Name)
	}
	return a
}

// addHit feeds the hit-phase snapshot of breakpoint bp taken at stop seq,
// its hit number hit;
// from the second hit on it adds a between-hits diff. With same, the
// snapshot's tree is known to equal the previous hit's: the series still
// counts the interval, but the empty diff is not kept.
func (a *analysis) addHit(bp string, seq, hit int, snap *snapshots.HeapTree, same bool) {
	s := a.series[bp]
	if s == nil {
		s = snapshots.NewSeries(bp, a.opts)
		a.series[bp] = s
	}
	d, err := s.AddTree(seq, hit, snap)
	if err != nil {
		a.problems = append(a.problems, err.Error())
		return
	}
	if d == nil {
		return
	}
	if same {
		a.count(d)
	} else {
		a.add(d)
	}
}

// addSameHit feeds a hit-phase snapshot that was not parsed because its
// tree equals the previous hit's (see Sites.readTree); same is addHit's.
func (a *analysis) addSameHit(bp string, seq, hit int, same bool) {
	s := a.series[bp]
	if s == nil {
		a.problems = append(a.problems, fmt.Sprintf("series %q, stop %d: no earlier snapshot", bp, seq))
		return
	}
	d, err := s.AddSame(seq, hit)
	if err != nil {
		a.problems = append(a.problems, err.Error())
		return
	}
	if same {
		a.count(d)
	} else {
		a.add(d)
	}
}

// addReturn adds the within-call diff of an around_call breakpoint.
func (a *analysis) addReturn(bp string, hitSeq int, hit *snapshots.HeapTree, retSeq int, ret *snapshots.HeapTree) {
	d := snapshots.DiffHeapTrees(hit, ret, a.opts)
	d.Kind, d.Breakpoint, d.FromSeq, d.ToSeq = "within-call", bp, hitSeq, retSeq
	a.add(d)
}

// count counts d among its breakpoint's and kind's diffs.
func (a *analysis) count(d *snapshots.Diff) {
	k := shownKey{d.Breakpoint, d.Kind}
	c := a.counts[k]
	if c == nil {
		c = &snapshots.IntervalCount{Breakpoint: d.Breakpoint, Kind: d.Kind}
		a.counts[k] = c
	}
	c.Count(d)
}

// shownDiffs is how many diffs of each breakpoint and kind the reports
// show: the largest heap changes. run.json holds them all.
const shownDiffs = 10

// ShownDiffs is how many diffs of each breakpoint and kind the reports
// show.
const ShownDiffs = shownDiffs

// shownKey groups diffs for the reports.
type shownKey struct{ breakpoint, kind string }

// add counts d, spools it for run.json and keeps it for the reports when
// a site changed in it and it is among the shownDiffs largest heap
// changes of its breakpoint and kind; the reports count the others.
func (a *analysis) add(d *snapshots.Diff) {
	a.count(d)
	spooled := *d
	spooled.Sites = a.stacks.InternSites(d.Sites)
	a.diffs(&spooled)
	if len(d.Sites) == 0 {
		return
	}
	k := shownKey{d.Breakpoint, d.Kind}
	kept := a.shown[k]
	if len(kept) < shownDiffs {
		a.shown[k] = append(kept, d)
		return
	}
	small := 0
	for i, x := range kept {
		if smaller(x, kept[small]) {
			small = i
		}
	}
	if smaller(kept[small], d) {
		kept[small] = d
	}
}

// smaller reports whether diff a changed the heap less than b; of equal
// changes the later one is smaller, so the first are shown.
func smaller(a, b *snapshots.Diff) bool {
	da, db := abs(a.DeltaBytes), abs(b.DeltaBytes)
	if da != db {
		return da < db
	}
	return a.ToSeq > b.ToSeq
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// Findings ends the analysis: no snapshot can be read after it. They
// are the analysis for the renderers, every suspect and the diffs worth
// showing (run.json has all of them, spooled), and run.json's suspects
// and stacks.
func (s *Sites) Findings(title string) *backend.Findings {
	rep := s.an.report(title)
	return &backend.Findings{Report: rep, Suspects: s.an.stacks.InternSuspects(rep.Suspects), Stacks: s.an.stacks.Stacks(), Problems: s.an.problems}
}

// Gate applies the plan's report.fail_on limits to the suspects.
func (s *Sites) Gate(limits plan.FailOn, f *backend.Findings) error {
	return gate(limits, f.Report.Suspects)
}

// report returns the analysis for the renderers: every suspect, and the
// diffs worth showing. It ends the analysis: no snapshot can be added
// after it.
func (a *analysis) report(title string) *snapshots.Report {
	var suspects []snapshots.Suspect
	for _, name := range a.order {
		if s := a.series[name]; s != nil {
			suspects = append(suspects, s.Suspects()...)
		}
	}
	snapshots.SortSuspects(suspects)
	// The series are done with: their trees and summaries go before
	// report.html reads two snapshots of each breakpoint again.
	a.series = make(map[string]*snapshots.Series)
	if suspects == nil {
		suspects = []snapshots.Suspect{}
	}
	diffs := []*snapshots.Diff{}
	for _, kept := range a.shown {
		diffs = append(diffs, kept...)
	}
	// In the order made: a hit's between-hits diff, then its call's.
	sort.Slice(diffs, func(i, j int) bool {
		if diffs[i].ToSeq != diffs[j].ToSeq {
			return diffs[i].ToSeq < diffs[j].ToSeq
		}
		return diffs[i].Kind < diffs[j].Kind
	})
	counts := []snapshots.IntervalCount{}
	for _, c := range a.counts {
		counts = append(counts, *c)
	}
	sort.Slice(counts, func(i, j int) bool {
		if counts[i].FromSeq != counts[j].FromSeq {
			return counts[i].FromSeq < counts[j].FromSeq
		}
		return counts[i].Kind < counts[j].Kind
	})
	return &snapshots.Report{Title: title, Breakpoints: a.order, Diffs: diffs, Suspects: suspects, Intervals: counts}
}

// gate applies the plan's report.fail_on limits to the suspects.
func gate(limits plan.FailOn, suspects []snapshots.Suspect) error {
	var over []string
	for _, s := range suspects {
		switch {
		case limits.GrowthPerHit > 0 && s.GrowthPerHit > limits.GrowthPerHit:
			over = append(over, fmt.Sprintf("%s %s per hit at breakpoint %q", snapshots.ShortFrame(s.Frame),
				snapshots.FormatDelta(s.GrowthPerHit), s.Breakpoint))
		case limits.TotalGrowth > 0 && s.TotalGrowth > limits.TotalGrowth:
			over = append(over, fmt.Sprintf("%s %s in total at breakpoint %q", snapshots.ShortFrame(s.Frame),
				snapshots.FormatDelta(s.TotalGrowth), s.Breakpoint))
		}
	}
	if over == nil {
		return nil
	}
	return &backend.LeakError{GrowthPerHit: limits.GrowthPerHit, TotalGrowth: limits.TotalGrowth, Suspects: over}
}
