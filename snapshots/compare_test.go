package snapshots

import (
	"bytes"
	"fmt"
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
	before := CompareRun{Dir: "runs/before", Backend: "massif",
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
	after := CompareRun{Dir: "runs/after", Backend: "massif",
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
	before := CompareRun{Dir: "a", Backend: "massif", Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}},
		Suspects: []Suspect{suspectAt("request", "handle_request", "leak.c", 20, 24)}}
	after := CompareRun{Dir: "b", Backend: "massif", Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}}}
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

// nativeRun is a native run of one breakpoint, "request", with six stops,
// its verdict and findings (none when flat), and per-site suspects when
// sites is true.
func nativeRun(dir string, sites bool, verdict string, perHit int64, suspects ...Suspect) CompareRun {
	b := CompareBreakpoint{Name: "request", Location: "handle_request", Snapshots: 6, Verdict: verdict, InUsePerHit: &perHit}
	if verdict != "flat" {
		b.Findings = []string{verdict}
	}
	return CompareRun{Dir: dir, Backend: "native", Verdicts: true, Sites: sites, Breakpoints: []CompareBreakpoint{b}, Suspects: suspects}
}

// massifRun is a massif run of the same breakpoint with its suspects.
func massifRun(dir string, suspects ...Suspect) CompareRun {
	return CompareRun{Dir: dir, Backend: "massif",
		Breakpoints: []CompareBreakpoint{{Name: "request", Location: "handle_request", Snapshots: 6}}, Suspects: suspects}
}

// comparedRow is what the tests of runs with call sites check of a
// comparison: each suspect and finding with its status, the notes, the
// count that decides the exit status and the verdict line.
type comparedRow struct {
	Suspects, Findings, Notes []string
	Unfixed                   int
	Verdict                   string
}

func comparedRows(c *Comparison) comparedRow {
	r := comparedRow{Unfixed: c.Unfixed(), Verdict: compareVerdict(c)}
	if len(c.Notes) > 0 {
		r.Notes = c.Notes
	}
	for _, s := range c.Suspects {
		r.Suspects = append(r.Suspects, fmt.Sprintf("%s %s %s→%s", s.Status, FrameString(s.Frame), growthCell(s.BeforeGrowthPerHit), growthCell(s.AfterGrowthPerHit)))
	}
	for _, f := range c.Findings {
		r.Findings = append(r.Findings, fmt.Sprintf("%s %s: %s → %s %s", f.Status, f.Finding, f.Before, f.After, f.Reason))
	}
	return r
}

// A native run recorded with --sites has suspects drawn from the same
// model as massif's, so against a massif run its call sites are compared:
// a leak that persists keeps the comparison from passing (exit 10), one
// gone on either side shows the fix. Neither compares findings: only the
// native side has verdicts.
func TestCompareSitesAcrossBackends(t *testing.T) {
	leak := suspectAt("request", "remember", "fixcheck.c", 18, 24)
	for _, tc := range []struct {
		name          string
		before, after CompareRun
		want          comparedRow
	}{{
		name:   "massif then native sites, leak persists",
		before: massifRun("m", leak),
		after:  nativeRun("n", true, "leak", 24, leak),
		want: comparedRow{
			Suspects: []string{"persists remember (fixcheck.c:18) +24 B→+24 B"},
			Notes:    []string{"RUN_A was measured with massif and RUN_B with native --sites, both with call sites: their suspects are compared as between massif runs; verdicts exist only for RUN_B (native), so no finding is compared"},
			Unfixed:  1, Verdict: "Not fixed: 1 suspect persists.",
		},
	}, {
		name:   "massif then native sites, fixed",
		before: massifRun("m", leak),
		after:  nativeRun("n", true, "flat", 0),
		want: comparedRow{
			Suspects: []string{"gone remember (fixcheck.c:18) +24 B→-"},
			Notes:    []string{"RUN_A was measured with massif and RUN_B with native --sites, both with call sites: their suspects are compared as between massif runs; verdicts exist only for RUN_B (native), so no finding is compared"},
			Verdict:  "Fixed: 1 suspect gone, none new.",
		},
	}, {
		name:   "native sites then massif, fixed",
		before: nativeRun("n", true, "leak", 24, leak),
		after:  massifRun("m"),
		want: comparedRow{
			Suspects: []string{"gone remember (fixcheck.c:18) +24 B→-"},
			Notes:    []string{"RUN_A was measured with native --sites and RUN_B with massif, both with call sites: their suspects are compared as between massif runs; verdicts exist only for RUN_A (native), so no finding is compared"},
			Verdict:  "Fixed: 1 suspect gone, none new.",
		},
	}, {
		// memcheck's suspects are massif's; neither run has verdicts.
		name:   "memcheck then massif, fixed",
		before: CompareRun{Dir: "c", Backend: "memcheck", Breakpoints: massifRun("c").Breakpoints, Suspects: []Suspect{leak}},
		after:  massifRun("m"),
		want: comparedRow{
			Suspects: []string{"gone remember (fixcheck.c:18) +24 B→-"},
			Notes:    []string{"RUN_A was measured with memcheck and RUN_B with massif, both with call sites: their suspects are compared as between massif runs"},
			Verdict:  "Fixed: 1 suspect gone, none new.",
		},
	}, {
		// Without call sites on the native side nothing changes: the
		// leak massif found is unjudged, never gone.
		name:   "massif then native without sites",
		before: massifRun("m", leak),
		after:  nativeRun("n", false, "flat", 0),
		want: comparedRow{
			Findings: []string{"unjudged leak: 1 suspect → flat RUN_B (native) does not show it, but a fix is shown only between runs of one backend: run RUN_B with --backend massif"},
			Notes:    []string{"RUN_A was measured with massif and RUN_B with native: they are compared by what grew at each breakpoint; call sites are compared only when both runs have them (massif, or native with --sites), and otherwise a fix is shown only between runs of one backend"},
			Unfixed:  1, Verdict: "Not fixed: 1 finding could not be judged.",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, comparedRows(Compare(tc.before, tc.after))); diff != "" {
				t.Errorf("comparison (-want +got):\n%s", diff)
			}
		})
	}
}

// Two native runs with call sites are compared by both their suspects and
// their findings, and show a fix only when both do: a site that persists
// fails the comparison even when the whole heap no longer grows. Against
// a native run without call sites only the findings are compared.
func TestCompareNativeSites(t *testing.T) {
	leak := suspectAt("request", "remember", "fixcheck.c", 18, 24)
	for _, tc := range []struct {
		name          string
		before, after CompareRun
		want          comparedRow
	}{{
		name:   "site persists, finding gone",
		before: nativeRun("a", true, "leak", 24, leak),
		after:  nativeRun("b", true, "flat", 0, leak),
		want: comparedRow{
			Suspects: []string{"persists remember (fixcheck.c:18) +24 B→+24 B"},
			Findings: []string{"gone leak: leak (+24 B per hit) → flat "},
			Unfixed:  1, Verdict: "Not fixed: 1 suspect persists.",
		},
	}, {
		name:   "site and finding gone",
		before: nativeRun("a", true, "leak", 24, leak),
		after:  nativeRun("b", true, "flat", 0),
		want: comparedRow{
			Suspects: []string{"gone remember (fixcheck.c:18) +24 B→-"},
			Findings: []string{"gone leak: leak (+24 B per hit) → flat "},
			Verdict:  "Fixed: 1 suspect and 1 finding gone, none new.",
		},
	}, {
		name:   "sites then none, findings only",
		before: nativeRun("a", true, "leak", 24, leak),
		after:  nativeRun("b", false, "flat", 0),
		want: comparedRow{
			Findings: []string{"gone leak: leak (+24 B per hit) → flat "},
			Notes:    []string{"RUN_A has call sites (native --sites) and RUN_B does not: they are compared by their verdicts; call sites are compared only when both runs have them"},
			Verdict:  "Fixed: 1 finding gone, none new.",
		},
	}, {
		name:   "none then sites, findings only",
		before: nativeRun("a", false, "leak", 24),
		after:  nativeRun("b", true, "leak", 24, leak),
		want: comparedRow{
			Findings: []string{"persists leak: leak (+24 B per hit) → leak (+24 B per hit) "},
			Notes:    []string{"RUN_B has call sites (native --sites) and RUN_A does not: they are compared by their verdicts; call sites are compared only when both runs have them"},
			Unfixed:  1, Verdict: "Not fixed: 1 finding persists.",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, comparedRows(Compare(tc.before, tc.after))); diff != "" {
				t.Errorf("comparison (-want +got):\n%s", diff)
			}
		})
	}
}

// Two native runs with call sites show both tables, in every format.
func TestRenderComparisonNativeSitesGolden(t *testing.T) {
	before := nativeRun("runs/before", true, "leak", 64,
		suspectAt("request", "remember", "fixcheck.c", 18, 24), suspectAt("request", "audit", "fixcheck.c", 30, 40))
	after := nativeRun("runs/after", true, "flat", 0, suspectAt("request", "audit", "fixcheck.c", 34, 40))
	c := Compare(before, after)
	for f, ext := range map[Format]string{FormatText: "txt", FormatMarkdown: "md", FormatJSON: "json"} {
		var b bytes.Buffer
		if err := RenderComparison(&b, c, f); err != nil {
			t.Fatal(err)
		}
		checkAnalysisGolden(t, "compare_native_sites."+ext, b.Bytes())
	}
}
