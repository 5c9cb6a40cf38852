package snapshots

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func suspectAt(bp, fn, file string, line int, growth int64) Suspect {
	f := Frame{Function: fn, File: file, Line: line}
	return Suspect{Frame: f, Stack: []Frame{f}, Breakpoint: bp, GrowthPerHit: growth, GrowingIntervals: 4, Intervals: 4, TotalGrowth: 4 * growth}
}

// compareRuns is a fix seen from both sides: one leak fixed, one that
// persists at the same line, one whose function moved by three lines, a
// new one, a function whose number of suspect lines changed, a breakpoint
// only the before plan has and one that the after run reached too rarely.
func compareRuns() (CompareRun, CompareRun) {
	before := CompareRun{Dir: "runs/before",
		Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}, {Name: "flush", Location: "flush_cache", Snapshots: 6}, {Name: "tick", Location: "tick", Snapshots: 5}, {Name: "old", Location: "old_path", Snapshots: 5}},
		Suspects: []Suspect{
			suspectAt("request", "cache_put", "server.c", 71, 48),
			suspectAt("request", "handle_request", "server.c", 105, 24),
			suspectAt("request", "session_open", "server.c", 40, 16),
			suspectAt("request", "parse", "parse.c", 10, 8),
			suspectAt("request", "parse", "parse.c", 12, 8),
			suspectAt("tick", "stats_report", "stats.c", 9, 32),
			suspectAt("old", "legacy", "old.c", 3, 8),
		}}
	after := CompareRun{Dir: "runs/after",
		Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}, {Name: "flush", Location: "flush_cache", Snapshots: 6}, {Name: "tick", Location: "tick", Snapshots: 1}},
		Suspects: []Suspect{
			suspectAt("request", "cache_put", "server.c", 74, 48),
			suspectAt("request", "handle_request", "server.c", 105, 12),
			suspectAt("request", "parse", "parse.c", 20, 8),
			suspectAt("flush", "flush_cache", "server.c", 120, 64),
		}}
	return before, after
}

func TestCompare(t *testing.T) {
	c := Compare(compareRuns())
	type row struct {
		Status, Site, Before  string
		BeforeGrow, AfterGrow string
	}
	var got []row
	for _, s := range c.Suspects {
		r := row{Status: s.Status, Site: FrameString(s.Frame), BeforeGrow: growthCell(s.BeforeGrowthPerHit), AfterGrow: growthCell(s.AfterGrowthPerHit)}
		if s.BeforeFrame != nil {
			r.Before = FrameString(*s.BeforeFrame)
		}
		got = append(got, r)
	}
	want := []row{
		{"persists", "cache_put (server.c:74)", "cache_put (server.c:71)", "+48 B", "+48 B"},
		{"persists", "handle_request (server.c:105)", "", "+24 B", "+12 B"},
		{"new", "flush_cache (server.c:120)", "", "-", "+64 B"},
		{"new", "parse (parse.c:20)", "", "-", "+8 B"},
		{"gone", "session_open (server.c:40)", "", "+16 B", "-"},
		{"gone", "parse (parse.c:10)", "", "+8 B", "-"},
		{"gone", "parse (parse.c:12)", "", "+8 B", "-"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
	var notCompared []string
	for _, s := range c.NotCompared {
		notCompared = append(notCompared, FrameString(s.Frame)+": "+s.Reason)
		if !s.Unjudged {
			t.Errorf("%s at %s: unjudged = %v", FrameString(s.Frame), s.Breakpoint, s.Unjudged)
		}
	}
	if diff := cmp.Diff([]string{"stats_report (stats.c:9): too few snapshots to find suspects", "legacy (old.c:3): breakpoint in one plan only"}, notCompared); diff != "" {
		t.Errorf("not compared (-want +got):\n%s", diff)
	}
	// legacy's breakpoint is gone from the after plan: it was not
	// compared, which keeps the comparison from passing too.
	if got := c.Unfixed(); got != 6 {
		t.Errorf("Unfixed() = %d, want 6 (2 persist, 2 new, 2 not compared)", got)
	}
}

func TestCompareFixed(t *testing.T) {
	before := CompareRun{Dir: "a", Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}},
		Suspects: []Suspect{suspectAt("request", "handle_request", "leak.c", 20, 24)}}
	after := CompareRun{Dir: "b", Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}}}
	c := Compare(before, after)
	if c.Unfixed() != 0 || len(c.Suspects) != 1 || c.Suspects[0].Status != StatusGone {
		t.Errorf("comparison %+v, want the one suspect gone", c)
	}
	if v := compareVerdict(c); v != "Fixed: 1 suspect gone, none new." {
		t.Errorf("verdict %q", v)
	}
}

func TestRenderComparisonGolden(t *testing.T) {
	c := Compare(compareRuns())
	for f, ext := range map[Format]string{FormatText: "txt", FormatMarkdown: "md", FormatJSON: "json"} {
		var b bytes.Buffer
		if err := RenderComparison(&b, c, f); err != nil {
			t.Fatal(err)
		}
		checkAnalysisGolden(t, "compare."+ext, b.Bytes())
	}
}
