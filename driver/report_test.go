package driver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// A real run with more hits than the report shows: run.json keeps every
// stop and diff, the terminal report the bound and a "more" line.
func TestRunReportBounded(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	const hits = 15
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n", bin, strconv.Itoa(hits))
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if len(m.Stops) != hits || len(m.Diffs) != hits-1 || res.Stops != hits || res.Diffs != hits-1 {
		t.Fatalf("run.json holds %d stops, %d diffs (Result: %d, %d); want %d, %d", len(m.Stops), len(m.Diffs), res.Stops, res.Diffs, hits, hits-1)
	}
	for i, s := range m.Stops {
		if s.Seq != i+1 || s.HeapBytes != int64(8*hits+16*i) {
			t.Errorf("stop %d: seq %d, heap %d B; want %d, %d", i, s.Seq, s.HeapBytes, i+1, 8*hits+16*i)
		}
	}
	var out bytes.Buffer
	if err := WriteText(&out, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	// Every diff is +16 B: the first ten are shown.
	sections := regexp.MustCompile(`(?m)^  stop (\d+) → \d+ `).FindAllStringSubmatch(out.String(), -1)
	if len(sections) != sites.ShownDiffs || sections[0][1] != "1" || sections[sites.ShownDiffs-1][1] != "10" {
		t.Errorf("text report shows %d diffs, want stops 1..10:\n%s", len(sections), out.String())
	}
	if !strings.Contains(out.String(), "\nShown: 10 of the 14 diffs in which a site changed; report.md has up to 10 of each breakpoint and kind, run.json all.\n") {
		t.Errorf("no \"Shown: 10 of the 14\" line:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "\n  14 intervals between hits (stops 1 → 15): heap 120 B → 344 B (+224 B); sites changed in all; the largest heap change +16 B (stops 1 → 2)\n") {
		t.Errorf("no count of the 14 intervals:\n%s", out.String())
	}
}

// A real C++ service with four worker threads that start and exit every
// round, and no leak: the terminal report is a few lines that say what
// was measured and that nothing grew, counting the intervals in which
// no site changed; report.md shows the two diffs in which the cache
// changed and prints its stack once.
func TestRunNoSuspectShortReport(t *testing.T) {
	t.Parallel()
	const src = "testdata/service.cpp"
	bin := testenv.Build(t, src)
	res, err := runPlan(t, "breakpoints:\n  - name: round\n    location: round_done\n", bin, "12")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if len(m.Stops) != 12 || len(m.Suspects) != 0 {
		t.Fatalf("%d stops, suspects %+v; want 12 stops and no suspect", len(m.Stops), m.Suspects)
	}
	first, last := m.Stops[0].HeapBytes, m.Stops[11].HeapBytes
	if first != last {
		t.Errorf("heap %d B at the first round, %d B at the last; want the same", first, last)
	}
	var out bytes.Buffer
	if err := WriteText(&out, res, snapshots.RenderOptions{MaxSites: 10, MaxFrames: 12, MaxDiffs: 3}); err != nil {
		t.Fatal(err)
	}
	// Four cache entries of 100 characters leave at round 5 and come
	// back at round 9: 4 × (101 + 32) bytes.
	want := "verdict: no leak found: no site grew between hits\n" +
		"snapctl run: " + bin + " 12\n" +
		"status: completed (target exit code 0)\n" +
		"breakpoint round (round_done): 12 hits, 12 snapshots\n" +
		"run directory: " + res.Dir + "\n" +
		"\n" +
		"Suspects: sites that grow between hits\n" +
		"  none: no site grew steadily between hits.\n" +
		"\n" +
		"Breakpoint round\n" +
		"  11 intervals between hits (stops 1 → 12): heap " + snapshots.FormatBytes(first) + " → " + snapshots.FormatBytes(last) +
		" (0 B); sites changed in 2, none in 9; the largest heap change -532 B (stops 4 → 5)\n" +
		"\n" +
		"Shown: none of the 2 diffs in which a site changed; report.md has up to 10 of each breakpoint and kind, run.json all.\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("text report (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	md := string(data)
	line := testenv.LineOf(t, src, "cache entry")
	for what, n := range map[string]int{
		"#### Stop 4 → 5 (between hits)": 1,
		"#### Stop 8 → 9 (between hits)": 1,
		"#### Stop":                      2,
		fmt.Sprintf("→  resize_cache(unsigned long) (service.cpp:%d)", line): 1,
		"| -532 B | -8 |":               1,
		"| +532 B | +8 |":               1,
		"[s1](#s1)":                     2,
		"no site changed":               0,
		"sites changed in 2, none in 9": 1,
	} {
		if got := strings.Count(md, what); got != n {
			t.Errorf("report.md has %q %d times, want %d:\n%s", what, got, n, md)
		}
	}
}

// A 2.1 KiB leak beside 1.5 MiB that the program freed between its
// first and its last snapshot: report.html's graph of the bytes grown
// holds the leak alone, as wide as the page and labelled with its
// file:line, and the freed cache has a graph of its own.
func TestRunHTMLGrowthBesideChurn(t *testing.T) {
	t.Parallel()
	const src = "testdata/churn.c"
	bin := testenv.Build(t, src)
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n", bin, "8")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(res.Dir, htmlFile))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	// The first stop is taken before the first request's 300 bytes, the
	// last before the eighth's: seven leaks of 300 bytes.
	grown, freed, ok := strings.Cut(page, "<details><summary>Freed: 1.5 MiB</summary>")
	if !ok || !strings.Contains(grown, "<p>Heap -1.5 MiB: 2.1 KiB grown, 1.5 MiB freed.</p>\n<h4>Grown: 2.1 KiB</h4>") {
		t.Fatalf("no graphs of 2.1 KiB grown and 1.5 MiB freed:\n%s", page)
	}
	grown = grown[strings.Index(grown, "<h4>Grown"):]
	keep, fill := testenv.LineOf(t, src, "the leak"), testenv.LineOf(t, src, "the churn")
	for _, want := range []string{
		fmt.Sprintf(`width="960.0" height="17"/><text x="3.0" y="%d">keep churn.c:%d</text>`, 18*3+13, keep),
		fmt.Sprintf("keep (churn.c:%d)\n+2.1 KiB (grown 2.1 KiB, freed 0 B)", keep),
	} {
		if !strings.Contains(grown, want) {
			t.Errorf("the graph of the bytes grown lacks %q:\n%s", want, grown)
		}
	}
	if strings.Contains(grown, "fill_cache") {
		t.Errorf("the freed cache is in the graph of the bytes grown:\n%s", grown)
	}
	if !strings.Contains(freed, fmt.Sprintf(`width="960.0" height="17"/><text x="3.0" y="%d">fill_cache churn.c:%d</text>`, 18*2+13, fill)) {
		t.Errorf("the graph of the bytes freed lacks the cache:\n%s", freed)
	}
}
