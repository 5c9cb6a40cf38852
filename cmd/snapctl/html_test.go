package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// report.html of a real run opens in a real browser: headless Chromium
// loads it with no console message at all (the page has no script, and
// any request it made would be refused by its Content-Security-Policy and
// logged), and the page it built names the suspect, marks every stop with
// its hit and thread, and draws the growth from the first hit to the last
// with exact bytes.
func TestReportHTMLInBrowser(t *testing.T) {
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
	line := lineOf(t, src, "the leak: 24")
	suspects := between(dom, `<table class="suspects">`, `</table>`)
	for _, want := range []string{
		fmt.Sprintf("<code>handle_request</code> leak.c:%d", line),
		"+24 B", fmt.Sprintf("%d/%d", n-1, n-1), fmt.Sprintf("+%d B", 24*(n-1)),
		// One 24-byte block per hit.
		`<th class="num">Blocks/hit</th>`, `<td class="num">+1</td>`,
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
		">handle_request</text>",
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
