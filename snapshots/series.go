package snapshots

import (
	"fmt"
	"sort"
)

// Series follows the snapshots of one breakpoint's hits, in order, and
// finds the sites that keep growing. It is incremental: it holds the
// previous snapshot's per-site summary and, per site, the intervals in
// which its bytes changed, never the trees.
//
//	s := snapshots.NewSeries("request", opts)
//	for each hit { d, err := s.Add(seq, snap) }   // d is nil for the first
//	suspects := s.Suspects()
type Series struct {
	breakpoint string
	an         *analyzer
	prev       *summary
	prevSeq    int
	intervals  int
	seqs       []int // every snapshot's stop, for Suspect.History
	stats      map[string]*siteStats
}

// siteStats is what a series remembers of one site: its latest frame and
// stack and its non-zero changes by interval.
type siteStats struct {
	frame   Frame
	stack   []Frame
	library []Frame
	changes []intervalChange
}

type intervalChange struct {
	interval int // 0-based
	delta    int64
}

// Suspect is a site that grows steadily over a breakpoint's hits.
type Suspect struct {
	Frame      Frame   `json:"frame"`
	Stack      []Frame `json:"stack"`
	Library    []Frame `json:"library,omitempty"`
	Breakpoint string  `json:"breakpoint"`
	// GrowthPerHit is the median of the site's change over all intervals
	// (zeros included; the mean of the two middle values for an even count).
	GrowthPerHit int64 `json:"growth_per_hit"`
	// GrowingIntervals counts the intervals in which the site grew, out of
	// Intervals (hits - 1).
	GrowingIntervals int `json:"growing_intervals"`
	Intervals        int `json:"intervals"`
	// TotalGrowth is the site's change from the first hit to the last.
	TotalGrowth int64 `json:"total_growth"`
	// History is the site's bytes at every snapshot of its breakpoint, for
	// report.html's charts; run.json leaves it out.
	History []SitePoint `json:"-"`
}

// SitePoint is a site's bytes at one stop.
type SitePoint struct {
	Seq   int
	Bytes int64
}

// NewSeries starts the series of one breakpoint.
func NewSeries(breakpoint string, opts Options) *Series {
	return &Series{breakpoint: breakpoint, an: newAnalyzer(opts), stats: make(map[string]*siteStats)}
}

// Add takes the snapshot of the next hit, with its stop's sequence number,
// and returns its diff against the previous hit: a Diff of kind
// "between-hits" with Breakpoint, FromSeq and ToSeq filled. It returns nil
// for the first hit. A snapshot without a tree is an error and leaves the
// series as it was.
func (s *Series) Add(seq int, snap *Snapshot) (*Diff, error) {
	if err := checkTree(snap); err != nil {
		return nil, fmt.Errorf("series %q, stop %d: %w", s.breakpoint, seq, err)
	}
	cur := s.an.summarize(snap.Tree, snap.HeapBytes)
	prev, prevSeq := s.prev, s.prevSeq
	s.prev, s.prevSeq = cur, seq
	s.seqs = append(s.seqs, seq)
	if prev == nil {
		return nil, nil
	}
	d := s.an.diffKeys(prev, cur, func(key string, sd *SiteDelta) {
		s.record(key, sd)
	})
	s.intervals++
	d.Kind = "between-hits"
	d.Breakpoint = s.breakpoint
	d.FromSeq = prevSeq
	d.ToSeq = seq
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
		st = &siteStats{}
		s.stats[key] = st
	}
	st.frame, st.stack, st.library = sd.Frame, sd.Stack, sd.Library
	st.changes = append(st.changes, intervalChange{interval: s.intervals, delta: sd.Delta})
}

// Intervals returns the number of diffs so far (hits - 1).
func (s *Series) Intervals() int { return s.intervals }

// Suspects returns the sites that grow steadily, the fastest first. With
// n intervals (hits - 1), a site is a suspect when all of these hold:
//
//   - n >= 2;
//   - it grew in at least half of the n intervals;
//   - it still grows at the end: the run of intervals without growth that
//     ends the series is no longer than the longest such run between two
//     intervals in which it grew (so a site that grew in every interval
//     must grow in the last one). A buffer that grows while warming up and
//     then stays put fails here;
//   - shrinking did not undo most of it: its total growth is at least half
//     the sum of its growths (a site that allocates and frees in turn fails
//     here);
//   - its GrowthPerHit, the median change over the n intervals, is
//     positive.
//
// Suspects are ranked by GrowthPerHit, then TotalGrowth, then
// GrowingIntervals.
func (s *Series) Suspects() []Suspect {
	n := s.intervals
	out := []Suspect{}
	if n < 2 {
		return out
	}
	for key, st := range s.stats {
		var grew, maxGap int
		var total, gross int64
		last := -1
		for _, c := range st.changes { // in interval order
			total += c.delta
			if c.delta <= 0 {
				continue
			}
			grew++
			gross += c.delta
			if last >= 0 {
				maxGap = max(maxGap, c.interval-last-1)
			}
			last = c.interval
		}
		trailing := n - 1 - last
		if 2*grew < n || trailing > maxGap || 2*total < gross {
			continue
		}
		med := medianChange(st.changes, n)
		if med <= 0 {
			continue
		}
		out = append(out, Suspect{
			Frame: st.frame, Stack: st.stack, Library: st.library,
			Breakpoint:       s.breakpoint,
			GrowthPerHit:     med,
			GrowingIntervals: grew,
			Intervals:        n,
			TotalGrowth:      total,
			History:          s.history(key, st),
		})
	}
	SortSuspects(out)
	return out
}

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
	v := make([]int64, n)
	for _, c := range changes {
		v[c.interval] = c.delta
	}
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// history rebuilds a site's bytes at every snapshot from its bytes at the
// last one and its changes per interval (interval i leads from snapshot i
// to i+1).
func (s *Series) history(key string, st *siteStats) []SitePoint {
	var bytes int64
	if e := s.prev.sites[key]; e != nil {
		bytes = e.bytes
	}
	out := make([]SitePoint, len(s.seqs))
	c := len(st.changes) - 1
	for i := len(s.seqs) - 1; i >= 0; i-- {
		out[i] = SitePoint{Seq: s.seqs[i], Bytes: bytes}
		for ; c >= 0 && st.changes[c].interval == i-1; c-- {
			bytes -= st.changes[c].delta
		}
	}
	return out
}
