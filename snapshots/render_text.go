package snapshots

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ANSI styles of the text renderer.
const (
	ansiReset = "\x1b[0m"
	ansiBold  = "\x1b[1m"
	ansiDim   = "\x1b[2m"
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
)

// textWriter collects the output of the text renderers; the first write
// error sticks and is returned by done.
type textWriter struct {
	w     *bufio.Writer
	color bool
}

func newTextWriter(w io.Writer, color bool) *textWriter {
	return &textWriter{w: bufio.NewWriter(w), color: color}
}

func (t *textWriter) style(s, code string) string {
	if !t.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

// delta colours growth red and shrinkage green.
func (t *textWriter) delta(s string, n int64) string {
	switch {
	case n > 0:
		return t.style(s, ansiRed)
	case n < 0:
		return t.style(s, ansiGreen)
	}
	return s
}

func (t *textWriter) printf(format string, args ...any) { fmt.Fprintf(t.w, format, args...) }

func (t *textWriter) done() error { return t.w.Flush() }

// alignRight and alignLeft pad by runes, since the units and arrows are not
// ASCII.
func alignRight(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return strings.Repeat(" ", n-k) + s
	}
	return s
}

func alignLeft(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// RenderDiffText writes d for a terminal: a heading with the heap totals,
// then one row per site, largest change first, each followed by its
// library frames folded into one line and its callers.
func RenderDiffText(w io.Writer, d *Diff, opts RenderOptions) error {
	if d == nil {
		return errors.New("rendering diff: no diff")
	}
	t := newTextWriter(w, opts.Color)
	if title := diffTitle(d); title != "" {
		t.printf("%s\n", t.style(title, ansiBold))
	}
	t.printf("%s\n\n", heapLine(d))
	t.diffTable(d, opts, "")
	return t.done()
}

// diffTitle names the two sides of a diff.
func diffTitle(d *Diff) string {
	switch {
	case d.From != nil && d.To != nil:
		return refString(d.From) + " → " + refString(d.To)
	case d.Breakpoint != "" || d.FromSeq != 0:
		s := stopTitle("stop", d)
		if d.Breakpoint != "" {
			s = d.Breakpoint + ": " + s
		}
		return s
	}
	return ""
}

func refString(r *SnapshotRef) string { return r.File + "#" + strconv.Itoa(r.Snapshot) }

func heapLine(d *Diff) string {
	s := fmt.Sprintf("heap %s → %s (%s): sites %s", FormatBytes(d.BeforeBytes), FormatBytes(d.AfterBytes),
		FormatDelta(d.DeltaBytes), FormatDelta(d.SitesDeltaBytes))
	if d.BelowThresholdDeltaBytes != 0 {
		s += ", below threshold " + FormatDelta(d.BelowThresholdDeltaBytes)
	}
	if d.FilteredDeltaBytes != 0 {
		s += ", filtered out " + FormatDelta(d.FilteredDeltaBytes)
	}
	return s
}

// diffTable writes the rows of one diff, each line prefixed by indent.
func (t *textWriter) diffTable(d *Diff, opts RenderOptions, indent string) {
	sites, more := limitSites(d.Sites, opts.MaxSites)
	if len(sites) == 0 {
		t.printf("%sno site changed", indent)
		if d.UnchangedSites > 0 {
			t.printf(" (%s unchanged)", countOf(d.UnchangedSites, "site", "sites"))
		}
		t.printf(".\n")
		return
	}
	head := []string{"DELTA", "BEFORE", "AFTER", "CHANGE"}
	rows := make([][4]string, len(sites))
	width := [4]int{}
	for i, h := range head {
		width[i] = utf8.RuneCountInString(h)
	}
	for i, s := range sites {
		rows[i] = [4]string{FormatDelta(s.Delta), FormatBytes(s.Before), FormatBytes(s.After), string(s.Change)}
		switch s.Change {
		case ChangeHidden:
			rows[i][2] = "?"
		case ChangeRevealed:
			rows[i][1] = "?"
		}
		for j, c := range rows[i] {
			width[j] = max(width[j], utf8.RuneCountInString(c))
		}
	}
	lead := indent + strings.Repeat(" ", width[0]+width[1]+width[2]+width[3]+8)
	t.printf("%s%s  %s  %s  %s  %s\n", indent, alignRight(head[0], width[0]), alignRight(head[1], width[1]),
		alignRight(head[2], width[2]), alignLeft(head[3], width[3]), "SITE")
	for i, s := range sites {
		r := rows[i]
		t.printf("%s%s  %s  %s  %s  %s\n", indent, t.delta(alignRight(r[0], width[0]), s.Delta),
			alignRight(r[1], width[1]), alignRight(r[2], width[2]), alignLeft(r[3], width[3]), shortFrame(s.Frame))
		t.stack(lead, s.Library, s.Stack, opts.MaxFrames)
	}
	if more > 0 {
		t.printf("%s… %s more\n", indent, countOf(more, "site", "sites"))
	}
	if d.UnchangedSites > 0 {
		t.printf("%s%s unchanged\n", indent, countOf(d.UnchangedSites, "site", "sites"))
	}
	for _, n := range changeNote(sites) {
		t.printf("%s%s\n", indent, t.style(n, ansiDim))
	}
}

// stack writes the lines under a site: its library frames on one line
// ("via N library frames: innermost … outermost", names only), then its
// callers.
func (t *textWriter) stack(lead string, lib, stack []Frame, maxFrames int) {
	switch len(lib) {
	case 0:
	case 1:
		t.printf("%s  %s\n", lead, t.style("via "+shortFrame(lib[0]), ansiDim))
	default:
		t.printf("%s  %s\n", lead, t.style(fmt.Sprintf("via %d library frames: %s … %s", len(lib),
			briefName(lib[0].Function), briefName(lib[len(lib)-1].Function)), ansiDim))
	}
	if len(stack) == 0 {
		return
	}
	callers, more := limitFrames(stack[1:], maxFrames)
	for _, f := range callers {
		t.printf("%s  ← %s\n", lead, shortFrame(f))
	}
	if more > 0 {
		t.printf("%s  ← … %s\n", lead, countOf(more, "more caller", "more callers"))
	}
}

// RenderReportText writes a run's analysis for a terminal: the suspects,
// then every diff, grouped by breakpoint.
func RenderReportText(w io.Writer, r *Report, opts RenderOptions) error {
	if r == nil {
		r = &Report{}
	}
	t := newTextWriter(w, opts.Color)
	t.printf("%s\n", t.style("Suspects: sites that grow on most hits", ansiBold))
	if len(r.Suspects) == 0 {
		t.printf("  none: no site grew steadily between hits.\n")
	} else {
		t.suspectTable(r.Suspects, opts)
	}
	names, byName := r.sections()
	for _, name := range names {
		diffs := byName[name]
		if len(diffs) == 0 {
			continue
		}
		label := sectionLabel(name)
		t.printf("\n%s\n", t.style("Breakpoint "+label, ansiBold))
		for _, d := range diffs {
			title := stopTitle("stop", d)
			t.printf("\n  %s: %s\n", title, heapLine(d))
			t.diffTable(d, opts, "  ")
		}
	}
	return t.done()
}

func (t *textWriter) suspectTable(sus []Suspect, opts RenderOptions) {
	head := []string{"GROWTH/HIT", "GROWING", "TOTAL", "BREAKPOINT"}
	rows := make([][4]string, len(sus))
	width := [4]int{}
	for i, h := range head {
		width[i] = utf8.RuneCountInString(h)
	}
	for i, s := range sus {
		rows[i] = [4]string{FormatDelta(s.GrowthPerHit), fmt.Sprintf("%d/%d", s.GrowingIntervals, s.Intervals),
			FormatDelta(s.TotalGrowth), s.Breakpoint}
		for j, c := range rows[i] {
			width[j] = max(width[j], utf8.RuneCountInString(c))
		}
	}
	lead := "  " + strings.Repeat(" ", width[0]+width[1]+width[2]+width[3]+8)
	t.printf("  %s  %s  %s  %s  %s\n", alignRight(head[0], width[0]), alignRight(head[1], width[1]),
		alignRight(head[2], width[2]), alignLeft(head[3], width[3]), "SITE")
	for i, s := range sus {
		r := rows[i]
		t.printf("  %s  %s  %s  %s  %s\n", t.delta(alignRight(r[0], width[0]), s.GrowthPerHit), alignRight(r[1], width[1]),
			alignRight(r[2], width[2]), alignLeft(r[3], width[3]), shortFrame(s.Frame))
		t.stack(lead, s.Library, s.Stack, opts.MaxFrames)
	}
}
