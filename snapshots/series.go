package snapshots

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Series follows the snapshots of one breakpoint's hits, in order, and
// finds the sites that keep growing. It is incremental: it holds the
// previous snapshot's per-site summary and, per site, the intervals in
// which its bytes changed, never the trees.
//
//	s := snapshots.NewSeries("request", opts)
//	for each hit { d, err := s.Add(seq, hit, snap) }   // d is nil for the first
//	suspects := s.Suspects()
type Series struct {
	breakpoint string
	an         *analyzer
	frames     *FrameTable // numbers the frames of the snapshots given to Add
	prev       *summary
	// prevTree is the previous snapshot's tree, kept until the next one
	// in case a wrapper found in the next changes how its sites are cut.
	prevTree  *HeapTree
	prevSeq   int
	prevHit   int
	firstHit  int
	intervals int
	// spans holds the hits each interval spans, by interval.
	spans progression
	seqs  progression // every snapshot's stop, for Suspect.History
	stats map[string]*siteStats
}

// siteStats is what a series remembers of one site: its latest frame and
// stack, its bytes before its first change, and its non-zero changes by
// interval, runs of equal changes in consecutive intervals held as one:
// a leak of the same bytes at every hit is one run however many hits the
// run takes, so that snapctl's memory does not grow with the stops.
type siteStats struct {
	frame   Frame
	stack   []Frame
	library []Frame
	stacks  int   // call paths merged into the site, at its latest change
	start   int64 // bytes before the first change
	blocks  bool  // every change carried block counts
	changes []intervalChange
}

// intervalChange is count equal changes, in the intervals from interval
// on.
type intervalChange struct {
	interval int // 0-based
	count    int // consecutive intervals, at least 1
	delta    int64
	blocks   int64 // the change in live blocks, when known
}

// last is the last interval of the run.
func (c intervalChange) last() int { return c.interval + c.count - 1 }

// The growth patterns of a suspect (Suspect.Pattern).
const (
	// PatternSteady: the site grew in most intervals and still grows.
	PatternSteady = "steady"
	// PatternStepwise: the site's bytes never went down and rose in steps
	// to well above where they started, as a container that doubles its
	// buffer does.
	PatternStepwise = "stepwise"
	// PatternSingle: the series has one interval (two snapshots), and the
	// site grew in it. One interval cannot tell a leak from a warm-up.
	PatternSingle = "single-interval"
)

// Suspect is a site that grows over a breakpoint's hits.
type Suspect struct {
	Frame Frame   `json:"frame"`
	Stack []Frame `json:"stack,omitempty"`
	// StackID replaces Stack in run.json (see SiteDelta.StackID).
	StackID    *int    `json:"stack_id,omitempty"`
	Library    []Frame `json:"library,omitempty"`
	Breakpoint string  `json:"breakpoint"`
	// Pattern is how it grew: PatternSteady, PatternStepwise or
	// PatternSingle.
	Pattern string `json:"pattern"`
	// GrowthPerHit is bytes per hit of the breakpoint: for a steady
	// suspect the median over the intervals of the interval's change
	// divided by the hits it spans (zeros included); for a stepwise or
	// single-interval one its whole growth divided by the hits the series
	// spans. Rounded to whole bytes.
	GrowthPerHit int64 `json:"growth_per_hit"`
	// GrowthPerInterval is the same per interval between two snapshots
	// (with every: N, one interval is N hits): the median change for a
	// steady suspect, the mean for the others.
	GrowthPerInterval int64 `json:"growth_per_interval"`
	// BlocksPerHit is the live blocks the site gains per hit, computed as
	// GrowthPerHit is; nil when the snapshots had no block counts. One
	// object per request gives 1; a buffer that grows gives 0.
	BlocksPerHit *float64 `json:"blocks_per_hit,omitempty"`
	// GrowingIntervals counts the intervals in which the site grew, out of
	// Intervals (snapshots - 1), which span Hits hits.
	GrowingIntervals int `json:"growing_intervals"`
	Intervals        int `json:"intervals"`
	Hits             int `json:"hits"`
	// TotalGrowth is the site's change from the first snapshot to the last.
	TotalGrowth int64 `json:"total_growth"`
	// TotalBlocks is the same in live blocks, when known.
	TotalBlocks *int64 `json:"total_blocks,omitempty"`
	// BytesPerBlock is TotalGrowth over TotalBlocks, rounded, when both
	// grew: the size of the leaked object when its blocks are alike (two
	// blocks of 50 B per request give 50). nil when blocks are unknown or
	// none were gained (one buffer that grows).
	BytesPerBlock *int64 `json:"bytes_per_block,omitempty"`
	// Stacks counts the distinct call paths merged into the site's row
	// (more than 1: the row adds up several stacks; Stack is the one whose
	// bytes changed most).
	Stacks int `json:"stacks,omitempty"`
	// History is the site's bytes at every snapshot of its breakpoint, for
	// report.html's charts; run.json leaves it out.
	History []SitePoint `json:"-"`
	// Memcheck is how the site's blocks stand in memcheck's leak search,
	// under the memcheck backend only.
	Memcheck *Standing `json:"memcheck,omitempty"`
}

// SitePoint is a site's bytes at one stop.
type SitePoint struct {
	Seq   int
	Bytes int64
}

// NewSeries starts the series of one breakpoint.
func NewSeries(breakpoint string, opts Options) *Series {
	return &Series{breakpoint: breakpoint, an: newAnalyzer(opts), frames: NewFrameTable(), stats: make(map[string]*siteStats)}
}

// Add takes the snapshot of the next hit, with its stop's sequence number
// and hit number, and returns its diff against the previous hit: a Diff of
// kind "between-hits" with Breakpoint, FromSeq and ToSeq filled. It returns
// nil for the first hit. A snapshot without a tree is an error and leaves
// the series as it was. An interval spans hit minus the previous hit, at
// least 1.
func (s *Series) Add(seq, hit int, snap *Snapshot) (*Diff, error) {
	t, err := HeapTreeOf(snap, s.frames)
	if err != nil {
		return nil, fmt.Errorf("series %q, stop %d: %w", s.breakpoint, seq, err)
	}
	return s.AddTree(seq, hit, t)
}

// AddTree is Add for a snapshot read with ReadHeapTree. The series keeps
// the tree until the next one is added, and a summary of its sites.
func (s *Series) AddTree(seq, hit int, t *HeapTree) (*Diff, error) {
	if s.an.detectWrappers(t) && s.prevTree != nil {
		// The previous snapshot was cut into sites before the new
		// wrapper was known: cut it again, so both sides agree.
		s.prev = s.an.summarize(s.prevTree)
	}
	cur := s.an.summarize(t)
	prev, prevSeq, prevHit := s.prev, s.prevSeq, s.prevHit
	s.prev, s.prevSeq, s.prevHit, s.prevTree = cur, seq, hit, t
	s.seqs.add(seq)
	if prev == nil {
		s.firstHit = hit
		return nil, nil
	}
	d := s.an.diffKeys(prev, cur, func(key string, sd *SiteDelta) {
		s.record(key, sd)
	})
	s.intervals++
	s.spans.add(max(hit-prevHit, 1))
	d.Kind = "between-hits"
	d.Breakpoint = s.breakpoint
	d.FromSeq = prevSeq
	d.ToSeq = seq
	return d, nil
}

// AddSame adds the snapshot of stop seq, hit hit, known to hold the same
// allocation tree as the last one added (its file was byte for byte the
// same but for times), without the snapshot: nothing is parsed, and the
// interval and its diff, in which no site changed, are what Add would
// have made of it. It fails before any snapshot was added.
func (s *Series) AddSame(seq, hit int) (*Diff, error) {
	if s.prev == nil {
		return nil, fmt.Errorf("series %q, stop %d: no earlier snapshot to be the same as", s.breakpoint, seq)
	}
	d := s.an.diffKeys(s.prev, s.prev, func(string, *SiteDelta) {})
	s.intervals++
	s.spans.add(max(hit-s.prevHit, 1))
	d.Kind = "between-hits"
	d.Breakpoint = s.breakpoint
	d.FromSeq = s.prevSeq
	d.ToSeq = seq
	s.prevSeq, s.prevHit = seq, hit
	s.seqs.add(seq)
	return d, nil
}

// record remembers one site's change in the current interval. Hidden and
// revealed sites changed by an unknown amount, so they count as no change.
func (s *Series) record(key string, sd *SiteDelta) {
	if sd.Delta == 0 || sd.Change == ChangeHidden || sd.Change == ChangeRevealed {
		return
	}
	st := s.stats[key]
	if st == nil {
		st = &siteStats{start: sd.Before, blocks: true}
		s.stats[key] = st
	}
	st.frame, st.stack, st.library, st.stacks = sd.Frame, sd.Stack, sd.Library, sd.Stacks
	c := intervalChange{interval: s.intervals, count: 1, delta: sd.Delta}
	if sd.SiteBlocks != nil {
		c.blocks = sd.DeltaBlocks
	} else {
		st.blocks = false
	}
	if k := len(st.changes) - 1; k >= 0 {
		if r := &st.changes[k]; r.last() == c.interval-1 && r.delta == c.delta && r.blocks == c.blocks {
			r.count++
			return
		}
	}
	st.changes = append(st.changes, c)
}

// Intervals returns the number of diffs so far (hits - 1).
func (s *Series) Intervals() int { return s.intervals }

// Suspects returns the sites that grow, the fastest per hit first. With n
// intervals (snapshots - 1), a site is a steady suspect when all of these
// hold:
//
//   - n >= 2;
//   - it grew in at least half of the n intervals;
//   - it still grows at the end: the run of intervals without growth that
//     ends the series is no longer than the longest such run between two
//     intervals in which it grew, or, for a site that grows in bursts,
//     than twice that run and a fifth of the series (stillGrows). A buffer
//     that grows while warming up and then stays put fails here;
//   - shrinking did not undo most of it: its total growth is at least half
//     the sum of its growths (a site that allocates and frees in turn fails
//     here);
//   - its median change per interval is positive.
//
// A site that is not is a stepwise suspect when its bytes never went down,
// it grew in at least two intervals, it ends at least twice as big as it
// started, and the flat run that ends the series is at most twice as long
// as the one before its last growth, or still growing as stillGrows has
// it: a container that doubles its buffer as it fills at a steady pace
// grows on ever rarer hits, each flat run about twice the one before; a
// leak on every Nth request, finished by threads out of order, grows in
// steps at uneven spacing; a warm-up grows on the first hits and then
// stays put for good. Churn, which shrinks, never is.
//
// With a single interval, every site that grew in it is a suspect of
// pattern PatternSingle.
//
// Suspects are ranked by GrowthPerHit, then TotalGrowth, then
// GrowingIntervals.
func (s *Series) Suspects() []Suspect {
	n := s.intervals
	out := []Suspect{}
	if n < 1 {
		return out
	}
	hits := s.spans.sum()
	for key, st := range s.stats {
		var grew, maxGap, lastGap int
		var total, gross int64
		shrank := false
		last := -1
		for _, c := range st.changes { // in interval order
			total += c.delta * int64(c.count)
			if c.delta < 0 {
				shrank = true
			}
			if c.delta <= 0 {
				continue
			}
			grew += c.count
			gross += c.delta * int64(c.count)
			if last >= 0 {
				// Within a run the gaps are 0.
				lastGap = c.interval - last - 1
				maxGap = max(maxGap, lastGap)
				if c.count > 1 {
					lastGap = 0
				}
			}
			last = c.last()
		}
		if grew == 0 {
			continue
		}
		trailing := n - 1 - last
		sus := Suspect{
			Frame: st.frame, Stack: st.stack, Library: st.library,
			Breakpoint:       s.breakpoint,
			GrowingIntervals: grew,
			Intervals:        n,
			Hits:             hits,
			TotalGrowth:      total,
			History:          s.history(key, st),
		}
		if st.stacks > 1 {
			sus.Stacks = st.stacks
		}
		switch {
		case n == 1:
			sus.Pattern = PatternSingle
		case 2*grew >= n && stillGrows(trailing, maxGap, n) && 2*total >= gross && medianChange(st.changes, n) > 0:
			sus.Pattern = PatternSteady
		case !shrank && grew >= 2 && total >= st.start && (trailing <= 2*lastGap || stillGrows(trailing, maxGap, n)):
			// total >= start: it ends at least twice as big as it started.
			sus.Pattern = PatternStepwise
		default:
			continue
		}
		s.rates(&sus, st)
		if sus.GrowthPerHit <= 0 && sus.GrowthPerInterval <= 0 {
			continue
		}
		out = append(out, sus)
	}
	SortSuspects(out)
	return out
}

// stillGrows reports whether a site whose runs of intervals without
// growth between two in which it grew were at most maxGap long still
// grows at the end of n intervals, which end with a run of trailing
// intervals without growth: that run is no longer than the longest
// before it, or, for a site seen to pause (threads that finish requests
// out of order make it grow in bursts), at most twice as long and at
// most a fifth of the series. A site that grew at every interval and
// then stopped has stopped.
func stillGrows(trailing, maxGap, n int) bool {
	return trailing <= maxGap || (trailing <= 2*maxGap && 5*trailing <= n)
}

// rates fills a suspect's figures per hit and per interval.
func (s *Series) rates(sus *Suspect, st *siteStats) {
	n := s.intervals
	var totalBlocks int64
	for _, c := range st.changes {
		totalBlocks += c.blocks * int64(c.count)
	}
	if st.blocks {
		sus.TotalBlocks = &totalBlocks
		if totalBlocks > 0 && sus.TotalGrowth > 0 {
			b := roundDiv(float64(sus.TotalGrowth), float64(totalBlocks))
			sus.BytesPerBlock = &b
		}
	}
	if sus.Pattern != PatternSteady {
		sus.GrowthPerHit = roundDiv(float64(sus.TotalGrowth), float64(sus.Hits))
		sus.GrowthPerInterval = roundDiv(float64(sus.TotalGrowth), float64(n))
		if st.blocks {
			b := roundBlocks(float64(totalBlocks) / float64(sus.Hits))
			sus.BlocksPerHit = &b
		}
		return
	}
	sus.GrowthPerInterval = medianChange(st.changes, n)
	// Each interval's change over the hits it spans, the intervals
	// without a change included as zeros: as weighted values, equal ones
	// in a row counted once.
	var perHit, blocks weighted
	changed := 0
	for _, c := range st.changes {
		changed += c.count
		for i := c.interval; i <= c.last(); i++ {
			span := float64(s.spans.at(i))
			perHit.add(float64(c.delta)/span, 1)
			blocks.add(float64(c.blocks)/span, 1)
		}
	}
	perHit.add(0, n-changed)
	blocks.add(0, n-changed)
	sus.GrowthPerHit = roundDiv(perHit.median(), 1)
	if st.blocks {
		b := roundBlocks(blocks.median())
		sus.BlocksPerHit = &b
	}
}

// weighted is a list of values, each count times, equal values added in a
// row held once.
type weighted struct {
	vals []weightedValue
	n    int
}

type weightedValue struct {
	v     float64
	count int
}

func (w *weighted) add(v float64, count int) {
	if count <= 0 {
		return
	}
	w.n += count
	if k := len(w.vals) - 1; k >= 0 && w.vals[k].v == v {
		w.vals[k].count += count
		return
	}
	w.vals = append(w.vals, weightedValue{v, count})
}

// median is the median of the values (the mean of the two middle ones
// for an even count), as median gives it for the list written out.
func (w *weighted) median() float64 {
	if w.n == 0 {
		return 0
	}
	sort.Slice(w.vals, func(i, j int) bool { return w.vals[i].v < w.vals[j].v })
	at := func(k int) float64 { // the k-th value, from 0, in order
		for _, x := range w.vals {
			if k < x.count {
				return x.v
			}
			k -= x.count
		}
		return w.vals[len(w.vals)-1].v
	}
	if w.n%2 == 1 {
		return at(w.n / 2)
	}
	return (at(w.n/2-1) + at(w.n/2)) / 2
}

// roundDiv returns a/b rounded to the nearest integer.
func roundDiv(a, b float64) int64 {
	if b == 0 {
		return 0
	}
	return int64(math.Round(a / b))
}

// roundBlocks keeps two decimals of a block count per hit.
func roundBlocks(v float64) float64 { return math.Round(v*100) / 100 }

// SortSuspects orders suspects as Suspects does, so that a run's suspects
// from several breakpoints can be merged into one ranking.
func SortSuspects(out []Suspect) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.GrowthPerHit != b.GrowthPerHit {
			return a.GrowthPerHit > b.GrowthPerHit
		}
		if a.TotalGrowth != b.TotalGrowth {
			return a.TotalGrowth > b.TotalGrowth
		}
		if a.GrowingIntervals != b.GrowingIntervals {
			return a.GrowingIntervals > b.GrowingIntervals
		}
		if a.Breakpoint != b.Breakpoint {
			return a.Breakpoint < b.Breakpoint
		}
		if !sameSiteFrame(a.Frame, b.Frame) {
			return frameLess(a.Frame, b.Frame)
		}
		return stackLess(a.Stack, b.Stack)
	})
}

// medianChange returns the median of n interval changes of which only the
// non-zero ones are listed.
func medianChange(changes []intervalChange, n int) int64 {
	type run struct {
		delta int64
		count int
	}
	runs := make([]run, 0, len(changes)+1)
	changed := 0
	for _, c := range changes {
		runs = append(runs, run{c.delta, c.count})
		changed += c.count
	}
	runs = append(runs, run{0, n - changed})
	sort.Slice(runs, func(i, j int) bool { return runs[i].delta < runs[j].delta })
	at := func(k int) int64 { // the k-th change, from 0, in order
		for _, r := range runs {
			if k < r.count {
				return r.delta
			}
			k -= r.count
		}
		return runs[len(runs)-1].delta
	}
	if n%2 == 1 {
		return at(n / 2)
	}
	return (at(n/2-1) + at(n/2)) / 2
}

// history rebuilds a site's bytes at the snapshots from its bytes at the
// last one and its changes per interval (interval i leads from snapshot i
// to i+1): at every snapshot up to maxHistory of them, else at every
// second, fourth... one, evenly spaced, and the last, as report.html's
// timeline is thinned (a sparkline is 160 pixels wide), so that the
// figures of a run of 100,000 stops do not take megabytes.
func (s *Series) history(key string, st *siteStats) []SitePoint {
	var bytes int64
	if e := s.prev.sites[key]; e != nil {
		bytes = e.bytes
	}
	m := s.seqs.len()
	step := 1
	for (m+step-1)/step > maxHistory {
		step *= 2
	}
	out := make([]SitePoint, 0, min(m, maxHistory+1))
	c := len(st.changes) - 1
	for i := m - 1; i >= 0; i-- {
		if i%step == 0 || i == m-1 {
			out = append(out, SitePoint{Seq: s.seqs.at(i), Bytes: bytes})
		}
		// Back over interval i-1.
		for c >= 0 && st.changes[c].interval > i-1 {
			c--
		}
		if c >= 0 && st.changes[c].last() >= i-1 {
			bytes -= st.changes[c].delta
		}
	}
	slices.Reverse(out)
	return out
}

// maxHistory bounds the points of a suspect's History.
const maxHistory = 2000
