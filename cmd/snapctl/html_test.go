package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// report.html of a real run opens in a real browser: headless Chromium
// loads it with no console message at all (the page has no script, and
// any request it made would be refused by its Content-Security-Policy and
// logged), and the page it built names the suspect, marks every stop with
// its hit and thread, and draws the growth from the first hit to the last
// with exact bytes and file:line in its boxes; the suspect's stack is
// open and its bytes per block given.
func TestReportHTMLInBrowser(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.Chromium(t)
	src := fixtures + "leak.c"
	bin := testenv.Build(t, src)
	const n = 5
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
	checkCompleted(t, res)

	dom, console := testenv.LoadPage(t, filepath.Join(res.Out, "report.html"))
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	line := testenv.LineOf(t, src, "the leak: 24")
	suspects := between(dom, `<table class="suspects">`, `</table>`)
	for _, want := range []string{
		fmt.Sprintf("<code>handle_request</code> leak.c:%d", line),
		"+24 B", fmt.Sprintf("%d/%d", n-1, n-1), fmt.Sprintf("+%d B", 24*(n-1)),
		// One 24-byte block per hit.
		`<th class="num">Blocks/hit</th>`, `<td class="num">+1</td>`, `<td class="num">24 B</td>`,
		// The suspect's stack is open.
		`<details open="" id="s1">`,
		fmt.Sprintf("site %d B</title>", 24*(n-1)),
	} {
		if !strings.Contains(suspects, want) {
			t.Errorf("the suspects' table lacks %q:\n%s", want, suspects)
		}
	}
	for k := 1; k <= n; k++ {
		want := fmt.Sprintf("stop %d · hit %d · thread 1 (", k, k)
		if !strings.Contains(dom, want) || !strings.Contains(dom, fmt.Sprintf("heap %d B</title>", 24*(k-1))) {
			t.Errorf("no mark %q with heap %d B", want, 24*(k-1))
		}
	}
	flame := between(dom, `<svg class="flame"`, `</svg>`)
	for _, want := range []string{
		fmt.Sprintf("handle_request (leak.c:%d)\n+%d B (grown %d B, freed 0 B)", line, 24*(n-1), 24*(n-1)),
		fmt.Sprintf(">handle_request leak.c:%d</text>", line),
	} {
		if !strings.Contains(flame, want) {
			t.Errorf("the growth graph lacks %q:\n%s", want, flame)
		}
	}
}

// between returns the part of s from the first from to the next to, or "".
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j+len(to)]
}

// report.html of a native run: the verdict leads the page, each breakpoint
// draws resident memory and the heap in use and free over its stops, with
// the exact in-use figures in the marks, and there is no suspects section
// (per-site diffs are massif's).
func TestNativeReportHTMLInBrowser(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.Chromium(t)
	bin := testenv.Build(t, "../../driver/testdata/native/leak.c")
	plan := "backend: native\nbreakpoints:\n  - name: round\n    location: round_done\n"
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"100"}}, exitOK)
	dom, console := testenv.LoadPage(t, filepath.Join(res.Out, "report.html"))
	if len(console) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(console, "\n"))
	}
	for _, want := range []string{"leak at breakpoint round", "Memory over the stops", "rerun with --backend massif"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The verdict leads the page, above the facts, drawn as a finding,
	// not as a row of the facts.
	lead, facts := strings.Index(dom, `<p class="verdict">verdict: leak at breakpoint round`), strings.Index(dom, `<dl class="facts">`)
	if lead < 0 || facts < 0 || lead > facts || strings.Contains(dom, "<dt>Verdict</dt>") {
		t.Errorf("the verdict does not lead the page (at %d, facts at %d)", lead, facts)
	}
	// The heap in use and resident memory each have a panel and an axis
	// of their own, so that the leak's +10.9 KiB a round shows beside
	// megabytes; the heap's panel names its growth.
	inUse := between(dom, "<h4>Heap in use: ", "</svg>")
	if !strings.Contains(inUse, "(<strong>+54.7 KiB</strong>)") || !strings.Contains(inUse, "<svg") {
		t.Errorf("no panel of the heap in use with its growth:\n%s", inUse)
	}
	if rss := between(dom, "<h4>Resident memory: ", "</svg>"); !strings.Contains(rss, "<svg") {
		t.Errorf("no panel of resident memory")
	}
	// No around_call: the legend speaks of no call returning.
	if strings.Contains(dom, "after the call returned") {
		t.Error("the legend speaks of the call's return without around_call")
	}
	// Every y label fits left of its axis: its right end at x, about 7
	// pixels a character.
	labels := regexp.MustCompile(`<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end">([^<]*)</text>`)
	for _, l := range labels.FindAllStringSubmatch(between(dom, "Memory over the stops", "Each panel"), -1) {
		x, _ := strconv.ParseFloat(l[1], 64)
		if l[2] != "" && !strings.HasPrefix(l[2], "stop ") && x < float64(len([]rune(l[2])))*7 {
			t.Errorf("y label %q ends at x=%v: clipped", l[2], x)
		}
	}
	if strings.Contains(dom, `id="suspects"`) {
		t.Error("a native run's page has a suspects section")
	}
	// It promises no diffs it does not show, calls the stops
	// measurements and says how many arenas they saw.
	for _, want := range []string{"round_done: 6 hits, 6 measurements; leak; 1 arena", "run.json's diffs hold the 5 changes between consecutive measurements"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, unwanted := range []string{"largest heap changes", "snapshots"} {
		if strings.Contains(dom, unwanted) {
			t.Errorf("the page says %q", unwanted)
		}
	}
	// Each mark carries the stop's exact in-use figure, and each round
	// keeps 100 chunks of 112 bytes.
	data, err := os.ReadFile(filepath.Join(res.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Stops []struct {
			Memory struct {
				InUse int64 `json:"heap_in_use_bytes"`
			} `json:"memory"`
		} `json:"stops"`
	}
	if err := json.Unmarshal(data, &run); err != nil {
		t.Fatal(err)
	}
	for i, st := range run.Stops {
		if want := "in use " + snapshots.FormatBytes(st.Memory.InUse); !strings.Contains(dom, want) {
			t.Errorf("stop %d: no mark says %q", i+1, want)
		}
		if i > 0 {
			if d := st.Memory.InUse - run.Stops[i-1].Memory.InUse; d != 100*112 {
				t.Errorf("stop %d: in-use heap grew %d bytes, want %d", i+1, d, 100*112)
			}
		}
	}
}

// report.html and report.md of a --sites run whose recording gave
// nothing: heaptrack's interpreter exits at once, so no stop has a
// per-site snapshot and the run exits 1. The page still leads with the verdict drawn from glibc's
// figures, which says there are no call sites; the suspects section says
// why there are no per-site figures, never "No leak found", and nothing
// on the page sends the user to suspects that do not exist.
func TestNativeReportHTMLSitesRecordedNothing(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	dir := fakeHeaptrack(t, "echo 'heaptrack_interpret: cannot start' >&2; exit 127")
	bin := testenv.Build(t, "../../driver/testdata/native/keep200.c")
	plan := "backend: native\nbreakpoints:\n  - name: request\n    location: request_done\n"
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"12"}, Flags: []string{"--sites", "--heaptrack", dir}}, exitFailure)
	data, err := os.ReadFile(filepath.Join(res.Out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	lead := strings.Index(page, `<p class="verdict">verdict: leak at breakpoint request: in-use heap grew +2.2 KiB over 11 hits (12 stops), +208 B per hit`)
	none := strings.Index(page, "no call sites: none of its 12 stops has a per-site snapshot (")
	facts := strings.Index(page, `<dl class="facts">`)
	if lead < 0 || none < lead || facts < none {
		t.Errorf("the verdict that says there are no call sites does not lead the page (at %d and %d, facts at %d):\n%s", lead, none, facts, page)
	}
	const why = `<h2 id="suspects">Suspects</h2>
<p class="verdict plain">No per-site figures: heaptrack&#39;s recording took no two per-site snapshots of a breakpoint to compare (12 stops took none; see run.json&#39;s events).</p>`
	if !strings.Contains(page, why) {
		t.Errorf("the suspects section does not say why it has no figures (want %q):\n%s", why, page)
	}
	for _, unwanted := range []string{"No leak found", "suspects below", `class="suspects"`, "grew steadily"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the page says %q:\n%s", unwanted, page)
		}
	}
	// report.md says the same, not "No site grew steadily".
	md, err := os.ReadFile(filepath.Join(res.Out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	const mdWhy = "## Suspects\n\nNo per-site figures: heaptrack's recording took no two per-site snapshots of a breakpoint to compare (12 stops took none; see run.json's events).\n"
	if !strings.Contains(string(md), mdWhy) || strings.Contains(string(md), "No site grew") || strings.Contains(string(md), "suspects below") {
		t.Errorf("report.md does not say why it has no per-site figures (want %q):\n%s", mdWhy, md)
	}
}
