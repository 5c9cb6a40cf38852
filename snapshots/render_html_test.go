package snapshots

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// htmlReport is growthReport with what report.html draws besides: the
// stops of breakpoint "request" and its growth from the first hit to the
// last.
func htmlReport(t *testing.T) *Report {
	t.Helper()
	r := growthReport(t)
	for i := 1; i <= 7; i++ {
		snap := loadSnapshot(t, fmt.Sprintf("growth/hit-%d.ms", i))
		r.Stops = append(r.Stops, StopPoint{Seq: i, Breakpoint: "request", Hit: i, Phase: "hit",
			Time: fmt.Sprintf("2025-01-02T03:04:0%d.000Z", i), Thread: "1 (Thread 4242)",
			HeapBytes: snap.HeapBytes, HeapExtraBytes: snap.HeapExtraBytes})
	}
	first, last := loadSnapshot(t, "growth/hit-1.ms"), loadSnapshot(t, "growth/hit-7.ms")
	r.Growth = []Growth{{Breakpoint: "request", FromSeq: 1, ToSeq: 7, Root: GrowthFlame(DiffTree(first.Tree, last.Tree), Options{})}}
	return r
}

func TestRenderReportHTMLGolden(t *testing.T) {
	var b bytes.Buffer
	opts := HTMLOptions{
		Facts:     []Fact{{"Command", "growth 7"}, {"Status", "completed"}},
		Notes:     []string{"3 more diffs in run.json."},
		MaxSites:  5,
		MaxFrames: 4,
	}
	if err := RenderReportHTML(&b, htmlReport(t), opts); err != nil {
		t.Fatal(err)
	}
	checkAnalysisGolden(t, "report-growth.html", b.Bytes())
}

// A suspect's history is its bytes at every snapshot of its breakpoint:
// leak_record holds nothing at the first of growth.c's seven hits and 24 bytes more at each next one.
func TestSuspectHistory(t *testing.T) {
	r := growthReport(t)
	if len(r.Suspects) != 1 {
		t.Fatalf("%d suspects, want 1", len(r.Suspects))
	}
	var want []SitePoint
	for i := 1; i <= 7; i++ {
		want = append(want, SitePoint{Seq: i, Bytes: int64(24 * (i - 1))})
	}
	if diff := cmp.Diff(want, r.Suspects[0].History); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
}

// The flame graph of the C++ fixture's growth: every box's grown and freed
// bytes, read from the outermost caller in, with the standard library's
// frames under Scheduler::submit folded into one box per call path.
func TestGrowthFlame(t *testing.T) {
	first, last := loadSnapshot(t, "taskpool/before.ms"), loadSnapshot(t, "taskpool/after.ms")
	root := GrowthFlame(DiffTree(first.Tree, last.Tree), Options{})
	var got []string
	var walk func(n *FlameNode, depth int)
	walk = func(n *FlameNode, depth int) {
		lib := ""
		if n.Library {
			lib = " [library]"
		}
		got = append(got, fmt.Sprintf("%s%s%s +%d -%d", strings.Repeat("  ", depth), n.Name, lib, n.Grown, n.Shrunk))
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	want := []string{
		"all +728 -0",
		"  main +664 -0",
		"    Scheduler::submit +664 -0",
		"      std::unordered_map<…>::emplace<…> +6 library [library] +560 -0",
		"      std::unordered_map<…>::emplace<…> +9 library [library] +104 -0",
		"  main +64 -0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flame graph (-want +got):\n%s", diff)
	}
}

// Names from C++ and from the user never reach the page unescaped.
func TestRenderReportHTMLEscapes(t *testing.T) {
	f := Frame{Function: "std::vector<int>::push_back<script>(int&&)", File: "a&b.cpp", Line: 3}
	r := &Report{Title: "run <b>", Suspects: []Suspect{{Frame: f, Stack: []Frame{f}, Breakpoint: "bp\"x",
		GrowthPerHit: 8, GrowingIntervals: 2, Intervals: 2, TotalGrowth: 16, History: []SitePoint{{1, 0}, {2, 8}, {3, 16}}}}}
	var b bytes.Buffer
	if err := RenderReportHTML(&b, r, HTMLOptions{Facts: []Fact{{"Command", "./x '<a>'"}}}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<b>", "<a>", "a&b", `bp"x`} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("page holds %q unescaped", bad)
		}
	}
}
