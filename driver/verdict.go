package driver

import (
	"fmt"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// Memory is what the native backend reads at a stop (run.json
// stops[].memory). The allocator's figures are glibc's mallinfo2(); they
// are absent when the program's allocator cannot be read (a static
// binary, a C library that is not glibc).
type Memory struct {
	RSSBytes     int64 `json:"rss_bytes"`      // VmRSS of /proc/PID/status
	AnonRSSBytes int64 `json:"anon_rss_bytes"` // RssAnon
	// HeapInUseBytes is mallinfo2's uordblks: allocated and not freed
	// (chunks in glibc's per-thread caches count as in use).
	HeapInUseBytes *int64 `json:"heap_in_use_bytes,omitempty"`
	// HeapFreeBytes is fordblks: freed but held by the allocator.
	HeapFreeBytes *int64 `json:"heap_free_bytes,omitempty"`
	// MmapBytes is hblkhd: blocks the allocator mmapped one each.
	MmapBytes *int64 `json:"mmap_bytes,omitempty"`
	// ArenaBytes is arena: the bytes of the arenas' heaps.
	ArenaBytes *int64 `json:"arena_bytes,omitempty"`
	// Arenas is the number of arenas: glibc's narenas, found through
	// libc's symbol table (agent.py, narenas_address).
	Arenas *int `json:"arenas,omitempty"`
	// TrimReleasedBytes is how much VmRSS dropped when the stop called
	// malloc_trim(0) (native.trim_probe), after the figures above.
	TrimReleasedBytes *int64 `json:"trim_released_bytes,omitempty"`
	// AllocatorError is set by the agent and not recorded (an event says
	// it once).
	AllocatorError string `json:"allocator_error,omitempty"`
	// CallError says why this stop's call to the allocator did not
	// return; not recorded (an event says it).
	CallError string `json:"call_error,omitempty"`
	// BusyError says that a thread held an arena's lock at this stop, so
	// that the allocator was not read; not recorded (an event says it).
	BusyError string `json:"busy_error,omitempty"`
}

// MemoryDelta is the change between two stops (run.json
// diffs[].memory_delta, native backend).
type MemoryDelta struct {
	RSSBytes       int64  `json:"rss_bytes"`
	HeapInUseBytes *int64 `json:"heap_in_use_bytes,omitempty"`
	HeapFreeBytes  *int64 `json:"heap_free_bytes,omitempty"`
}

// MemoryDiff is a diff of the native backend: between consecutive hits of
// a breakpoint, or within an around_call's call.
type MemoryDiff struct {
	Kind        string      `json:"kind"` // "between-hits" or "within-call"
	Breakpoint  string      `json:"breakpoint"`
	FromSeq     int         `json:"from_seq"`
	ToSeq       int         `json:"to_seq"`
	MemoryDelta MemoryDelta `json:"memory_delta"`
}

func delta(a, b *Memory) MemoryDelta {
	d := MemoryDelta{RSSBytes: b.RSSBytes - a.RSSBytes}
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

// The verdicts of the native backend.
const (
	VerdictLeak        = "leak"
	VerdictRetention   = "retention"
	VerdictOutsideHeap = "outside-heap"
	VerdictFlat        = "flat"
	// VerdictRSSGrowth: resident memory grew, and the allocator could not
	// be read to say why.
	VerdictRSSGrowth = "rss-growth"
)

// Verdict is run.json's verdicts[]: what the native backend concludes of
// one breakpoint's hits.
type Verdict struct {
	Breakpoint string         `json:"breakpoint"`
	Verdict    string         `json:"verdict"`
	Figures    VerdictFigures `json:"figures"`
	// Sentence says it in words, with what to do next.
	Sentence string `json:"sentence"`
}

// VerdictFigures are the growths from a breakpoint's first hit-phase stop
// to its last.
type VerdictFigures struct {
	Stops          int    `json:"stops"`
	Hits           int    `json:"hits"` // hits between the first and the last stop
	RSSGrowth      int64  `json:"rss_growth_bytes"`
	InUseGrowth    *int64 `json:"heap_in_use_growth_bytes,omitempty"`
	FreeGrowth     *int64 `json:"heap_free_growth_bytes,omitempty"`
	InUsePerHit    *int64 `json:"heap_in_use_growth_per_hit_bytes,omitempty"`
	InUseIntervals int    `json:"heap_in_use_grew_intervals"` // intervals in which in-use grew
	// TrimReleased is the most that malloc_trim(0) returned at one stop,
	// with native.trim_probe.
	TrimReleased *int64 `json:"trim_released_bytes,omitempty"`
}

// The thresholds of the verdicts (README, "Native verdicts"). Growth
// below them is noise: a page of stack, a page-aligned RSS step, the
// probe's own scratch page.
const (
	// minLeakBytes is the least in-use growth, over the whole run, that
	// counts as a leak.
	minLeakBytes = 1024
	// minRSSBytes is the least resident growth that counts at all.
	minRSSBytes = 256 << 10
)

// nativeAnalysis makes the native backend's diffs and verdicts as the
// stops arrive. It keeps the hit-phase memory of each breakpoint's stops
// (a few dozen bytes a stop).
type nativeAnalysis struct {
	plan  *breakpoints.Plan
	diffs *spool
	hits  map[string][]hitMemory
	// open are the hit-phase stops of around_call breakpoints whose
	// return is still to come, by hit stop.
	open map[*taken]*Memory
}

type hitMemory struct {
	seq, hit int
	mem      *Memory
}

func newNativeAnalysis(plan *breakpoints.Plan, diffs *spool) *nativeAnalysis {
	return &nativeAnalysis{plan: plan, diffs: diffs, hits: make(map[string][]hitMemory), open: make(map[*taken]*Memory)}
}

func (a *nativeAnalysis) add(t *taken) {
	mem := t.stop.Memory
	if mem == nil {
		return
	}
	bp := t.stop.Breakpoint
	if t.hitOf != nil {
		if from := t.hitOf.stop.Memory; from != nil {
			a.diffs.add(&MemoryDiff{Kind: "within-call", Breakpoint: bp, FromSeq: t.hitOf.stop.Seq, ToSeq: t.stop.Seq, MemoryDelta: delta(from, mem)})
		}
		return
	}
	prev := a.hits[bp]
	if n := len(prev); n > 0 {
		last := prev[n-1]
		a.diffs.add(&MemoryDiff{Kind: "between-hits", Breakpoint: bp, FromSeq: last.seq, ToSeq: t.stop.Seq, MemoryDelta: delta(last.mem, mem)})
	}
	a.hits[bp] = append(prev, hitMemory{seq: t.stop.Seq, hit: t.stop.Hit, mem: mem})
}

// verdicts returns a verdict for every breakpoint with at least two
// hit-phase stops, in plan order.
func (a *nativeAnalysis) verdicts(trimProbe bool) []Verdict {
	var out []Verdict
	for _, bp := range a.plan.Breakpoints {
		if v, ok := verdictOf(bp.Name, a.hits[bp.Name], trimProbe); ok {
			out = append(out, v)
		}
	}
	return out
}

// verdictOf decides a breakpoint's verdict from its hit-phase stops. In-use
// heap grows steadily when it grew by at least minLeakBytes over the run
// and in at least three quarters of the intervals between stops;
// resident memory grows when it grew by at least minRSSBytes.
//   - RSS flat: leak when in-use heap grows steadily, else flat;
//   - RSS grows: leak when in-use heap grows steadily by at least half of
//     it; else retention when the allocator's free bytes grew by at least
//     half of it; else leak when in-use heap did (unsteadily); else
//     outside-heap: neither in-use nor free heap explains it.
func verdictOf(bp string, hits []hitMemory, trimProbe bool) (Verdict, bool) {
	if len(hits) < 2 {
		return Verdict{}, false
	}
	first, last := hits[0].mem, hits[len(hits)-1].mem
	f := VerdictFigures{Stops: len(hits), Hits: hits[len(hits)-1].hit - hits[0].hit, RSSGrowth: last.RSSBytes - first.RSSBytes}
	for _, h := range hits {
		if t := h.mem.TrimReleasedBytes; t != nil && (f.TrimReleased == nil || *t > *f.TrimReleased) {
			v := *t
			f.TrimReleased = &v
		}
	}
	v := Verdict{Breakpoint: bp, Verdict: VerdictFlat, Figures: f}
	allocator := first.HeapInUseBytes != nil && last.HeapInUseBytes != nil
	rssGrew := f.RSSGrowth >= minRSSBytes
	if !allocator {
		if rssGrew {
			v.Verdict = VerdictRSSGrowth
		}
		v.Sentence = sentence(v, trimProbe)
		return v, true
	}
	use := *last.HeapInUseBytes - *first.HeapInUseBytes
	free := *last.HeapFreeBytes - *first.HeapFreeBytes
	v.Figures.InUseGrowth, v.Figures.FreeGrowth = &use, &free
	if f.Hits > 0 {
		per := use / int64(f.Hits)
		v.Figures.InUsePerHit = &per
	}
	for i := 1; i < len(hits); i++ {
		// A stop may lack the figures (the allocator was busy).
		if a, b := hits[i-1].mem.HeapInUseBytes, hits[i].mem.HeapInUseBytes; a != nil && b != nil && *b > *a {
			v.Figures.InUseIntervals++
		}
	}
	steady := use >= minLeakBytes && 4*v.Figures.InUseIntervals >= 3*(len(hits)-1)
	switch {
	case !rssGrew && steady:
		v.Verdict = VerdictLeak
	case !rssGrew:
	case steady && 2*use >= f.RSSGrowth:
		v.Verdict = VerdictLeak
	case 2*free >= f.RSSGrowth:
		v.Verdict = VerdictRetention
	case 2*use >= f.RSSGrowth:
		v.Verdict = VerdictLeak
	default:
		v.Verdict = VerdictOutsideHeap
	}
	v.Sentence = sentence(v, trimProbe)
	return v, true
}

// sentence says a verdict in one sentence with its numbers, and what to do
// next.
func sentence(v Verdict, trimProbe bool) string {
	f := v.Figures
	b := snapshots.FormatBytes
	over := fmt.Sprintf("over %d hits (%d stops)", f.Hits, f.Stops)
	switch v.Verdict {
	case VerdictLeak:
		return fmt.Sprintf("leak at breakpoint %s: in-use heap grew %s %s (%s per hit), resident memory %s; rerun with --backend massif to see the allocation call sites",
			v.Breakpoint, b(*f.InUseGrowth), over, b(deref(f.InUsePerHit)), signed(f.RSSGrowth))
	case VerdictRetention:
		trim := "set native.trim_probe: true to measure what malloc_trim(0) would return"
		if f.TrimReleased != nil {
			trim = fmt.Sprintf("malloc_trim(0) returned up to %s at a stop", b(*f.TrimReleased))
		} else if trimProbe {
			trim = "malloc_trim(0) returned nothing"
		}
		return fmt.Sprintf("allocator retention at breakpoint %s: resident memory grew %s %s while in-use heap changed %s and the allocator holds %s more free; %s; fewer arenas (MALLOC_ARENA_MAX=2), a lower M_TRIM_THRESHOLD (mallopt, or GLIBC_TUNABLES=glibc.malloc.trim_threshold=...) or calling malloc_trim return it to the system",
			v.Breakpoint, b(f.RSSGrowth), over, signed(*f.InUseGrowth), b(*f.FreeGrowth), trim)
	case VerdictOutsideHeap:
		return fmt.Sprintf("memory outside the heap at breakpoint %s: resident memory grew %s %s while in-use heap changed %s and free heap %s: mmap, thread stacks or another allocator; /proc/PID/smaps names the mappings",
			v.Breakpoint, b(f.RSSGrowth), over, signed(*f.InUseGrowth), signed(*f.FreeGrowth))
	case VerdictRSSGrowth:
		return fmt.Sprintf("resident memory grew %s at breakpoint %s %s; glibc's allocator could not be read to say whether it is a leak", b(f.RSSGrowth), v.Breakpoint, over)
	}
	if f.InUseGrowth == nil {
		return fmt.Sprintf("flat at breakpoint %s: resident memory changed %s %s", v.Breakpoint, signed(f.RSSGrowth), over)
	}
	return fmt.Sprintf("flat at breakpoint %s: resident memory changed %s and in-use heap %s %s", v.Breakpoint, signed(f.RSSGrowth), signed(*f.InUseGrowth), over)
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func signed(n int64) string { return snapshots.FormatDelta(n) }

// nativeGate applies report.fail_on to in-use heap growth: growth_per_hit
// and total_growth limit each breakpoint's.
func nativeGate(limits breakpoints.FailOn, verdicts []Verdict) error {
	var over []string
	for _, v := range verdicts {
		f := v.Figures
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
	return &LeakError{GrowthPerHit: limits.GrowthPerHit, TotalGrowth: limits.TotalGrowth, Suspects: over}
}
