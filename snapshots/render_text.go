package snapshots

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
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
	// In a report, stacks counts how often each stack (stackKey) appears
	// in the rows shown; labels numbers those shown more than once, and
	// shown marks those already printed. nil for a single diff.
	stacks map[string]int
	labels map[string]int
	shown  map[string]bool
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

func refString(r *SnapshotRef) string { return Printable(r.File) + "#" + strconv.Itoa(r.Snapshot) }

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
// With blocks in the diff a BLOCKS column gives the change in live blocks.
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
	blocks := anyBlocks(sites)
	head := []string{"DELTA", "BEFORE", "AFTER", "CHANGE"}
	if blocks {
		head = []string{"DELTA", "BLOCKS", "BEFORE", "AFTER", "CHANGE"}
	}
	rows := make([][]string, len(sites))
	for i, s := range sites {
		before, after := beforeAfter(s)
		rows[i] = []string{FormatDelta(s.Delta), before, after, string(s.Change)}
		if blocks {
			b := ""
			if s.SiteBlocks != nil {
				b = formatCount(s.DeltaBlocks)
			}
			rows[i] = []string{rows[i][0], b, before, after, string(s.Change)}
		}
	}
	width, lead := columns(head, rows, indent)
	t.header(indent, head, width)
	for i, s := range sites {
		t.printf("%s%s  %s%s\n", indent, t.delta(alignRight(rows[i][0], width[0]), s.Delta), t.cells(rows[i][1:], width[1:]), t.siteText(s.Frame, s.Stacks, s.Library, s.Stack))
		t.stackOnce(lead, s.Library, s.Stack, opts.MaxFrames)
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

// columns returns the width of each column (the last is left-aligned
// text, the others numbers) and the blank lead that puts a line under the
// SITE column.
func columns(head []string, rows [][]string, indent string) ([]int, string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range rows {
		for j, c := range r {
			width[j] = max(width[j], utf8.RuneCountInString(c))
		}
	}
	n := len(indent)
	for _, w := range width {
		n += w + 2
	}
	return width, strings.Repeat(" ", n)
}

// header writes the column names; the last column is left-aligned.
func (t *textWriter) header(indent string, head []string, width []int) {
	t.printf("%s%s  %sSITE\n", indent, alignRight(head[0], width[0]), t.cells(head[1:], width[1:]))
}

// cells pads row cells to their widths, each followed by two spaces: the
// last left-aligned, the others right-aligned.
func (t *textWriter) cells(row []string, width []int) string {
	var b strings.Builder
	for i, c := range row {
		if i == len(row)-1 {
			b.WriteString(alignLeft(c, width[i]))
		} else {
			b.WriteString(alignRight(c, width[i]))
		}
		b.WriteString("  ")
	}
	return b.String()
}

// siteText is a row's SITE cell: the frame, how many stacks the row adds
// up when more than one, and the label of its stack when the report shows
// that stack more than once.
func (t *textWriter) siteText(f Frame, stacks int, lib, stack []Frame) string {
	s := shortFrame(f)
	if stacks > 1 {
		s += t.style(fmt.Sprintf(" (%d stacks)", stacks), ansiDim)
	}
	if label := t.stackLabel(lib, stack); label != "" {
		s += " " + t.style(label, ansiDim)
	}
	return s
}

// formatCount prints a signed count: "+3", "-1", "0".
func formatCount(n int64) string {
	if n > 0 {
		return "+" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}

// stackKey identifies a site's library frames and stack for printing each
// distinct stack once.
func stackKey(lib, stack []Frame) string {
	var b strings.Builder
	for _, f := range lib {
		b.WriteString(FrameString(f))
		b.WriteByte('\n')
	}
	b.WriteByte('|')
	for _, f := range stack {
		b.WriteString(FrameString(f))
		b.WriteByte('\n')
	}
	return b.String()
}

// stackLabel returns "[sN]" for a stack the report shows more than once
// (see countStacks), "" otherwise.
func (t *textWriter) stackLabel(lib, stack []Frame) string {
	if t.stacks == nil {
		return ""
	}
	k := stackKey(lib, stack)
	if t.stacks[k] < 2 {
		return ""
	}
	n, ok := t.labels[k]
	if !ok {
		n = len(t.labels) + 1
		t.labels[k] = n
	}
	return fmt.Sprintf("[s%d]", n)
}

// stackOnce writes a site's stack the first time the report shows it; a
// stack already shown is named by its label on the site's line instead.
func (t *textWriter) stackOnce(lead string, lib, stack []Frame, maxFrames int) {
	if t.stacks != nil {
		k := stackKey(lib, stack)
		if t.shown[k] {
			return
		}
		t.shown[k] = true
	}
	t.stack(lead, lib, stack, maxFrames)
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

// RenderReportText writes a run's analysis for a terminal, short enough
// to read on one screen for one leak: the suspects first, then per
// breakpoint one line per kind of diff that says how many intervals (or
// calls) there were and in how many no site changed, counted over the
// whole run. A breakpoint with a suspect then shows at most opts.MaxDiffs
// of its diffs in which a site changed (the largest heap changes, in
// order); a run with no suspect shows no table at all. Each distinct
// stack is printed once; a stack shown again is named by its label ([s1]).
func RenderReportText(w io.Writer, r *Report, opts RenderOptions) error {
	if r == nil {
		r = &Report{}
	}
	t := newTextWriter(w, opts.Color)
	names, byName := r.sections()
	shown := r.shownDiffs(names, byName, opts.MaxDiffs)
	t.countStacks(r, shown, opts)
	t.printf("%s\n", t.style("Suspects: sites that grow between hits", ansiBold))
	if len(r.Suspects) == 0 {
		t.printf("  none: no site grew steadily between hits.\n")
	} else {
		t.suspectTable(r.Suspects, opts)
	}
	for _, name := range names {
		counts := r.intervals(name, byName[name])
		if len(counts) == 0 && len(shown[name]) == 0 {
			continue
		}
		t.printf("\n%s\n", t.style("Breakpoint "+sectionLabel(name), ansiBold))
		for _, c := range counts {
			t.printf("  %s\n", intervalLine(c))
		}
		for _, d := range shown[name] {
			t.printf("\n  %s: %s\n", stopTitle("stop", d), heapLine(d))
			t.diffTable(d, opts, "  ")
		}
	}
	return t.done()
}

// shownDiffs picks the diffs a report shows in full: of the breakpoints
// with a suspect, the diffs in which a site changed, at most max of each
// (the largest heap changes, in order; 0: all). The intervals in which no
// site changed are counted, not shown.
func (r *Report) shownDiffs(names []string, byName map[string][]*Diff, max int) map[string][]*Diff {
	suspected := make(map[string]bool)
	for _, s := range r.Suspects {
		suspected[s.Breakpoint] = true
	}
	shown := make(map[string][]*Diff)
	for _, name := range names {
		if !suspected[name] {
			continue
		}
		var changed []*Diff
		for _, d := range byName[name] {
			if len(d.Sites) > 0 {
				changed = append(changed, d)
			}
		}
		shown[name] = largestDiffs(changed, max)
	}
	return shown
}

// intervalLine sums up one breakpoint's diffs of one kind: "33 intervals
// between hits (stops 1 → 34): heap 2.8 MiB → 2.9 MiB (+107 KiB); sites
// changed in 5, none in 28; the largest heap change +1.2 KiB (stops 7 →
// 8)". The counts are the run's, whichever diffs the report shows.
func intervalLine(c IntervalCount) string {
	var b strings.Builder
	switch {
	case c.Kind == "within-call" && c.Diffs == 1:
		fmt.Fprintf(&b, "1 call from hit to return (stops %d → %d): heap %s", c.FromSeq, c.ToSeq, FormatDelta(c.AfterBytes-c.BeforeBytes))
	case c.Kind == "within-call":
		fmt.Fprintf(&b, "%d calls from hit to return (stops %d … %d)", c.Diffs, c.FromSeq, c.ToSeq)
	default:
		b.WriteString(countOf(c.Diffs, "interval between hits", "intervals between hits"))
		fmt.Fprintf(&b, " (stops %d → %d): heap %s → %s (%s)", c.FromSeq, c.ToSeq,
			FormatBytes(c.BeforeBytes), FormatBytes(c.AfterBytes), FormatDelta(c.AfterBytes-c.BeforeBytes))
	}
	changed := c.Diffs - c.Unchanged
	switch {
	case changed == 0 && c.Diffs == 1:
		b.WriteString("; no site changed")
	case changed == 0:
		b.WriteString("; no site changed in any")
	case c.Unchanged == 0 && c.Diffs == 1:
		b.WriteString("; sites changed")
	case c.Unchanged == 0:
		b.WriteString("; sites changed in all")
	default:
		fmt.Fprintf(&b, "; sites changed in %d, none in %d", changed, c.Unchanged)
	}
	if l := c.Largest; l != nil && c.Diffs > 1 {
		fmt.Fprintf(&b, "; the largest heap change %s (stops %d → %d)", FormatDelta(l.DeltaBytes), l.FromSeq, l.ToSeq)
	}
	return b.String()
}

// largestDiffs keeps the n diffs with the largest heap change, in their
// order; n <= 0 keeps all.
func largestDiffs(diffs []*Diff, n int) []*Diff {
	if n <= 0 || len(diffs) <= n {
		return diffs
	}
	idx := make([]int, len(diffs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		return absBytes(diffs[idx[a]].DeltaBytes) > absBytes(diffs[idx[b]].DeltaBytes)
	})
	keep := idx[:n]
	sort.Ints(keep)
	out := make([]*Diff, 0, n)
	for _, i := range keep {
		out = append(out, diffs[i])
	}
	return out
}

// countStacks counts the stacks of the rows the report will show.
func (t *textWriter) countStacks(r *Report, shown map[string][]*Diff, opts RenderOptions) {
	t.stacks, t.labels, t.shown = map[string]int{}, map[string]int{}, map[string]bool{}
	for _, s := range r.Suspects {
		t.stacks[stackKey(s.Library, s.Stack)]++
	}
	for _, diffs := range shown {
		for _, d := range diffs {
			sites, _ := limitSites(d.Sites, opts.MaxSites)
			for _, s := range sites {
				t.stacks[stackKey(s.Library, s.Stack)]++
			}
		}
	}
}

// suspectTable writes the suspects: growth per hit, live blocks per hit
// and bytes per block gained when known, how many intervals grew, the
// total, and the site. A
// stepwise suspect shows "steps" after its count, one seen in a single
// interval "once".
func (t *textWriter) suspectTable(sus []Suspect, opts RenderOptions) {
	blocks := false
	for _, s := range sus {
		blocks = blocks || s.BlocksPerHit != nil
	}
	head := []string{"GROWTH/HIT", "GROWING", "TOTAL", "BREAKPOINT"}
	if blocks {
		head = []string{"GROWTH/HIT", "BLOCKS/HIT", "BYTES/BLOCK", "GROWING", "TOTAL", "BREAKPOINT"}
	}
	rows := make([][]string, len(sus))
	var stepwise, single bool
	for i, s := range sus {
		growing := fmt.Sprintf("%d/%d", s.GrowingIntervals, s.Intervals)
		switch s.Pattern {
		case PatternStepwise:
			growing += " steps"
			stepwise = true
		case PatternSingle:
			growing += " once"
			single = true
		}
		rows[i] = []string{FormatDelta(s.GrowthPerHit), growing, FormatDelta(s.TotalGrowth), s.Breakpoint}
		if blocks {
			b := ""
			if s.BlocksPerHit != nil {
				b = formatBlocks(*s.BlocksPerHit)
			}
			rows[i] = []string{rows[i][0], b, bytesPerBlock(s), growing, rows[i][2], s.Breakpoint}
		}
	}
	width, lead := columns(head, rows, "  ")
	t.header("  ", head, width)
	for i, s := range sus {
		t.printf("  %s  %s%s\n", t.delta(alignRight(rows[i][0], width[0]), s.GrowthPerHit), t.cells(rows[i][1:], width[1:]), t.siteText(s.Frame, s.Stacks, s.Library, s.Stack))
		t.stackOnce(lead, s.Library, s.Stack, opts.MaxFrames)
	}
	if stepwise {
		t.printf("  %s\n", t.style("steps: its bytes never went down and rose in steps, as a container that doubles its buffer does", ansiDim))
	}
	if single {
		t.printf("  %s\n", t.style("once: seen in a single interval (two snapshots); a leak and a warm-up look alike", ansiDim))
	}
}

// bytesPerBlock prints a suspect's bytes per block gained, "" when
// unknown.
func bytesPerBlock(s Suspect) string {
	if s.BytesPerBlock == nil {
		return ""
	}
	return FormatBytes(*s.BytesPerBlock)
}

// formatBlocks prints blocks per hit: "+1", "+0.5", "0".
func formatBlocks(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if v > 0 {
		return "+" + s
	}
	return s
}
