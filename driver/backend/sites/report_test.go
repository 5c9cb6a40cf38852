package sites

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// A run with many hits reports only the shownDiffs largest heap changes of
// each breakpoint and kind, in stop order, and says how many more run.json
// holds; run.json gets every diff.
func TestReportBounded(t *testing.T) {
	plan, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, sk := newTestAnalysis(plan)
	const hits = 30
	type change struct {
		to    int
		delta int64
	}
	var between []change
	for i := 1; i < hits; i++ {
		// Deltas of both signs and with ties, in no order.
		d := &snapshots.Diff{Kind: "between-hits", Breakpoint: "request", FromSeq: i, ToSeq: i + 1, DeltaBytes: int64((i*37)%23-11) * 8}
		d.Sites = []snapshots.SiteDelta{{Frame: snapshots.Frame{Function: "f"}, Delta: d.DeltaBytes}}
		a.add(d)
		between = append(between, change{d.ToSeq, d.DeltaBytes})
	}
	for i := 1; i <= 3; i++ {
		a.add(&snapshots.Diff{Kind: "within-call", Breakpoint: "request", FromSeq: 100 + 2*i, ToSeq: 101 + 2*i, DeltaBytes: 16,
			Sites: []snapshots.SiteDelta{{Frame: snapshots.Frame{Function: "f"}, After: 16, Delta: 16}}})
	}
	rep := a.report("")

	// The expected between-hits diffs: the ten largest |delta|, earlier
	// first among equals, shown in stop order.
	sort.SliceStable(between, func(i, j int) bool { return abs(between[i].delta) > abs(between[j].delta) })
	var want []int
	for _, c := range between[:shownDiffs] {
		want = append(want, c.to)
	}
	sort.Ints(want)
	want = append(want, 103, 105, 107)
	var got []int
	for _, d := range rep.Diffs {
		got = append(got, d.ToSeq)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diffs shown, by to_seq (-want +got):\n%s", diff)
	}

	res := &backend.Outcome{Dir: "/runs/x", Manifest: &runjson.Manifest{Target: runjson.Target{Argv: []string{"./leak"}}, Status: runjson.StatusCompleted},
		Report: rep, Stops: hits + 3, Diffs: sk.len()}
	var out bytes.Buffer
	if err := writeText(&out, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	// No suspect: the terminal shows no diff, only the counts, and says
	// where the diffs are.
	if n := len(regexp.MustCompile(`(?m)^  stop \d+ → \d+ `).FindAllString(out.String(), -1)); n != 0 {
		t.Errorf("text report of a run with no suspect shows %d diffs:\n%s", n, out.String())
	}
	for _, want := range []string{
		"\n  29 intervals between hits (stops 1 → 30): heap 0 B → 0 B (0 B); sites changed in all; the largest heap change +88 B (stops 18 → 19)\n",
		"\n  3 calls from hit to return (stops 102 … 107); sites changed in all; the largest heap change +16 B (stops 102 → 103)\n",
		"\nShown: none of the 32 diffs in which a site changed; report.md has up to 10 of each breakpoint and kind, run.json all.\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, out.String())
		}
	}
	more := "19 diffs more in run.json (shown: the 10 largest heap changes of each breakpoint and kind in which a site changed)."

	md := filepath.Join(t.TempDir(), reportFile)
	if err := writeReport(md, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n#### Stop "); n != shownDiffs+3 || !strings.Contains(string(data), more) {
		t.Errorf("report.md shows %d diffs, want %d, and must say %q:\n%s", n, shownDiffs+3, more, data)
	}

	// Every diff is still spooled for run.json, in the order made.
	all := sk.all()
	if len(all) != hits-1+3 || all[0].ToSeq != 2 || all[hits-2].ToSeq != hits {
		t.Errorf("spooled %d diffs, want %d in order", len(all), hits-1+3)
	}
}

// A short run with a suspect shows every diff and no "more" line.
func TestReportShort(t *testing.T) {
	a, sk := newTestAnalysis(&plan.Plan{})
	for i := 1; i <= shownDiffs; i++ {
		a.add(&snapshots.Diff{Kind: "between-hits", Breakpoint: "b", FromSeq: i, ToSeq: i + 1, DeltaBytes: 16,
			Sites: []snapshots.SiteDelta{{Frame: snapshots.Frame{Function: "f"}, After: int64(16 * i), Delta: 16, Change: snapshots.ChangeGrown}}})
	}
	rep := a.report("")
	rep.Suspects = []snapshots.Suspect{{Frame: snapshots.Frame{Function: "f"}, Breakpoint: "b", GrowthPerHit: 16}}
	res := &backend.Outcome{Manifest: &runjson.Manifest{}, Report: rep, Diffs: sk.len()}
	var out bytes.Buffer
	if err := writeText(&out, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "(between hits)"); n != shownDiffs || strings.Contains(out.String(), "more in run.json") {
		t.Errorf("%d diffs shown, want all %d and no \"more\" line:\n%s", n, shownDiffs, out.String())
	}
}

// Intervals in which no site changed are counted, all of them, not
// shown: 33 unchanged intervals of which the report keeps none make one
// line in the terminal and in report.md, and the verdict says no site
// grew.
func TestReportCountsUnchanged(t *testing.T) {
	a, sk := newTestAnalysis(&plan.Plan{})
	for i := 1; i <= 33; i++ {
		d := &snapshots.Diff{Kind: "between-hits", Breakpoint: "b", FromSeq: i, ToSeq: i + 1,
			BeforeBytes: 2936012, AfterBytes: 2936012, Sites: []snapshots.SiteDelta{}}
		if i%2 == 0 {
			a.count(d) // keep_snapshots: changed spools no diff for these
		} else {
			a.add(d)
		}
	}
	rep := a.report("")
	if len(rep.Diffs) != 0 {
		t.Errorf("the report keeps %d diffs in which no site changed", len(rep.Diffs))
	}
	res := &backend.Outcome{Dir: "/runs/x", Manifest: &runjson.Manifest{Status: runjson.StatusCompleted, Breakpoints: []runjson.BreakpointSummary{{Name: "b", Location: "f", Hits: 34, Snapshots: 34}}},
		Report: rep, Stops: 34, Diffs: sk.len()}
	if got, want := Verdict(res), "verdict: no leak found: no site grew between hits"; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	var out bytes.Buffer
	if err := writeText(&out, res, snapshots.RenderOptions{MaxDiffs: 3, MaxSites: 10}); err != nil {
		t.Fatal(err)
	}
	want := `Suspects: sites that grow between hits
  none: no site grew steadily between hits.

Breakpoint b
  33 intervals between hits (stops 1 → 34): heap 2.8 MiB → 2.8 MiB (0 B); no site changed in any
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("text report (-want +got):\n%s", diff)
	}
	md := filepath.Join(t.TempDir(), reportFile)
	if err := writeReport(md, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "no site changed"); n != 1 || strings.Contains(string(data), "#### Stop") ||
		!strings.Contains(string(data), "\n- 33 intervals between hits (stops 1 → 34): heap 2.8 MiB → 2.8 MiB (0 B); no site changed in any.\n") {
		t.Errorf("report.md:\n%s", data)
	}
}

// report.md shows as many callers per stack as the plan's report.depth
// asks for, and whole stacks when it is 0.
func TestReportDepth(t *testing.T) {
	var stack []snapshots.Frame
	for i := 0; i < 20; i++ {
		stack = append(stack, snapshots.Frame{Function: "f" + strconv.Itoa(i), File: "deep.c", Line: i + 1})
	}
	rep := &snapshots.Report{Suspects: []snapshots.Suspect{{Frame: stack[0], Stack: stack, Breakpoint: "request",
		GrowthPerHit: 16, GrowingIntervals: 3, Intervals: 3, TotalGrowth: 48}}}
	for _, tc := range []struct {
		depth   int
		callers int
		more    string
	}{{3, 3, "… 16 more callers"}, {0, 19, ""}, {12, 12, "… 7 more callers"}} {
		plan := &plan.Plan{Report: plan.Report{Depth: tc.depth}}
		res := &backend.Outcome{Manifest: &runjson.Manifest{Status: runjson.StatusCompleted}, MaxFrames: plan.Report.Depth, Report: rep}
		md := filepath.Join(t.TempDir(), reportFile)
		if err := writeReport(md, res); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(md)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for i := 1; i < len(stack); i++ {
			if strings.Contains(string(data), "f"+strconv.Itoa(i)+" (deep.c") {
				got++
			}
		}
		if got != tc.callers || (tc.more != "" && !strings.Contains(string(data), tc.more)) || (tc.more == "" && strings.Contains(string(data), "more caller")) {
			t.Errorf("depth %d: report.md shows %d callers, want %d (and %q):\n%s", tc.depth, got, tc.callers, tc.more, data)
		}
	}
}

// The verdict line names the fastest suspect with its name shortened and
// the blocks it gains per hit with their size.
func TestVerdictShortNameAndBlocks(t *testing.T) {
	long := "std::pair<std::_Rb_tree_iterator<std::pair<int const, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >, bool> " +
		"store::Cache<int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::less<int> >::put(int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, std::chrono::duration<long, std::ratio<1l, 1000l> >)"
	two, one, fifty, twelve := 2.0, 1.0, int64(50), int64(12)
	for _, tc := range []struct {
		sus  snapshots.Suspect
		want string
	}{
		{snapshots.Suspect{Frame: snapshots.Frame{Function: "do_cache_alloc", File: "cache.c", Line: 86}, Breakpoint: "command",
			GrowthPerHit: 100, BlocksPerHit: &two, BytesPerBlock: &fifty},
			"verdict: 1 suspect; fastest do_cache_alloc (cache.c:86) +100 B per hit (2 blocks of 50 B) at breakpoint command"},
		{snapshots.Suspect{Frame: snapshots.Frame{Function: long, File: "cache.hpp", Line: 40}, Breakpoint: "put",
			GrowthPerHit: 12, BlocksPerHit: &one, BytesPerBlock: &twelve},
			"verdict: 1 suspect; fastest store::Cache<…>::put(…) (cache.hpp:40) +12 B per hit (1 block of 12 B) at breakpoint put"},
		// A buffer that grows gains no block per hit: no size to give.
		{snapshots.Suspect{Frame: snapshots.Frame{Function: "grow", File: "v.c", Line: 3}, Breakpoint: "b", GrowthPerHit: 54},
			"verdict: 1 suspect; fastest grow (v.c:3) +54 B per hit at breakpoint b"},
	} {
		res := &backend.Outcome{Manifest: &runjson.Manifest{Status: runjson.StatusCompleted}, Report: &snapshots.Report{Suspects: []snapshots.Suspect{tc.sus}}}
		if got := Verdict(res); got != tc.want {
			t.Errorf("verdict:\n got %q\nwant %q", got, tc.want)
		}
	}
}

// fail_on's error names a suspect as the verdict does, its C++ name
// shortened.
func TestGateShortName(t *testing.T) {
	f := snapshots.Frame{Function: "std::pair<std::_Rb_tree_iterator<std::pair<int const, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >, bool> " +
		"store::Cache<int>::put(int, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const&, std::chrono::duration<long, std::ratio<1l, 1000l> >, std::allocator<char> const&)", File: "cache.hpp", Line: 40}
	err := gate(plan.FailOn{GrowthPerHit: 8}, []snapshots.Suspect{{Frame: f, Breakpoint: "put", GrowthPerHit: 12}})
	want := `fail_on exceeded by 1 site(s): store::Cache<…>::put(…) (cache.hpp:40) +12 B per hit at breakpoint "put"`
	if err == nil || err.Error() != want {
		t.Errorf("gate: %v, want %s", err, want)
	}
}
