package snapshots

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// CompareSchema names the document `snapctl compare --format json` prints.
const CompareSchema = "snapctl.compare/v1"

// The statuses of a compared suspect.
const (
	StatusGone     = "gone"     // a suspect before, none after
	StatusPersists = "persists" // a suspect on both sides
	StatusNew      = "new"      // a suspect after only
)

// minSnapshots is the fewest hit snapshots of a breakpoint that can show a
// suspect: Series.Suspects needs two intervals.
const minSnapshots = 3

// CompareRun is what a comparison needs of one run: its backend, its
// breakpoints, how many hit snapshots each took, its suspects (massif, or
// native with per-site data) and each breakpoint's verdict (native).
type CompareRun struct {
	Dir     string
	Backend string // the run's backend, as its run.json names it (or the default)
	// Sites says that a native run recorded per-site data (native.sites),
	// so that its suspects compare as a massif run's do. A massif run
	// always has them, whatever Sites says.
	Sites bool
	// Verdicts says that the run judged each breakpoint with the native
	// backend's verdicts; a run without them has per-site suspects.
	Verdicts    bool
	Breakpoints []CompareBreakpoint
	Suspects    []Suspect
}

// CompareBreakpoint is one plan breakpoint of a compared run.
type CompareBreakpoint struct {
	Name, Location string
	// Snapshots counts its hit-phase snapshots (measurements, natively),
	// the series suspects and verdicts come from.
	Snapshots int
	// Verdict and Findings are the native backend's verdict of the
	// breakpoint and every finding that holds ("" and none when it has no
	// verdict); InUsePerHit its in-use heap growth per hit.
	Verdict     string
	Findings    []string
	InUsePerHit *int64
	// Unmeasured says why the run measured nothing at the breakpoint (a
	// heap of 0 B at every massif snapshot, no per-site snapshot in a
	// native --sites run): nothing of it is judged, so no fix is shown
	// against it.
	Unmeasured string
}

// The statuses of a compared finding, besides gone, persists and new.
const StatusUnjudged = "unjudged" // the other run cannot show whether it holds

// native verdicts that do not judge: too few stops to tell a trend.
const verdictTooFewStops = "too-few-stops"

// verdictHeapUnmeasured is a native verdict that cannot judge the heap:
// the allocator could not be read.
const verdictHeapUnmeasured = "heap-unmeasured"

// Comparison is two runs' suspects side by side, the document of
// `snapctl compare`.
type Comparison struct {
	Schema   string            `json:"schema"`
	Before   string            `json:"before"`
	After    string            `json:"after"`
	Suspects []ComparedSuspect `json:"suspects"`
	// NotCompared are suspects of a breakpoint that the other run cannot
	// judge: not in its plan, or with too few snapshots there.
	NotCompared []ComparedSuspect `json:"not_compared"`
	// Notes say what the comparison could not do: breakpoints that only
	// one plan has, locations that differ, sites matched by function
	// because their line moved, sites that could not be matched.
	Notes []string `json:"notes"`
	// BeforeBackend and AfterBackend are the runs' backends.
	BeforeBackend string `json:"before_backend"`
	AfterBackend  string `json:"after_backend"`
	// Findings compare runs by what grew at each breakpoint, when either
	// run is native: a native verdict's findings (leak, retention,
	// outside-heap, rss-growth), and for a massif run "leak" where a
	// breakpoint has suspects.
	Findings []ComparedFinding `json:"findings"`
}

// ComparedFinding is one finding of one breakpoint in either run.
type ComparedFinding struct {
	Breakpoint string `json:"breakpoint"`
	Finding    string `json:"finding"`
	// Status is gone, persists, new or unjudged (Reason says why).
	Status string `json:"status"`
	// Before and After say what each run found at the breakpoint: a
	// native verdict, "N suspects" of massif, or "" when it has none.
	Before string `json:"before"`
	After  string `json:"after"`
	Reason string `json:"reason,omitempty"`
}

// ComparedSuspect is one site that was a suspect in either run.
type ComparedSuspect struct {
	// Frame is the site as the run it was last a suspect in names it (the
	// after run's when it persists).
	Frame      Frame  `json:"frame"`
	Breakpoint string `json:"breakpoint"`
	Status     string `json:"status,omitempty"`
	// Match says how a persisting site was matched: "site" (function and
	// file:line) or "function" (same function and file, line moved; the
	// before run's frame is then in BeforeFrame).
	Match       string `json:"match,omitempty"`
	BeforeFrame *Frame `json:"before_frame,omitempty"`
	// The growth per hit of each side, null where the site was no suspect.
	BeforeGrowthPerHit *int64 `json:"before_growth_per_hit"`
	AfterGrowthPerHit  *int64 `json:"after_growth_per_hit"`
	// How the site's blocks stood on each side, for runs of the memcheck
	// backend (Suspect.Memcheck); absent where that side has none.
	BeforeMemcheck *Standing `json:"before_memcheck,omitempty"`
	AfterMemcheck  *Standing `json:"after_memcheck,omitempty"`
	// Reason says why a suspect was not compared.
	Reason string `json:"reason,omitempty"`
	// Unjudged marks a suspect of the before run whose breakpoint is in
	// both plans but took too few snapshots after: the fix is not shown.
	Unjudged bool `json:"unjudged,omitempty"`
}

// Unfixed counts what keeps the comparison from showing a fix: suspects
// and findings that persist, are new or could not be judged, and every
// suspect that was not compared.
func (c *Comparison) Unfixed() int {
	n := len(c.NotCompared)
	for _, s := range c.Suspects {
		if s.Status != StatusGone {
			n++
		}
	}
	for _, f := range c.Findings {
		if f.Status != StatusGone {
			n++
		}
	}
	return n
}

// Compare matches the suspects of two runs of one program, before and
// after a change, breakpoint by breakpoint (by name). A site is matched by
// function and file:line; the sites left over are matched by function and
// file when both runs have as many of them in that function (a rebuild
// that moved code by a few lines), in line order. Sites that still match
// nothing are gone or new, with a note when their function had suspects on
// both sides. Breakpoints of one plan only, and breakpoints with fewer
// than three snapshots in a run, are not compared, and the notes say so.
//
// Suspects are compared whenever both runs have call sites: massif runs,
// and native runs recorded with native.sites, whose suspects are drawn
// from the same model. Two native runs are also compared by their
// findings per breakpoint (compareFindings), and show a fix only when
// both comparisons do. A native run without call sites is compared by
// findings alone, with whatever run it is compared to.
func Compare(before, after CompareRun) *Comparison {
	c := &Comparison{Schema: CompareSchema, Before: before.Dir, After: after.Dir,
		Suspects: []ComparedSuspect{}, NotCompared: []ComparedSuspect{}, Notes: []string{}, Findings: []ComparedFinding{},
		BeforeBackend: before.Backend, AfterBackend: after.Backend}
	sites := hasSites(before) && hasSites(after)
	native := before.Verdicts && after.Verdicts
	switch {
	case sites && c.BeforeBackend != c.AfterBackend:
		note := fmt.Sprintf("RUN_A was measured with %s and RUN_B with %s, both with call sites: their suspects are compared as between massif runs",
			backendSaid(before), backendSaid(after))
		switch {
		case before.Verdicts && !after.Verdicts:
			note += fmt.Sprintf("; verdicts exist only for RUN_A (%s), so no finding is compared", before.Backend)
		case after.Verdicts && !before.Verdicts:
			note += fmt.Sprintf("; verdicts exist only for RUN_B (%s), so no finding is compared", after.Backend)
		}
		c.Notes = append(c.Notes, note)
	case native && !sites && (before.Sites || after.Sites):
		with, without, r := "RUN_A", "RUN_B", before
		if after.Sites {
			with, without, r = without, with, after
		}
		c.Notes = append(c.Notes, fmt.Sprintf("%s has call sites (%s) and %s does not: they are compared by their verdicts; call sites are compared only when both runs have them", with, backendSaid(r), without))
	}
	if sites {
		c.compareSuspects(before, after)
	}
	if native || !sites {
		c.compareFindings(before, after)
	}
	return c
}

// hasSites says whether a run has per-site suspects.
func hasSites(r CompareRun) bool {
	return !r.Verdicts || r.Sites
}

// backendSaid names a run's backend in a note, with --sites when a native
// run has call sites.
func backendSaid(r CompareRun) string {
	if r.Verdicts && r.Sites {
		return r.Backend + " --sites"
	}
	return r.Backend
}

// compareSuspects matches the suspects of two runs that both have call
// sites, breakpoint by breakpoint (Compare).
func (c *Comparison) compareSuspects(before, after CompareRun) {
	bps := func(r CompareRun) map[string]CompareBreakpoint {
		m := make(map[string]CompareBreakpoint)
		for _, b := range r.Breakpoints {
			m[b.Name] = b
		}
		return m
	}
	inBefore, inAfter := bps(before), bps(after)
	judged := make(map[string]bool) // breakpoints compared
	for _, b := range before.Breakpoints {
		a, ok := inAfter[b.Name]
		switch {
		case !ok:
			c.Notes = append(c.Notes, fmt.Sprintf("breakpoint %q is only in the before run's plan: its suspects are not compared", b.Name))
		case b.Unmeasured != "" || a.Unmeasured != "":
			for _, side := range []struct{ run, why string }{{"RUN_A", b.Unmeasured}, {"RUN_B", a.Unmeasured}} {
				if side.why != "" {
					c.Notes = append(c.Notes, fmt.Sprintf("breakpoint %q: %s measured nothing there (%s), so its suspects are not compared", b.Name, side.run, side.why))
				}
			}
		case b.Snapshots < minSnapshots || a.Snapshots < minSnapshots:
			c.Notes = append(c.Notes, fmt.Sprintf("breakpoint %q took %d snapshots before and %d after; a suspect needs at least %d on each side, so its suspects are not compared",
				b.Name, b.Snapshots, a.Snapshots, minSnapshots))
		default:
			judged[b.Name] = true
			if a.Location != b.Location {
				c.Notes = append(c.Notes, fmt.Sprintf("breakpoint %q is at %s before and at %s after; compared by name", b.Name, b.Location, a.Location))
			}
		}
	}
	for _, a := range after.Breakpoints {
		if _, ok := inBefore[a.Name]; !ok {
			c.Notes = append(c.Notes, fmt.Sprintf("breakpoint %q is only in the after run's plan: its suspects are not compared", a.Name))
		}
	}
	notCompared := func(s Suspect, before bool) {
		cs := ComparedSuspect{Frame: s.Frame, Breakpoint: s.Breakpoint}
		g := s.GrowthPerHit
		if before {
			cs.BeforeGrowthPerHit = &g
		} else {
			cs.AfterGrowthPerHit = &g
		}
		_, inB := inBefore[s.Breakpoint]
		_, inA := inAfter[s.Breakpoint]
		switch {
		case !inB || !inA:
			cs.Reason = "breakpoint in one plan only"
		case inB && inBefore[s.Breakpoint].Unmeasured != "" || inA && inAfter[s.Breakpoint].Unmeasured != "":
			cs.Reason = "the other run measured nothing there"
			cs.Unjudged = before
		default:
			cs.Reason = "too few snapshots to find suspects"
			cs.Unjudged = before && inAfter[s.Breakpoint].Snapshots < minSnapshots
		}
		if before && !inA {
			cs.Unjudged = true
		}
		c.NotCompared = append(c.NotCompared, cs)
	}
	// Suspects of the compared breakpoints, per breakpoint.
	type sides struct{ before, after []Suspect }
	per := make(map[string]*sides)
	var order []string
	side := func(bp string) *sides {
		s := per[bp]
		if s == nil {
			s = &sides{}
			per[bp] = s
			order = append(order, bp)
		}
		return s
	}
	for _, s := range before.Suspects {
		if !judged[s.Breakpoint] {
			notCompared(s, true)
			continue
		}
		side(s.Breakpoint).before = append(side(s.Breakpoint).before, s)
	}
	for _, s := range after.Suspects {
		if !judged[s.Breakpoint] {
			notCompared(s, false)
			continue
		}
		side(s.Breakpoint).after = append(side(s.Breakpoint).after, s)
	}
	for _, bp := range order {
		c.matchBreakpoint(per[bp].before, per[bp].after)
	}
	sort.SliceStable(c.Suspects, func(i, j int) bool {
		a, b := c.Suspects[i], c.Suspects[j]
		if ra, rb := statusRank(a.Status), statusRank(b.Status); ra != rb {
			return ra < rb
		}
		if ga, gb := growthOf(a), growthOf(b); ga != gb {
			return ga > gb
		}
		if a.Breakpoint != b.Breakpoint {
			return a.Breakpoint < b.Breakpoint
		}
		return frameLess(a.Frame, b.Frame)
	})
}

func statusRank(s string) int {
	switch s {
	case StatusPersists:
		return 0
	case StatusNew:
		return 1
	}
	return 2
}

// growthOf is the figure a compared suspect is ranked by: its growth after,
// or before when it is gone.
func growthOf(s ComparedSuspect) int64 {
	if s.AfterGrowthPerHit != nil {
		return *s.AfterGrowthPerHit
	}
	if s.BeforeGrowthPerHit != nil {
		return *s.BeforeGrowthPerHit
	}
	return 0
}

// matchBreakpoint matches the suspects of one breakpoint of both runs.
func (c *Comparison) matchBreakpoint(before, after []Suspect) {
	usedB := make([]bool, len(before))
	usedA := make([]bool, len(after))
	persist := func(b, a Suspect, match string) {
		bg, ag := b.GrowthPerHit, a.GrowthPerHit
		cs := ComparedSuspect{Frame: a.Frame, Breakpoint: a.Breakpoint, Status: StatusPersists, Match: match,
			BeforeGrowthPerHit: &bg, AfterGrowthPerHit: &ag, BeforeMemcheck: b.Memcheck, AfterMemcheck: a.Memcheck}
		if match == "function" {
			f := b.Frame
			cs.BeforeFrame = &f
		}
		c.Suspects = append(c.Suspects, cs)
	}
	// By function and file:line, in order for sites that repeat (group_by
	// stack).
	for i, b := range before {
		for j, a := range after {
			if !usedA[j] && sameSiteFrame(b.Frame, a.Frame) {
				usedB[i], usedA[j] = true, true
				persist(b, a, "site")
				break
			}
		}
	}
	// By function and file, for lines that moved.
	type fnKey struct{ function, file, object string }
	keyOf := func(f Frame) fnKey { return fnKey{f.Function, f.File, f.Object} }
	left := func(list []Suspect, used []bool) map[fnKey][]int {
		m := make(map[fnKey][]int)
		for i, s := range list {
			if !used[i] {
				m[keyOf(s.Frame)] = append(m[keyOf(s.Frame)], i)
			}
		}
		return m
	}
	lb, la := left(before, usedB), left(after, usedA)
	byLine := func(list []Suspect, idx []int) {
		sort.SliceStable(idx, func(x, y int) bool { return list[idx[x]].Frame.Line < list[idx[y]].Frame.Line })
	}
	for i, b := range before {
		if usedB[i] {
			continue
		}
		k := keyOf(b.Frame)
		bi, ai := lb[k], la[k]
		if len(ai) == 0 {
			continue
		}
		if len(bi) != len(ai) {
			c.Notes = append(c.Notes, fmt.Sprintf("%s at breakpoint %q: %d suspect sites before and %d after at other lines; which is which is unknown, so they are reported as gone and new",
				b.Frame.Function, b.Breakpoint, len(bi), len(ai)))
			delete(lb, k)
			delete(la, k)
			continue
		}
		byLine(before, bi)
		byLine(after, ai)
		for n := range bi {
			usedB[bi[n]], usedA[ai[n]] = true, true
			persist(before[bi[n]], after[ai[n]], "function")
			c.Notes = append(c.Notes, fmt.Sprintf("%s at breakpoint %q: matched by function, line %d before and %d after",
				b.Frame.Function, b.Breakpoint, before[bi[n]].Frame.Line, after[ai[n]].Frame.Line))
		}
		delete(lb, k)
		delete(la, k)
	}
	for i, b := range before {
		if !usedB[i] {
			g := b.GrowthPerHit
			c.Suspects = append(c.Suspects, ComparedSuspect{Frame: b.Frame, Breakpoint: b.Breakpoint, Status: StatusGone, BeforeGrowthPerHit: &g, BeforeMemcheck: b.Memcheck})
		}
	}
	for j, a := range after {
		if !usedA[j] {
			g := a.GrowthPerHit
			c.Suspects = append(c.Suspects, ComparedSuspect{Frame: a.Frame, Breakpoint: a.Breakpoint, Status: StatusNew, AfterGrowthPerHit: &g, AfterMemcheck: a.Memcheck})
		}
	}
}

// sideFindings is what one run found at one breakpoint: ok is false when
// the run cannot tell (no such breakpoint, too few stops); said is how
// the reports name it.
func sideFindings(r CompareRun, bp string) (findings []string, said string, ok bool, why string) {
	var b *CompareBreakpoint
	for i := range r.Breakpoints {
		if r.Breakpoints[i].Name == bp {
			b = &r.Breakpoints[i]
		}
	}
	if b == nil {
		return nil, "", false, "not in its plan"
	}
	if b.Unmeasured != "" {
		return nil, "nothing measured", false, "it measured nothing there: " + b.Unmeasured
	}
	if b.Verdict == verdictHeapUnmeasured {
		return nil, b.Verdict, false, "its in-use heap is unmeasured there"
	}
	if !r.Verdicts {
		n := 0
		for _, s := range r.Suspects {
			if s.Breakpoint == bp {
				n++
			}
		}
		if b.Snapshots < minSnapshots {
			return nil, "", false, fmt.Sprintf("%d snapshots there, a suspect needs %d", b.Snapshots, minSnapshots)
		}
		if n == 0 {
			return nil, "no suspect", true, ""
		}
		return []string{"leak"}, fmt.Sprintf("%d %s", n, plural(n, "suspect", "suspects")), true, ""
	}
	if b.Verdict == "" || b.Verdict == verdictTooFewStops {
		return nil, b.Verdict, false, fmt.Sprintf("%d stops there, a verdict needs at least 5", b.Snapshots)
	}
	said = b.Verdict
	if len(b.Findings) > 1 {
		said = strings.Join(b.Findings, ", ")
	}
	if b.InUsePerHit != nil && slices.Contains(b.Findings, "leak") {
		said += fmt.Sprintf(" (%s per hit)", FormatDelta(*b.InUsePerHit))
	}
	return b.Findings, said, true, ""
}

// compareFindings compares two runs of which at least one is native, by
// their findings per breakpoint: a finding of RUN_A that RUN_B does not
// show is gone only when both runs are native; across backends it is
// unjudged, since a massif run's suspects and a native verdict of the
// whole heap have different thresholds (a native run without call sites:
// with them, the suspects are compared instead).
func (c *Comparison) compareFindings(before, after CompareRun) {
	mixed := c.BeforeBackend != c.AfterBackend
	if mixed {
		c.Notes = append(c.Notes, fmt.Sprintf("RUN_A was measured with %s and RUN_B with %s: they are compared by what grew at each breakpoint; call sites are compared only when both runs have them (massif, or native with --sites), and otherwise a fix is shown only between runs of one backend",
			c.BeforeBackend, c.AfterBackend))
	}
	var names []string
	seen := make(map[string]bool)
	for _, r := range []CompareRun{before, after} {
		for _, b := range r.Breakpoints {
			if !seen[b.Name] {
				seen[b.Name] = true
				names = append(names, b.Name)
			}
		}
	}
	for _, bp := range names {
		fb, saidB, okB, whyB := sideFindings(before, bp)
		fa, saidA, okA, whyA := sideFindings(after, bp)
		add := func(finding, status, reason string) {
			c.Findings = append(c.Findings, ComparedFinding{Breakpoint: bp, Finding: finding, Status: status, Before: saidB, After: saidA, Reason: reason})
		}
		for _, f := range fb {
			switch {
			case !okA:
				add(f, StatusUnjudged, "RUN_B cannot tell: "+whyA)
			case slices.Contains(fa, f):
				add(f, StatusPersists, "")
			case mixed:
				add(f, StatusUnjudged, fmt.Sprintf("RUN_B (%s) does not show it, but a fix is shown only between runs of one backend: run RUN_B with --backend %s", c.AfterBackend, c.BeforeBackend))
			default:
				add(f, StatusGone, "")
			}
		}
		for _, f := range fa {
			switch {
			case slices.Contains(fb, f):
			case !okB:
				add(f, StatusUnjudged, "RUN_A cannot tell: "+whyB)
			default:
				add(f, StatusNew, "")
			}
		}
	}
	sort.SliceStable(c.Findings, func(i, j int) bool {
		return findingRank(c.Findings[i].Status) < findingRank(c.Findings[j].Status)
	})
}

func findingRank(s string) int {
	switch s {
	case StatusPersists:
		return 0
	case StatusNew:
		return 1
	case StatusUnjudged:
		return 2
	}
	return 3
}
