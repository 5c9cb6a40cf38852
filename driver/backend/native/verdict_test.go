package native

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// seriesOf makes a breakpoint's series of stops at hits 1, 2, ...: RSS,
// in-use and free heap per stop (no allocator figures when use is nil).
func seriesOf(rss []int64, use, free []int64) *series {
	s := &series{stride: 1}
	for i := range rss {
		m := &runjson.Memory{RSSBytes: rss[i]}
		if use != nil && use[i] >= 0 {
			u, f := use[i], free[i]
			m.HeapInUseBytes, m.HeapFreeBytes = &u, &f
		} else {
			m.HeapUnmeasuredWhy = "glibc's arenas could not be read: a fastbin does not end"
		}
		s.add(pointOf(i+1, m))
	}
	return s
}

// repeat is n copies of v.
func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// ramp is n values from v, step apart.
func ramp(v, step int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v + int64(i)*step
	}
	return out
}

// plus adds b to a, element by element.
func plus(a, b []int64) []int64 {
	out := make([]int64, len(a))
	for i := range a {
		out[i] = a[i] + b[i]
	}
	return out
}

const mib = 1 << 20

// noise is other threads' in-flight work at ten stops: up to 600 KiB in
// use at one stop and none at the next, in no order.
var noise = []int64{0, 600 << 10, 100 << 10, 550 << 10, 20 << 10, 580 << 10, 0, 610 << 10, 40 << 10, 300 << 10}

// The rule, on exact series: each row is one breakpoint's ten (or fewer)
// stops and the findings that must hold.
func TestVerdictRule(t *testing.T) {
	for _, tc := range []struct {
		name            string
		rss, use, free  []int64
		verdict         string
		findings        []string
		useGrowth, rssG int64
	}{
		// The field report's service: 112 B kept per hit, in-use heap up
		// in 9 of 9 intervals, resident memory flat. No floor hides it.
		{name: "slow steady leak", rss: repeat(8*mib, 10), use: ramp(100000, 112, 10), free: repeat(50000, 10),
			verdict: runjson.VerdictLeak, findings: []string{runjson.VerdictLeak}, useGrowth: 9 * 112},
		// A leak in 18 of 18 intervals while resident memory grows more,
		// through freed memory the allocator keeps: both hold, leak first.
		{name: "leak and retention", rss: ramp(8*mib, 2*mib, 19), use: ramp(100000, 64<<10, 19), free: ramp(0, 1900<<10, 19),
			verdict: runjson.VerdictLeak, findings: []string{runjson.VerdictLeak, runjson.VerdictRetention}, useGrowth: 18 * 64 << 10, rssG: 36 * mib},
		// A leak that fills free arena pages: resident memory barely
		// moves; the in-use heap's trend is all that counts.
		{name: "leak into free pages", rss: repeat(8*mib, 10), use: ramp(1*mib, 50, 10), free: ramp(4*mib, -50, 10),
			verdict: runjson.VerdictLeak, findings: []string{runjson.VerdictLeak}, useGrowth: 450},
		// Other threads' in-flight work: in-use heap jumps by hundreds of
		// KiB from stop to stop with no trend.
		{name: "in-flight noise", rss: repeat(8*mib, 10), use: plus(repeat(1*mib, 10), noise), free: repeat(2*mib, 10),
			verdict: runjson.VerdictFlat, findings: []string{}},
		// The same noise over a leak of 128 KiB a hit: the trend shows.
		{name: "leak under noise", rss: repeat(8*mib, 10), use: plus(ramp(1*mib, 128<<10, 10), noise), free: repeat(2*mib, 10),
			verdict: runjson.VerdictLeak, findings: []string{runjson.VerdictLeak}},
		// One step (a cache filled once) is no trend.
		{name: "one step", rss: repeat(8*mib, 10), use: append(repeat(100000, 5), repeat(140000, 5)...), free: repeat(0, 10),
			verdict: runjson.VerdictFlat, findings: []string{}},
		{name: "retention", rss: ramp(8*mib, 2*mib, 6), use: repeat(7000, 6), free: ramp(1*mib, 2*mib, 6),
			verdict: runjson.VerdictRetention, findings: []string{runjson.VerdictRetention}, rssG: 10 * mib},
		{name: "outside the heap", rss: ramp(8*mib, mib, 6), use: repeat(7000, 6), free: repeat(1*mib, 6),
			verdict: runjson.VerdictOutsideHeap, findings: []string{runjson.VerdictOutsideHeap}, rssG: 5 * mib},
		// Growth below a page-rounding step of resident memory is not
		// growth.
		{name: "small rss steps", rss: ramp(8*mib, 16<<10, 10), use: repeat(7000, 10), free: repeat(0, 10),
			verdict: runjson.VerdictFlat, findings: []string{}, rssG: 9 * 16 << 10},
		// Without the allocator's figures the heap is unmeasured, never
		// flat: resident memory's growth is a finding, not the verdict.
		{name: "no allocator", rss: ramp(8*mib, mib, 6),
			verdict: runjson.VerdictHeapUnmeasured, findings: []string{runjson.VerdictRSSGrowth}, rssG: 5 * mib},
		{name: "failed reads, flat rss", rss: repeat(8*mib, 10),
			verdict: runjson.VerdictHeapUnmeasured, findings: []string{}},
		// Reads that failed at 6 of 10 stops leave 4: too few to judge.
		{name: "most reads failed", rss: repeat(8*mib, 10), use: []int64{-1, 100, -1, -1, 300, -1, 400, -1, 500, -1}, free: repeat(0, 10),
			verdict: runjson.VerdictHeapUnmeasured, findings: []string{}},
		// Reads that failed at 2 of 10 stops: the verdict rests on 8.
		{name: "some reads failed", rss: repeat(8*mib, 10), use: []int64{-1, 1112, 1224, 1336, -1, 1560, 1672, 1784, 1896, 2008}, free: repeat(0, 10),
			verdict: runjson.VerdictLeak, findings: []string{runjson.VerdictLeak}},
		// Four stops cannot show a trend, whatever they hold.
		{name: "four stops", rss: ramp(8*mib, mib, 4), use: ramp(7000, 10000, 4), free: repeat(0, 4),
			verdict: runjson.VerdictTooFewStops, findings: []string{}, useGrowth: 30000, rssG: 3 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := verdictOf("round", seriesOf(tc.rss, tc.use, tc.free), false)
			if v.Verdict != tc.verdict || !cmp.Equal(tc.findings, v.Findings) {
				t.Errorf("verdict %s, findings %v; want %s, %v\n%s", v.Verdict, v.Findings, tc.verdict, tc.findings, v.Sentence)
			}
			if tc.useGrowth != 0 && deref(v.Figures.InUseGrowth) != tc.useGrowth {
				t.Errorf("in-use growth %d, want %d", deref(v.Figures.InUseGrowth), tc.useGrowth)
			}
			if tc.rssG != 0 && v.Figures.RSSGrowth != tc.rssG {
				t.Errorf("rss growth %d, want %d", v.Figures.RSSGrowth, tc.rssG)
			}
			if !strings.Contains(v.Sentence, "breakpoint round") {
				t.Errorf("sentence %q", v.Sentence)
			}
			// Stops that did not read the allocator are counted, and
			// said with why.
			unread := 0
			for i := range tc.rss {
				if tc.use == nil || tc.use[i] < 0 {
					unread++
				}
			}
			if v.Figures.UnmeasuredStops != unread || (unread > 0) != strings.Contains(v.Sentence, "a fastbin does not end") {
				t.Errorf("%d stops unmeasured, want %d; sentence %q", v.Figures.UnmeasuredStops, unread, v.Sentence)
			}
			// A leak small enough to be glibc's per-thread cache filling
			// says how to rule that out.
			tcache := strings.Contains(v.Sentence, "GLIBC_TUNABLES=glibc.malloc.tcache_count=0 rules them out")
			if want := v.Verdict == runjson.VerdictLeak && *v.Figures.InUseGrowth <= tcacheBytes; tcache != want && tc.name != "some reads failed" {
				t.Errorf("sentence %q: tcache hint %v, want %v", v.Sentence, tcache, want)
			}
		})
	}
}

// The statistics themselves: Kendall's S over its deviation, and the
// median pairwise slope, which one wild stop does not move.
func TestTrendOf(t *testing.T) {
	for _, tc := range []struct {
		ys    []int64
		z     float64
		slope float64
	}{
		{[]int64{1, 2, 3, 4, 5}, 2.45, 1},
		{[]int64{5, 4, 3, 2, 1}, -2.45, -1},
		{[]int64{1, 1, 1, 1, 1}, 0, 0},
		{[]int64{0, 10, 20, 1000000, 40, 50}, 2.07, 10},
	} {
		xs := make([]int, len(tc.ys))
		for i := range xs {
			xs[i] = i + 1
		}
		got := trendOf(xs, tc.ys)
		if round2(got.z) != tc.z || got.slope != tc.slope {
			t.Errorf("trendOf(%v) = z %.2f, slope %g; want z %.2f, slope %g", tc.ys, got.z, got.slope, tc.z, tc.slope)
		}
	}
}

// A series of 100,000 stops keeps at most maxSeriesPoints of them, evenly
// spaced, and its figures still count every stop.
func TestSeriesThinning(t *testing.T) {
	s := &series{stride: 1}
	for i := 0; i < 100000; i++ {
		u, f := int64(1000+i*8), int64(0)
		s.add(pointOf(i+1, &runjson.Memory{RSSBytes: 8 * mib, HeapInUseBytes: &u, HeapFreeBytes: &f}))
	}
	if len(s.points) >= maxSeriesPoints {
		t.Errorf("%d points kept", len(s.points))
	}
	pts := s.analysed()
	for i := 1; i < len(pts)-1; i++ {
		if pts[i].index-pts[i-1].index != s.stride {
			t.Fatalf("points %d and %d are %d stops apart, stride %d", i-1, i, pts[i].index-pts[i-1].index, s.stride)
		}
	}
	if pts[len(pts)-1].index != 99999 {
		t.Errorf("last point is stop %d", pts[len(pts)-1].index)
	}
	v := verdictOf("round", s, false)
	if v.Verdict != runjson.VerdictLeak || v.Figures.Stops != 100000 || v.Figures.InUseIntervals != 99999 || *v.Figures.InUsePerHit != 8 || *v.Figures.InUseGrowth != 8*99999 {
		t.Errorf("verdict %s, figures %+v", v.Verdict, v.Figures)
	}
}

// With trim_probe, malloc_trim(0) hides the resident growth at every
// stop; what it returned is retention, and the sentence says how much.
func TestVerdictTrimProbe(t *testing.T) {
	s := &series{stride: 1}
	for i := 0; i < 6; i++ {
		u, f, tr := int64(7000), int64(mib+i*2*mib), int64(2*mib)
		s.add(pointOf(i+1, &runjson.Memory{RSSBytes: 8 * mib, HeapInUseBytes: &u, HeapFreeBytes: &f, TrimReleasedBytes: &tr}))
	}
	v := verdictOf("round", s, true)
	if v.Verdict != runjson.VerdictRetention || *v.Figures.TrimReleased != 2*mib || *v.Figures.TrimReleasedTotal != 12*mib {
		t.Errorf("verdict %s, figures %+v", v.Verdict, v.Figures)
	}
	if !strings.Contains(v.Sentence, "malloc_trim(0) returned up to 2.0 MiB at a stop, 12.0 MiB over the run") {
		t.Errorf("sentence %q", v.Sentence)
	}
}

// A run that failed leads its reports with how it ended, never with the
// leak its few stops show.
func TestNativeReportFailedRun(t *testing.T) {
	v := verdictOf("round", seriesOf(repeat(8*mib, 6), ramp(1000, 112, 6), repeat(0, 6)), false)
	code := 1
	m := &runjson.Manifest{Backend: Name, Status: runjson.StatusFailed, Error: "gdb's agent failed at breakpoint \"round\"", ExitCode: &code, ExitReason: "failed",
		Breakpoints: []runjson.BreakpointSummary{{Name: "round", Location: "round_done", Hits: 6, Snapshots: 6}}, Verdicts: []runjson.Verdict{v}}
	m.Target.Argv = []string{"./server"}
	res := &backend.Outcome{Manifest: m, Dir: t.TempDir(), Stops: 6, Diffs: 5}
	var text strings.Builder
	if err := (&Backend{}).Text(&text, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	if want := `run failed: gdb's agent failed at breakpoint "round" (exit 1: failed)`; lines[0] != want {
		t.Errorf("first line %q, want %q", lines[0], want)
	}
	if !strings.HasPrefix(lines[1], "verdict of the stops taken before the run ended: leak at breakpoint round") {
		t.Errorf("second line %q", lines[1])
	}
	if !strings.Contains(text.String(), "breakpoint round (round_done): 6 hits, 6 measurements; leak") {
		t.Errorf("text report:\n%s", text.String())
	}
	var md strings.Builder
	if err := (&Backend{}).Markdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(md.String(), "# snapctl run (native)\n\n**run failed: gdb's agent failed") {
		t.Errorf("report.md:\n%s", md.String())
	}
	if !strings.Contains(md.String(), "run.json's `diffs` hold the 5 changes between consecutive measurements") {
		t.Errorf("report.md:\n%s", md.String())
	}
	// An attach's reports say that snapctl attach made them.
	m.Native = &runjson.NativeSettings{AttachedPid: 4242}
	text.Reset()
	md.Reset()
	if err := (&Backend{}).Text(&text, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := (&Backend{}).Markdown(&md, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "\nsnapctl attach 4242 (native): ./server\n") || !strings.HasPrefix(md.String(), "# snapctl attach 4242 (native)\n") {
		t.Errorf("attach's reports:\n%s\n%s", text.String(), md.String())
	}
}

// TestVerdictTcacheHint: a small leak says that glibc's per-thread caches
// can be ruled out with GLIBC_TUNABLES only when the stops did not read
// them; when they did, the verdict gives what they held at the last stop.
func TestVerdictTcacheHint(t *testing.T) {
	const hint = "GLIBC_TUNABLES=glibc.malloc.tcache_count=0 rules them out"
	for _, read := range []bool{false, true} {
		s := &series{stride: 1}
		for i := range 6 {
			use, free := int64(7000+100*i), int64(0)
			m := &runjson.Memory{RSSBytes: 8 << 20, HeapInUseBytes: &use, HeapFreeBytes: &free}
			if read {
				cached := int64(1000 * i)
				m.TcacheBytes = &cached
			}
			s.add(pointOf(i+1, m))
		}
		v := verdictOf("round", s, false)
		if v.Verdict != runjson.VerdictLeak || strings.Contains(v.Sentence, hint) == read {
			t.Errorf("tcaches read %v: verdict %s, sentence %q", read, v.Verdict, v.Sentence)
		}
		if got := deref(v.Figures.TcacheBytes); (v.Figures.TcacheBytes != nil) != read || read && got != 5000 {
			t.Errorf("tcaches read %v: figures' tcache_bytes %v (%d)", read, v.Figures.TcacheBytes, got)
		}
	}
}

// The figures a sentence prints are what happened: a slow leak's slope
// to two decimals, not "+0 B"; resident memory's change from the first
// stop to the last, not its trend; how many stops did not read the
// allocator, beside the intervals counted.
func TestVerdictFigures(t *testing.T) {
	// 0.47 B a hit: 47 bytes every 100 hits, 20 stops.
	var rss, use, free []int64
	for i := 0; i < 20; i++ {
		rss = append(rss, 8*mib+int64(i%2)*4096)
		use = append(use, 100000+int64(i)*47)
		free = append(free, 0)
	}
	rss[19] = 8*mib + 144<<10
	s := &series{stride: 1}
	for i := range rss {
		u, f := use[i], free[i]
		s.add(pointOf(1+100*i, &runjson.Memory{RSSBytes: rss[i], HeapInUseBytes: &u, HeapFreeBytes: &f}))
	}
	v := verdictOf("request", s, false)
	if v.Verdict != runjson.VerdictLeak || !strings.Contains(v.Sentence, "+0.47 B per hit") {
		t.Errorf("verdict %s: %q, want +0.47 B per hit", v.Verdict, v.Sentence)
	}
	if v.Figures.RSSChange != 144<<10 || !strings.Contains(v.Sentence, "resident memory +144.0 KiB") {
		t.Errorf("rss change %d: %q, want +144.0 KiB", v.Figures.RSSChange, v.Sentence)
	}
	if !strings.Contains(v.Sentence, "up in 19 of 19 intervals between stops that read it") {
		t.Errorf("sentence %q", v.Sentence)
	}
}

// A --sites verdict tells its suspects' story: a site that grew steadily
// between hits makes it a leak, named with the site, even when the whole
// heap's trend showed retention alone; a stepwise site does when its
// steps kept new blocks, not when one buffer grew.
func TestVerdictAgreesWithSites(t *testing.T) {
	v := verdictOf("request", seriesOf(ramp(8*mib, 2*mib, 6), repeat(7000, 6), ramp(1*mib, 2*mib, 6)), false)
	if v.Verdict != runjson.VerdictRetention {
		t.Fatalf("verdict %s, want retention to start from", v.Verdict)
	}
	site := snapshots.Suspect{Breakpoint: "request", Pattern: snapshots.PatternSteady, GrowthPerHit: 16384,
		Frame: snapshots.Frame{Function: "load", File: "fstload.cc", Line: 112}}
	step := v
	step.Findings = slices.Clone(v.Findings)
	agreeWithSites(&step, []snapshots.Suspect{{Breakpoint: "request", Pattern: snapshots.PatternStepwise, GrowthPerHit: 100}})
	if step.Verdict != runjson.VerdictRetention {
		t.Errorf("a stepwise site made the verdict %s", step.Verdict)
	}
	// 64 KiB kept every 4th request: a stepwise site that gained a block
	// in each of its 47 steps is a leak; one block that grew (a buffer)
	// is not.
	kept, one := int64(49), int64(1)
	for _, c := range []struct {
		blocks *int64
		want   string
	}{{&kept, runjson.VerdictLeak}, {&one, runjson.VerdictRetention}, {nil, runjson.VerdictRetention}} {
		w := v
		w.Findings = slices.Clone(v.Findings)
		agreeWithSites(&w, []snapshots.Suspect{{Breakpoint: "request", Pattern: snapshots.PatternStepwise, GrowthPerHit: 16301, GrowingIntervals: 47,
			Intervals: 197, TotalBlocks: c.blocks, Frame: snapshots.Frame{Function: "load", File: "fst.cpp", Line: 130}}})
		if w.Verdict != c.want || (c.want == runjson.VerdictLeak && !strings.HasPrefix(w.Sentence,
			"leak at breakpoint request: 1 call site grew steadily or in steps that kept new blocks between hits, the fastest load (fst.cpp:130) +15.9 KiB per hit")) {
			t.Errorf("stepwise site with blocks %v: verdict %s, want %s:\n%s", c.blocks, w.Verdict, c.want, w.Sentence)
		}
	}
	agreeWithSites(&v, []snapshots.Suspect{site})
	if v.Verdict != runjson.VerdictLeak || !cmp.Equal(v.Findings, []string{runjson.VerdictLeak, runjson.VerdictRetention}) ||
		!strings.HasPrefix(v.Sentence, "leak at breakpoint request: 1 call site grew steadily between hits, the fastest load (fstload.cc:112) +16.0 KiB per hit") {
		t.Errorf("verdict %s, findings %v:\n%s", v.Verdict, v.Findings, v.Sentence)
	}
}

// fail_on on a heap that was not measured fails (exit 1), saying why;
// native limits count breakpoints, not sites.
func TestNativeGateUnmeasured(t *testing.T) {
	v := verdictOf("request", seriesOf(repeat(8*mib, 6), nil, nil), false)
	err := nativeGate(plan.FailOn{GrowthPerHit: 1}, []runjson.Verdict{v})
	var leak *backend.LeakError
	if err == nil || errors.As(err, &leak) || !strings.Contains(err.Error(), `report.fail_on cannot be applied at breakpoint "request": its in-use heap is unmeasured (glibc's arenas could not be read: a fastbin does not end)`) {
		t.Errorf("gate: %v", err)
	}
	if err := nativeGate(plan.FailOn{}, []runjson.Verdict{v}); err != nil {
		t.Errorf("without limits: %v", err)
	}
	l := verdictOf("request", seriesOf(repeat(8*mib, 6), ramp(1000, 100, 6), repeat(0, 6)), false)
	if err := nativeGate(plan.FailOn{GrowthPerHit: 50}, []runjson.Verdict{l}); err == nil || !strings.HasPrefix(err.Error(), "fail_on exceeded by 1 breakpoint(s): in-use heap +100 B per hit") {
		t.Errorf("gate: %v", err)
	}
}
