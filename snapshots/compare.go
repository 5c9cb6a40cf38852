package snapshots

import (
	"fmt"
	"sort"
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

// CompareRun is what a comparison needs of one run: its breakpoints, how
// many hit snapshots each took, and its suspects.
type CompareRun struct {
	Dir         string
	Breakpoints []CompareBreakpoint
	Suspects    []Suspect
}

// CompareBreakpoint is one plan breakpoint of a compared run.
type CompareBreakpoint struct {
	Name, Location string
	// Snapshots counts its hit-phase snapshots, the series suspects come
	// from.
	Snapshots int
}

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
	// Reason says why a suspect was not compared.
	Reason string `json:"reason,omitempty"`
	// Unjudged marks a suspect of the before run whose breakpoint is in
	// both plans but took too few snapshots after: the fix is not shown.
	Unjudged bool `json:"unjudged,omitempty"`
}

// Unfixed counts what keeps the comparison from showing a fix: suspects
// that persist or are new, and suspects of the before run that could not
// be judged after because their breakpoint took too few snapshots there.
func (c *Comparison) Unfixed() int {
	n := 0
	for _, s := range c.Suspects {
		if s.Status != StatusGone {
			n++
		}
	}
	for _, s := range c.NotCompared {
		if s.Unjudged {
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
func Compare(before, after CompareRun) *Comparison {
	c := &Comparison{Schema: CompareSchema, Before: before.Dir, After: after.Dir,
		Suspects: []ComparedSuspect{}, NotCompared: []ComparedSuspect{}, Notes: []string{}}
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
		default:
			cs.Reason = "too few snapshots to find suspects"
			cs.Unjudged = before && inAfter[s.Breakpoint].Snapshots < minSnapshots
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
	return c
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
			BeforeGrowthPerHit: &bg, AfterGrowthPerHit: &ag}
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
			c.Suspects = append(c.Suspects, ComparedSuspect{Frame: b.Frame, Breakpoint: b.Breakpoint, Status: StatusGone, BeforeGrowthPerHit: &g})
		}
	}
	for j, a := range after {
		if !usedA[j] {
			g := a.GrowthPerHit
			c.Suspects = append(c.Suspects, ComparedSuspect{Frame: a.Frame, Breakpoint: a.Breakpoint, Status: StatusNew, AfterGrowthPerHit: &g})
		}
	}
}
