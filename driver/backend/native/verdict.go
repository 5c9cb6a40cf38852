package native

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

func delta(a, b *runjson.Memory) runjson.MemoryDelta {
	d := runjson.MemoryDelta{RSSBytes: b.RSSBytes - a.RSSBytes}
	sub := func(x, y *int64) *int64 {
		if x == nil || y == nil {
			return nil
		}
		v := *y - *x
		return &v
	}
	d.HeapInUseBytes, d.HeapFreeBytes = sub(a.HeapInUseBytes, b.HeapInUseBytes), sub(a.HeapFreeBytes, b.HeapFreeBytes)
	return d
}

// findingOrder ranks the findings, the most urgent first.
var findingOrder = []string{runjson.VerdictLeak, runjson.VerdictOutsideHeap, runjson.VerdictRetention, runjson.VerdictRSSGrowth}

// The thresholds of the verdicts (docs/native.md, "Native verdicts";
// docs/design.md, "Native verdicts").
const (
	// minTrendStops is the fewest stops a trend can be shown from: with
	// four, even growth at every stop happens by chance once in 24
	// orderings of noise.
	minTrendStops = 5
	// minTrendZ is the Mann-Kendall z a series needs to grow: a one-sided
	// test at 1%.
	minTrendZ = 2.33
	// minRSSBytes is the least resident growth that counts: resident
	// memory moves in pages, and code and stack pages fault in as new
	// paths run.
	minRSSBytes = 256 << 10
	// maxSeriesPoints bounds the stops kept per breakpoint: beyond it the
	// series is thinned to evenly spaced stops.
	maxSeriesPoints = 256
	// tcacheBytes is the most glibc's per-thread cache holds by default:
	// 7 freed chunks of each of its 64 sizes, 32 to 1,040 bytes. mallinfo2
	// counts them as in use.
	tcacheBytes = 7 * (64*32 + 16*63*64/2)
)

// nativeAnalysis makes the native backend's diffs and verdicts as the
// stops arrive. It keeps a bounded series of each breakpoint's hit-phase
// figures.
type nativeAnalysis struct {
	plan   *plan.Plan
	diffs  func(any)
	series map[string]*series
	// open are the hit-phase stops of around_call breakpoints whose
	// return is still to come, by hit stop.
	open map[*backend.Stop]*runjson.Memory
}

func newNativeAnalysis(plan *plan.Plan, diffs func(any)) *nativeAnalysis {
	return &nativeAnalysis{plan: plan, diffs: diffs, series: make(map[string]*series), open: make(map[*backend.Stop]*runjson.Memory)}
}

func (a *nativeAnalysis) add(t *backend.Stop, sitesHeap *int64) {
	mem := t.Stop.Memory
	if mem == nil {
		return
	}
	bp := t.Stop.Breakpoint
	if t.HitOf != nil {
		if from := t.HitOf.Stop.Memory; from != nil {
			a.diffs(&runjson.MemoryDiff{Kind: "within-call", Breakpoint: bp, FromSeq: t.HitOf.Stop.Seq, ToSeq: t.Stop.Seq, MemoryDelta: delta(from, mem)})
		}
		return
	}
	s := a.series[bp]
	if s == nil {
		s = &series{stride: 1}
		a.series[bp] = s
	} else {
		a.diffs(&runjson.MemoryDiff{Kind: "between-hits", Breakpoint: bp, FromSeq: s.lastSeq, ToSeq: t.Stop.Seq, MemoryDelta: delta(s.lastMem, mem)})
	}
	s.lastSeq, s.lastMem = t.Stop.Seq, mem
	p := pointOf(t.Stop.Hit, mem)
	if sitesHeap != nil {
		// An allocator snapctl cannot read: in-use heap is what
		// heaptrack recorded as allocated and not freed; free heap is
		// not known.
		p.alloc, p.freeKnown, p.use, p.free, p.unread = true, false, *sitesHeap, 0, ""
		s.fromSites = true
	} else if mem.Jemalloc != nil {
		s.fromJemalloc = true
	}
	s.add(p)
}

// verdicts returns a verdict for every breakpoint with at least two
// hit-phase stops, in plan order.
func (a *nativeAnalysis) verdicts(trimProbe bool) []runjson.Verdict {
	var out []runjson.Verdict
	for _, bp := range a.plan.Breakpoints {
		if s := a.series[bp.Name]; s != nil && s.seen >= 2 {
			out = append(out, verdictOf(bp.Name, s, trimProbe))
		}
	}
	return out
}

// point is one hit-phase stop's figures.
type point struct {
	index int // among the breakpoint's hit-phase stops, from 0
	hit   int
	rss   int64
	// alloc says the allocator was read: use (in use, with mmapped
	// blocks) is known, and free with freeKnown.
	alloc, freeKnown bool
	use, free        int64
	// unread says why the allocator was not read at this stop, and
	// sitesMissing why a native.sites stop has no per-site snapshot.
	unread, sitesMissing string
	arenas               *int
	trim                 *int64
	tcache               *int64
}

func pointOf(hit int, m *runjson.Memory) point {
	p := point{hit: hit, rss: m.RSSBytes, arenas: m.Arenas, trim: m.TrimReleasedBytes, tcache: m.TcacheBytes,
		unread: m.HeapUnmeasuredWhy, sitesMissing: m.SitesMissing}
	if m.HeapInUseBytes != nil && m.HeapFreeBytes != nil {
		p.alloc, p.freeKnown, p.use, p.free = true, true, *m.HeapInUseBytes, *m.HeapFreeBytes
		if m.MmapBytes != nil {
			p.use += *m.MmapBytes
		}
	}
	return p
}

// series is one breakpoint's hit-phase stops: every stop's counts, and at
// most maxSeriesPoints evenly spaced stops for the trends (every stride-th,
// the stride doubling each time the points fill up), plus the last.
type series struct {
	points  []point
	stride  int
	seen    int
	first   point
	last    point
	lastSeq int
	lastMem *runjson.Memory
	// Over every stop: intervals whose both ends read the allocator, and
	// how many of them grew in use; the most arenas; what malloc_trim
	// returned; what the tcaches held last.
	intervals, grew int
	arenas          *int
	trimMax         *int64
	trimTotal       int64
	tcache          *int64
	// unread counts the stops that did not read the allocator, and
	// unreadWhy says why at the first; sitesMissing and sitesWhy the
	// same of per-site snapshots. fromSites says in-use heap is
	// heaptrack's. lastFree is the free heap at the last stop that
	// read it.
	unread, sitesMissing int
	unreadWhy, sitesWhy  string
	fromSites            bool
	// fromJemalloc says in-use heap is jemalloc's own statistics.
	fromJemalloc bool
	lastFree     *int64
}

func (s *series) add(p point) {
	p.index = s.seen
	if s.seen == 0 {
		s.first = p
	} else if p.alloc && s.last.alloc {
		s.intervals++
		if p.use > s.last.use {
			s.grew++
		}
	}
	if p.arenas != nil && (s.arenas == nil || *p.arenas > *s.arenas) {
		n := *p.arenas
		s.arenas = &n
	}
	if p.tcache != nil {
		s.tcache = p.tcache
	}
	if !p.alloc {
		s.unread++
		if s.unreadWhy == "" {
			s.unreadWhy = p.unread
		}
	}
	if p.sitesMissing != "" {
		s.sitesMissing++
		if s.sitesWhy == "" {
			s.sitesWhy = p.sitesMissing
		}
	}
	if p.freeKnown {
		f := p.free
		s.lastFree = &f
	}
	if p.trim != nil {
		s.trimTotal += *p.trim
		if s.trimMax == nil || *p.trim > *s.trimMax {
			t := *p.trim
			s.trimMax = &t
		}
	}
	if s.seen%s.stride == 0 {
		s.points = append(s.points, p)
		if len(s.points) == maxSeriesPoints {
			for i := 0; i < len(s.points)/2; i++ {
				s.points[i] = s.points[2*i]
			}
			s.points = s.points[:len(s.points)/2]
			s.stride *= 2
		}
	}
	s.seen++
	s.last = p
}

// lastFreePtr is the free heap at the last stop that read it, nil when
// none did.
func (s *series) lastFreePtr() *int64 { return s.lastFree }

// analysed are the points the trends are computed from: the kept ones
// and the last stop.
func (s *series) analysed() []point {
	pts := s.points
	if n := len(pts); n == 0 || pts[n-1].index != s.last.index {
		pts = append(pts[:n:n], s.last)
	}
	return pts
}

// trend is a series' Mann-Kendall statistic and Theil-Sen slope.
type trend struct {
	// z is Kendall's S (over every pair of points, +1 when the later is
	// larger, -1 when smaller) over its standard deviation under no trend,
	// sqrt(n(n-1)(2n+5)/18), ties uncorrected.
	z float64
	// slope is the median of the pairwise slopes (y_j-y_i)/(x_j-x_i).
	slope float64
}

// trendOf computes the trend of ys over xs (increasing hit numbers).
func trendOf(xs []int, ys []int64) trend {
	n := len(ys)
	if n < 2 {
		return trend{}
	}
	var sum int
	slopes := make([]float64, 0, n*(n-1)/2)
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			switch {
			case ys[j] > ys[i]:
				sum++
			case ys[j] < ys[i]:
				sum--
			}
			if dx := xs[j] - xs[i]; dx > 0 {
				slopes = append(slopes, float64(ys[j]-ys[i])/float64(dx))
			}
		}
	}
	fn := float64(n)
	t := trend{z: float64(sum) / math.Sqrt(fn*(fn-1)*(2*fn+5)/18)}
	if len(slopes) > 0 {
		sort.Float64s(slopes)
		m := len(slopes) / 2
		t.slope = slopes[m]
		if len(slopes)%2 == 0 {
			t.slope = (slopes[m-1] + slopes[m]) / 2
		}
	}
	return t
}

// grows says a trend is growth: enough stops, later stops larger than
// earlier ones in a significant majority of pairs, a positive slope.
func (t trend) grows(stops int) bool {
	return stops >= minTrendStops && t.z >= minTrendZ && t.slope > 0
}

func round2(z float64) float64 { return math.Round(z*100) / 100 }

// verdictOf decides a breakpoint's verdict from its hit-phase stops
// (docs/design.md, "Native verdicts"). With U the in-use heap (with
// mmapped blocks), F the free heap and R resident memory, each grows when
// its trend does (trend.grows), and its growth is its slope times the
// hits spanned:
//   - leak: U grows, by any amount;
//   - retention: R grows by at least minRSSBytes more than U, and F's
//     growth is at least half of that excess; or, with trim_probe,
//     malloc_trim(0) returned at least minRSSBytes at the median stop;
//   - outside-heap: R grows, and what neither U nor F explains is at least
//     minRSSBytes and half of R's growth;
//   - rss-growth: R grows and the allocator could not be read.
func verdictOf(bp string, s *series, trimProbe bool) runjson.Verdict {
	pts := s.analysed()
	f := runjson.VerdictFigures{Stops: s.seen, Hits: s.last.hit - s.first.hit, Intervals: s.intervals, InUseIntervals: s.grew,
		Arenas: s.arenas, TrimReleased: s.trimMax, TcacheBytes: s.tcache, FreeBytes: s.lastFree,
		UnmeasuredStops: s.unread, UnmeasuredWhy: s.unreadWhy, SitesMissingStops: s.sitesMissing, SitesMissingWhy: s.sitesWhy}
	if s.fromSites {
		f.InUseSource = "heaptrack"
	} else if s.fromJemalloc {
		f.InUseSource = "jemalloc"
	}
	if s.trimMax != nil {
		t := s.trimTotal
		f.TrimReleasedTotal = &t
	}
	span := float64(f.Hits)
	growth := func(t trend) int64 { return int64(math.Round(t.slope * span)) }
	var xs []int
	var rss []int64
	for _, p := range pts {
		xs, rss = append(xs, p.hit), append(rss, p.rss)
	}
	rt := trendOf(xs, rss)
	f.RSSGrowth, f.RSSTrend = growth(rt), round2(rt.z)
	f.RSSChange = s.last.rss - s.first.rss
	rssGrows := rt.grows(s.seen) && f.RSSGrowth >= minRSSBytes

	var ax, fx []int
	var use, free []int64
	var firstUse, lastUse *int64
	for _, p := range []point{s.first, s.last} {
		if p.alloc {
			u := p.use
			if firstUse == nil {
				firstUse = &u
			} else {
				lastUse = &u
			}
		}
	}
	for _, p := range pts {
		if p.alloc {
			ax, use = append(ax, p.hit), append(use, p.use)
		}
		if p.freeKnown {
			fx, free = append(fx, p.hit), append(free, p.free)
		}
	}
	// The allocator must have been read at enough stops: at least two,
	// and enough for a trend when the series has enough stops.
	allocator := len(use) >= 2 && (len(use) >= minTrendStops || s.seen < minTrendStops)
	var findings []string
	if allocator {
		ut := trendOf(ax, use)
		grows := ut.grows(len(use))
		// Other threads' work in flight at a stop only adds to in-use
		// heap: the floor, each window's least, is what a leak raises.
		// With enough stops it decides, and sizes, the leak.
		if fx, fy := floorOf(ax, use); fx != nil {
			ft := trendOf(fx, fy)
			fs := ft.slope
			f.InUseFloorPerHit = &fs
			ut, grows = trend{z: ut.z, slope: ft.slope}, ft.grows(len(fy))
		}
		ug := growth(ut)
		per := int64(math.Round(ut.slope))
		uz := round2(ut.z)
		slope := ut.slope
		f.InUseGrowth, f.InUsePerHit, f.InUseTrend, f.InUsePerHitExact = &ug, &per, &uz, &slope
		if firstUse != nil && lastUse != nil {
			c := *lastUse - *firstUse
			f.InUseChange = &c
		}
		if grows {
			findings = append(findings, runjson.VerdictLeak)
		}
		excess := f.RSSGrowth - max(ug, 0)
		if len(free) >= 2 {
			ft := trendOf(fx, free)
			fg, fz := growth(ft), round2(ft.z)
			f.FreeGrowth, f.FreeTrend = &fg, &fz
			rest := excess - max(fg, 0)
			// Free heap the allocator held all along can become resident
			// again (pages malloc_trim or the kernel took back, touched
			// anew and pinned by live small blocks): growth it can hold
			// is the heap's, not outside it.
			held := deref(s.lastFreePtr())
			if rssGrows && rest >= minRSSBytes && 2*rest >= f.RSSGrowth && rest > held {
				findings = append(findings, runjson.VerdictOutsideHeap)
			}
			if (rssGrows && excess >= minRSSBytes && (2*fg >= excess || held >= excess)) || (trimProbe && medianTrim(pts) >= minRSSBytes) {
				findings = append(findings, runjson.VerdictRetention)
			}
		} else if rssGrows && excess >= minRSSBytes {
			// Free heap is not known (heaptrack's in-use heap under
			// another allocator): what the rest is cannot be said.
			findings = append(findings, runjson.VerdictRSSGrowth)
		}
	} else if rssGrows {
		findings = append(findings, runjson.VerdictRSSGrowth)
	}
	v := runjson.Verdict{Breakpoint: bp, Verdict: runjson.VerdictFlat, Findings: findings, Figures: f}
	switch {
	case s.seen < minTrendStops:
		v.Verdict = runjson.VerdictTooFewStops
		if len(findings) > 0 {
			v.Verdict = findings[0]
		}
	case !allocator:
		// Failed reads, or an allocator that is not glibc's, are no
		// evidence that the heap is flat.
		v.Verdict = runjson.VerdictHeapUnmeasured
	case len(findings) > 0:
		v.Verdict = findings[0]
	}
	if v.Findings == nil {
		v.Findings = []string{}
	}
	v.Sentence = sentence(v, trimProbe)
	return v
}

// heldFree is the free heap a sentence says even when it did not grow:
// retention by level (freed memory kept from the start), not growth.
const heldFree = 8 << 20

// largeChange is the change from the first stop to the last that a
// flat verdict says, with what to run next.
const largeChange = 1 << 20

// floorWindows is how many windows the floor of an in-use series is
// taken over, and floorWindow the fewest stops a window has: a series of
// fewer than floorWindows*floorWindow stops is judged as it is.
const (
	floorWindows = 12
	floorWindow  = 4
)

// floorOf is the lower envelope of the series ys over xs: the least
// value of each of floorWindows windows of consecutive stops, at its
// stop; nil when the series is too short to have one (docs/facts.md,
// fact 90).
func floorOf(xs []int, ys []int64) ([]int, []int64) {
	w := len(ys) / floorWindows
	if w < floorWindow {
		return nil, nil
	}
	var fx []int
	var fy []int64
	for k := 0; k+w <= len(ys); k += w {
		m := k
		for i := k + 1; i < k+w; i++ {
			if ys[i] < ys[m] {
				m = i
			}
		}
		fx, fy = append(fx, xs[m]), append(fy, ys[m])
	}
	return fx, fy
}

// medianTrim is what malloc_trim(0) returned at the median stop, 0
// without the probe.
func medianTrim(pts []point) int64 {
	var ts []int64
	for _, p := range pts {
		if p.trim != nil {
			ts = append(ts, *p.trim)
		}
	}
	if len(ts) == 0 {
		return 0
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// sentence says a verdict in one sentence with its numbers, and what to do
// next: the verdict's own clause, then the other findings that hold.
// rerunMassif is where a leak's verdict sends the user for its call
// sites; with native.sites they are in the same reports (sitesBelow).
const (
	rerunMassif = "rerun with --backend massif, or with --sites at native speed, to see the allocation call sites"
	sitesBelow  = "the call sites that grew are the suspects below (native.sites)"
)

func sentence(v runjson.Verdict, trimProbe bool) string {
	f := v.Figures
	b := snapshots.FormatBytes
	over := fmt.Sprintf("over %d hits (%d stops)", f.Hits, f.Stops)
	// Changes are from the first stop to the last; growths are trends.
	rss := "resident memory " + changed(f.RSSChange)
	heap := func() string {
		if f.InUseChange == nil {
			return ""
		}
		return " and in-use heap " + changed(*f.InUseChange)
	}
	trim := ""
	if f.TrimReleased != nil {
		// Resident memory can rise while malloc_trim(0) runs (other
		// threads, page faults): nothing returned, not a negative amount.
		trim = fmt.Sprintf("; malloc_trim(0) returned up to %s at a stop, %s over the run", b(max(*f.TrimReleased, 0)), b(max(deref(f.TrimReleasedTotal), 0)))
	}
	if f.FreeBytes != nil && !slices.Contains(v.Findings, runjson.VerdictRetention) && *f.FreeBytes >= heldFree {
		trim += fmt.Sprintf("; the allocator held %s free at the last stop", b(*f.FreeBytes))
	}
	unread := unreadClause(f)
	switch v.Verdict {
	case runjson.VerdictFlat:
		out := fmt.Sprintf("flat at breakpoint %s: no steady growth %s: %s%s%s%s", v.Breakpoint, over, rss, heap(), trim, unread)
		if big := max(f.RSSChange, deref(f.InUseChange)); big >= largeChange {
			out += fmt.Sprintf("; but it grew %s from the first stop to the last without a steady trend (steps, or other threads' work in flight at the stops): more stops (a breakpoint hit more often, a longer run) tell a trend from steps, and --sites says which call sites hold it", b(big))
		}
		return out
	case runjson.VerdictTooFewStops:
		return fmt.Sprintf("too few stops at breakpoint %s to tell steady growth from noise: %d stops, a verdict needs at least %d (%s%s)%s%s",
			v.Breakpoint, f.Stops, minTrendStops, rss, heap(), trim, unread)
	case runjson.VerdictHeapUnmeasured:
		out := fmt.Sprintf("in-use heap unmeasured at breakpoint %s at %d of %d stops, too few left to judge it: %s; %s %s",
			v.Breakpoint, f.UnmeasuredStops, f.Stops, f.UnmeasuredWhy, rss, over)
		if slices.Contains(v.Findings, runjson.VerdictRSSGrowth) {
			out += fmt.Sprintf(", a steady growth (trend %s)", signed(f.RSSGrowth))
		}
		return out + "; " + unmeasuredNext(f.UnmeasuredWhy)
	}
	var clauses, next []string
	for _, fd := range v.Findings {
		switch fd {
		case runjson.VerdictLeak:
			heapName := "in-use heap"
			switch f.InUseSource {
			case "heaptrack":
				heapName = "in-use heap (heaptrack's record)"
			case "jemalloc":
				heapName = "in-use heap (jemalloc's, by size class)"
			}
			clauses = append(clauses, fmt.Sprintf("leak at breakpoint %s: %s grew %s %s, %s per hit, up in %d of %d intervals between stops that read it; %s",
				v.Breakpoint, heapName, signed(*f.InUseGrowth), over, perHit(f), f.InUseIntervals, f.Intervals, rss))
			next = append(next, rerunMassif)
			if threads := int64(max(deref32(f.Arenas), 1)); f.InUseSource == "" && f.TcacheBytes == nil && *f.InUseGrowth <= tcacheBytes*threads {
				next = append(next, fmt.Sprintf("glibc's per-thread caches count as in use and can fill by up to %s a thread: GLIBC_TUNABLES=glibc.malloc.tcache_count=0 rules them out", b(tcacheBytes)))
			}
		case runjson.VerdictOutsideHeap:
			clauses = append(clauses, fmt.Sprintf("memory outside the heap at breakpoint %s: resident memory grew %s %s while in-use heap changed %s and free heap %s",
				v.Breakpoint, b(f.RSSGrowth), over, signed(*f.InUseGrowth), signed(*f.FreeGrowth)))
			next = append(next, "mmap, thread stacks or another allocator: /proc/PID/smaps names the mappings")
		case runjson.VerdictRetention:
			if excess := f.RSSGrowth - max(*f.InUseGrowth, 0); 2**f.FreeGrowth < excess && f.FreeBytes != nil {
				clauses = append(clauses, fmt.Sprintf("allocator retention at breakpoint %s: resident memory grew %s %s while in-use heap changed %s and the allocator held %s free at the last stop (%s): free heap pages resident again, pinned between live small blocks",
					v.Breakpoint, signed(f.RSSGrowth), over, signed(*f.InUseGrowth), b(*f.FreeBytes), signed(*f.FreeGrowth)))
			} else {
				clauses = append(clauses, fmt.Sprintf("allocator retention at breakpoint %s: resident memory grew %s %s while in-use heap changed %s and the allocator holds %s more free%s",
					v.Breakpoint, signed(f.RSSGrowth), over, signed(*f.InUseGrowth), signed(*f.FreeGrowth), freeLevel(f)))
			}
			if !trimProbe && f.InUseSource != "jemalloc" {
				next = append(next, "set native.trim_probe: true to measure what malloc_trim(0) would return")
			}
			if f.InUseSource == "jemalloc" {
				next = append(next, "jemalloc gives unused pages back after dirty_decay_ms and muzzy_decay_ms (MALLOC_CONF), or at once through mallctl(\"arena.<i>.purge\")")
			} else {
				next = append(next, "fewer arenas (MALLOC_ARENA_MAX=2), a lower M_TRIM_THRESHOLD (mallopt, or GLIBC_TUNABLES=glibc.malloc.trim_threshold=...) or calling malloc_trim return it to the system")
			}
		case runjson.VerdictRSSGrowth:
			clauses = append(clauses, fmt.Sprintf("resident memory grew %s at breakpoint %s %s", b(f.RSSGrowth), v.Breakpoint, over))
			if f.InUseSource == "heaptrack" {
				next = append(next, "more than the in-use heap heaptrack recorded: the allocator's free memory, or mappings outside it (/proc/PID/smaps names them)")
			} else {
				next = append(next, "the allocator could not be read to say whether it is a leak")
			}
		}
	}
	out := clauses[0]
	if len(clauses) > 1 {
		out += "; also " + strings.Join(clauses[1:], "; also ")
	}
	if trimProbe && f.TrimReleased == nil && f.InUseSource != "jemalloc" && slices.Contains(v.Findings, runjson.VerdictRetention) {
		trim = "; malloc_trim(0) returned nothing" + trim
	}
	return out + trim + unread + "; " + strings.Join(next, "; ")
}

// freeLevel says the free heap at the last stop, "" when unknown.
func freeLevel(f runjson.VerdictFigures) string {
	if f.FreeBytes == nil {
		return ""
	}
	return fmt.Sprintf(" (%s free at the last stop)", snapshots.FormatBytes(*f.FreeBytes))
}

// changed says a change in bytes: "+144.0 KiB", "0 B".
func changed(n int64) string { return signed(n) }

// perHit says a leak's growth per hit, to two decimals below 10 bytes
// (a slow leak's 0.47 B a hit is not "+0 B").
func perHit(f runjson.VerdictFigures) string {
	if x := f.InUsePerHitExact; x != nil && math.Abs(*x) < 10 {
		return fmt.Sprintf("%+.2f B", *x)
	}
	return signed(deref(f.InUsePerHit))
}

// unreadClause says how many stops did not read the allocator or have
// no per-site snapshot, and why, when some did not and the verdict rests
// on the others.
func unreadClause(f runjson.VerdictFigures) string {
	out := ""
	if n := f.UnmeasuredStops; n > 0 {
		out += fmt.Sprintf("; %d of %d stops did not read the allocator (%s): the verdict rests on the other %d", n, f.Stops, f.UnmeasuredWhy, f.Stops-n)
	}
	return out
}

// unmeasuredNext is what to run when the heap could not be measured for
// why.
func unmeasuredNext(why string) string {
	if strings.Contains(why, "allocates with") || strings.Contains(why, "cannot be read") {
		return "run with --sites: heaptrack records the in-use heap and its call sites whatever the allocator (or --backend massif, which replaces the allocator)"
	}
	return "run.json's allocator-call-failed and allocator-busy events name each stop; --sites takes the in-use heap from heaptrack's record instead, and --backend massif measures it exactly"
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func deref32(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func signed(n int64) string { return snapshots.FormatDelta(n) }

// nativeGate applies report.fail_on to in-use heap growth: growth_per_hit
// and total_growth limit each breakpoint's.
func nativeGate(limits plan.FailOn, verdicts []runjson.Verdict) error {
	var over []string
	for _, v := range verdicts {
		f := v.Figures
		// A limit on a heap that was not measured is not met: CI must
		// not pass what it could not check.
		if v.Verdict == runjson.VerdictHeapUnmeasured && (limits.GrowthPerHit > 0 || limits.TotalGrowth > 0) {
			return fmt.Errorf("report.fail_on cannot be applied at breakpoint %q: its in-use heap is unmeasured (%s); run with --sites, whose in-use heap is heaptrack's record", v.Breakpoint, f.UnmeasuredWhy)
		}
		switch {
		case f.InUsePerHit != nil && limits.GrowthPerHit > 0 && *f.InUsePerHit > limits.GrowthPerHit:
			over = append(over, fmt.Sprintf("in-use heap %s per hit at breakpoint %q", snapshots.FormatDelta(*f.InUsePerHit), v.Breakpoint))
		case f.InUseGrowth != nil && limits.TotalGrowth > 0 && *f.InUseGrowth > limits.TotalGrowth:
			over = append(over, fmt.Sprintf("in-use heap %s in total at breakpoint %q", snapshots.FormatDelta(*f.InUseGrowth), v.Breakpoint))
		}
	}
	if over == nil {
		return nil
	}
	return &backend.LeakError{GrowthPerHit: limits.GrowthPerHit, TotalGrowth: limits.TotalGrowth, Suspects: over, Of: "breakpoint(s)"}
}
