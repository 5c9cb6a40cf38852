package snapshots

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
)

// HTMLOptions tune RenderReportHTML.
type HTMLOptions struct {
	// Facts are shown under the title, one label and value each: the
	// command, the status, the breakpoints.
	Facts []Fact
	// Notes are sentences shown at the end (how many more diffs run.json
	// holds).
	Notes []string
	// MaxSites limits the rows shown per diff; 0 shows all.
	MaxSites int
	// MaxFrames limits the callers shown per stack; 0 shows all.
	MaxFrames int
	// NoSites says the run measured no call sites (the native backend):
	// the page has no suspects section.
	NoSites bool
	// Lead are the lines the page opens with, under its title and before
	// its facts: the verdicts of a run that has its own (the native
	// backend's), each drawn as a verdict.
	Lead []LeadLine
	// SitesUnmeasured, when set, says why the run's sites hold nothing to
	// compare (a --sites run whose recording took no per-site snapshot):
	// the suspects section says so rather than "No leak found".
	SitesUnmeasured string
}

// LeadLine is a line the page opens with. Kind is "leak" (drawn as a
// finding), "clean" (nothing found) or "" (said plainly: how the run
// ended, a verdict that needs more stops).
type LeadLine struct{ Text, Kind string }

// Fact is one line of a report's header.
type Fact struct{ Label, Value string }

// Sizes of the drawings, in CSS pixels.
const (
	chartWidth, chartHeight = 720, 170
	panelHeight             = 110 // a panel of the native figures
	sparkWidth, sparkHeight = 180, 36
	flameWidth, flameRow    = 960, 18
	flameMaxDepth           = 60
	charWidth               = 7.0 // of the 12px monospace labels
	maxChartMarks           = 300 // hoverable marks per chart
	maxSparkMarks           = 60
)

// RenderReportHTML writes a run's analysis as one self-contained HTML
// page: no script, no font, no request of any kind (a Content Security
// Policy forbids them), charts as inline SVG with a tooltip per mark, and
// tables and stacks that read without JavaScript. It shows the verdict,
// the suspects with a chart of each one's bytes over its breakpoint's
// stops and its stack, then per breakpoint the heap over the stops, the
// growth between its first and last snapshot as an icicle flame graph of
// signed changes, and the diffs r holds.
func RenderReportHTML(w io.Writer, r *Report, opts HTMLOptions) error {
	if r == nil {
		r = &Report{}
	}
	h := &htmlWriter{w: bufio.NewWriter(w), opts: opts, stops: make(map[int]StopPoint), stacks: newStackIndex()}
	for _, s := range r.Stops {
		h.stops[s.Seq] = s
	}
	title := r.Title
	if title == "" {
		title = "snapctl report"
	}
	h.printf("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	h.printf("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n")
	h.printf("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")
	h.printf("<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", esc(title), htmlStyle)
	h.printf("<h1>%s</h1>\n", esc(title))
	for _, l := range opts.Lead {
		switch l.Kind {
		case "leak":
			h.printf("<p class=\"verdict\">%s</p>\n", esc(l.Text))
		case "clean":
			h.printf("<p class=\"verdict clean\">%s</p>\n", esc(l.Text))
		default:
			h.printf("<p class=\"verdict plain\">%s</p>\n", esc(l.Text))
		}
	}
	if len(opts.Facts) > 0 {
		h.printf("<dl class=\"facts\">\n")
		for _, f := range opts.Facts {
			h.printf("<dt>%s</dt><dd>%s</dd>\n", esc(f.Label), esc(f.Value))
		}
		h.printf("</dl>\n")
	}
	if !h.opts.NoSites {
		h.suspects(r)
	}
	names, byName := r.sections()
	for _, name := range h.breakpoints(r, names) {
		h.breakpoint(r, name, byName[name])
	}
	for _, n := range opts.Notes {
		h.printf("<p class=\"note\">%s</p>\n", esc(n))
	}
	h.printf("</body>\n</html>\n")
	return h.w.Flush()
}

// htmlStyle is the page's only styling; light and dark schemes follow the
// reader's setting.
const htmlStyle = `
:root{color-scheme:light dark;--fg:#1d1f21;--bg:#fff;--mute:#6a6f75;--line:#d5d8dc;--grow:#d9534f;--shrink:#3a7bd5;--heap:#2f6f9f;--extra:#9a7b2f;--stack:#6b8e23}
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#17191c;--mute:#9aa0a6;--line:#3a3f45}}
body{font:15px/1.45 system-ui,sans-serif;color:var(--fg);background:var(--bg);margin:1.5rem auto;max-width:1000px;padding:0 1rem}
h1{font-size:1.4rem}h2{font-size:1.2rem;margin-top:2.2rem;border-bottom:1px solid var(--line)}h3{font-size:1rem}
code,pre,.mono{font-family:ui-monospace,monospace;font-size:13px}
pre{margin:.3rem 0;white-space:pre-wrap}
table{border-collapse:collapse;margin:.5rem 0}th,td{padding:.2rem .6rem;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.1rem 1rem}dl.facts dt{color:var(--mute)}dl.facts dd{margin:0}
.verdict{font-weight:600;padding:.5rem .8rem;border-left:4px solid var(--grow)}.verdict.clean{border-color:var(--stack)}.verdict.plain{border-color:var(--line)}
.note,.legend{color:var(--mute);font-size:.9rem}
svg{display:block;max-width:100%;height:auto}svg text{fill:var(--fg);font:11px ui-monospace,monospace}
.axis{stroke:var(--line)}.line{fill:none;stroke-width:1.5}
.heap{stroke:var(--heap)}.extra{stroke:var(--extra);stroke-dasharray:4 3}.stacks{stroke:var(--stack);stroke-dasharray:1 3}.site{stroke:var(--grow)}
circle{fill:var(--bg);stroke:var(--heap);stroke-width:1.5}circle.return{fill:var(--heap)}circle.site{stroke:var(--grow)}circle:hover{stroke-width:4}
.box rect{stroke:var(--bg);stroke-width:.5}.box:hover rect{stroke:var(--fg);stroke-width:1.5}
.g rect{fill:var(--grow)}.s rect{fill:var(--shrink)}.z rect{fill:#9aa0a6}.root rect{fill:#8a9099}.lib rect{fill-opacity:.55}
.box text{fill:#fff;pointer-events:none}
summary{cursor:pointer}
tr.sus td{border-bottom:none}a.stack{font-size:.85rem}
`

type htmlWriter struct {
	w      *bufio.Writer
	opts   HTMLOptions
	stops  map[int]StopPoint
	stacks *stackIndex // each stack printed once, then linked to
}

func (h *htmlWriter) printf(format string, args ...any) { fmt.Fprintf(h.w, format, args...) }

func esc(s string) string { return html.EscapeString(s) }

// htmlSite prints a frame as <code>function</code> file:line.
func htmlSite(f Frame) string { return codeSite(f, esc) }

// suspects writes the verdict and the suspects' table: per suspect its
// figures, a chart of its bytes over the stops and its stack.
func (h *htmlWriter) suspects(r *Report) {
	h.printf("<h2 id=\"suspects\">Suspects</h2>\n")
	if h.opts.SitesUnmeasured != "" {
		h.printf("<p class=\"verdict plain\">No per-site figures: %s.</p>\n", esc(h.opts.SitesUnmeasured))
		return
	}
	if len(r.Suspects) == 0 {
		h.printf("<p class=\"verdict clean\">No leak found: no site grew steadily between hits.</p>\n")
		return
	}
	h.printf("<p class=\"verdict\">%s grew steadily: in most intervals between consecutive hits of a breakpoint, and still at the end.</p>\n",
		esc(countOf(len(r.Suspects), "site", "sites")))
	// Blocks per hit tell one object per request from one buffer that
	// grew; a snapshot without block counts has none.
	blocks := false
	for _, s := range r.Suspects {
		blocks = blocks || s.BlocksPerHit != nil
	}
	blocksHead := ""
	if blocks {
		blocksHead = "<th class=\"num\">Blocks/hit</th><th class=\"num\">Bytes/block</th>"
	}
	h.printf("<table class=\"suspects\">\n<thead><tr><th class=\"num\">#</th><th>Site and stack</th><th>Breakpoint</th>"+
		"<th class=\"num\">Growth/hit</th>%s<th class=\"num\">Growing</th><th class=\"num\">Total</th><th>Bytes over the stops</th></tr></thead>\n<tbody>\n", blocksHead)
	columns := 8
	if blocks {
		columns = 10
	}
	for i, s := range r.Suspects {
		// The stack follows in the next row, unless it was printed
		// already: then the row links to it.
		first := h.stacks.first(s.Library, s.Stack)
		link := ""
		if !first {
			link = " " + h.stackLink(s.Library, s.Stack)
		}
		h.printf("<tr class=\"sus\" id=\"suspect-%d\"><td class=\"num\">%d</td><td>%s%s</td>", i+1, i+1, htmlSite(s.Frame), link)
		h.printf("<td>%s</td><td class=\"num\">%s</td>", esc(sectionLabel(s.Breakpoint)), esc(FormatDelta(s.GrowthPerHit)))
		if blocks {
			b := ""
			if s.BlocksPerHit != nil {
				b = formatBlocks(*s.BlocksPerHit)
			}
			h.printf("<td class=\"num\">%s</td><td class=\"num\">%s</td>", esc(b), esc(bytesPerBlock(s)))
		}
		h.printf("<td class=\"num\">%d/%d</td><td class=\"num\">%s</td><td>",
			s.GrowingIntervals, s.Intervals, esc(FormatDelta(s.TotalGrowth)))
		h.sparkline(s)
		h.printf("</td></tr>\n")
		// The suspect's own stack is open, in a row of its own under
		// the figures: its callers are what tells the leaking path from
		// the others.
		h.printf("<tr class=\"stackrow\"><td></td><td colspan=\"%d\">", columns-1)
		if n := CapacityNote(s); n != "" {
			h.printf("<p class=\"note\">%s.</p>", esc(n))
		}
		if first {
			l := h.stacks.label(s.Library, s.Stack)
			h.printf("<details open id=\"%s\"><summary>%s: %s</summary>\n", l, l, htmlSite(s.Frame))
			h.stack(s.Library, s.Stack)
			h.printf("</details>")
		}
		h.printf("</td></tr>\n")
	}
	h.printf("</tbody>\n</table>\n")
}

// stackLink refers to a stack printed elsewhere on the page by its label.
func (h *htmlWriter) stackLink(lib, stack []Frame) string {
	l := h.stacks.label(lib, stack)
	return fmt.Sprintf("<a class=\"stack\" href=\"#%s\">%s</a>", l, l)
}

// stack writes a stack as report.md does: the library frames from the
// allocator outwards, the site marked with →, then its callers.
func (h *htmlWriter) stack(lib, stack []Frame) {
	h.printf("<pre>")
	for _, f := range lib {
		h.printf("   %s\n", esc(FrameString(f)))
	}
	if len(stack) > 0 {
		h.printf("→  %s\n", esc(FrameString(stack[0])))
		callers, more := limitFrames(stack[1:], h.opts.MaxFrames)
		for _, f := range callers {
			h.printf("   %s\n", esc(FrameString(f)))
		}
		if more > 0 {
			h.printf("   … %s\n", esc(countOf(more, "more caller", "more callers")))
		}
	}
	h.printf("</pre>\n")
}

// breakpoints orders the sections: the report's, then breakpoints that
// only have stops or growth.
func (h *htmlWriter) breakpoints(r *Report, names []string) []string {
	seen := make(map[string]bool)
	for _, n := range names {
		seen[n] = true
	}
	for _, s := range r.Stops {
		if !seen[s.Breakpoint] {
			seen[s.Breakpoint] = true
			names = append(names, s.Breakpoint)
		}
	}
	for _, g := range r.Growth {
		if !seen[g.Breakpoint] {
			seen[g.Breakpoint] = true
			names = append(names, g.Breakpoint)
		}
	}
	return names
}

// breakpoint writes one breakpoint's section.
func (h *htmlWriter) breakpoint(r *Report, name string, diffs []*Diff) {
	var stops []StopPoint
	for _, s := range r.Stops {
		if s.Breakpoint == name {
			stops = append(stops, s)
		}
	}
	var growth *Growth
	for i := range r.Growth {
		if r.Growth[i].Breakpoint == name {
			growth = &r.Growth[i]
		}
	}
	counts := r.intervals(name, diffs)
	if len(stops) == 0 && len(diffs) == 0 && growth == nil && len(counts) == 0 {
		return
	}
	h.printf("<h2 id=\"bp-%s\">Breakpoint <code>%s</code></h2>\n", esc(anchor(name)), esc(sectionLabel(name)))
	switch {
	case len(stops) > 0 && stops[0].Memory != nil:
		h.memoryChart(stops)
	case len(stops) > 0:
		h.heapChart(stops)
	}
	if growth != nil {
		h.flame(growth)
	}
	if len(diffs) > 0 || len(counts) > 0 {
		h.printf("<h3>Diffs</h3>\n")
	}
	if len(counts) > 0 {
		h.printf("<ul class=\"counts\">\n")
		for _, c := range counts {
			h.printf("<li>%s.</li>\n", esc(intervalLine(c)))
		}
		h.printf("</ul>\n")
	}
	for _, d := range diffs {
		if len(d.Sites) > 0 { // the others are counted above
			h.diff(d)
		}
	}
}

// anchor makes a breakpoint name usable in an id.
func anchor(name string) string {
	var b strings.Builder
	for _, c := range name {
		if c < 128 && (c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// chartLine is one line of a chart, a value per point.
type chartLine struct {
	class, label string
	values       []int64
}

// chart is a line chart over evenly spaced points, the first line's
// points marked with a tooltip each.
type chart struct {
	width, height int
	lines         []chartLine
	tips          []string // per point
	markClass     []string // per point
	maxMarks      int
	axes          bool
	first, last   string // x axis labels
	// labelRunes, when set, is the room left for the y labels, in
	// characters: panels drawn one above the other share it, so that
	// their stops line up.
	labelRunes int
}

// valueRange is the span of a chart's y axis: from the smallest value to
// the largest, so that +107 KiB on a heap of 2.8 MiB fills the chart
// rather than being a flat line at its top; the axis is labelled at both
// ends. A flat series gets a span of a few bytes around its value.
func valueRange(lines []chartLine) (lo, hi int64) {
	first := true
	for _, l := range lines {
		for _, v := range l.values {
			if first {
				lo, hi, first = v, v, false
			}
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	if hi == lo {
		lo, hi = max(lo-1, 0), hi+1
	}
	return lo, hi
}

func (h *htmlWriter) drawChart(c chart) {
	n := len(c.lines[0].values)
	lo, hi := valueRange(c.lines)
	padL, padR, padT, padB := 4.0, 6.0, 6.0, 6.0
	if c.axes {
		// Room for the longer of the two y labels.
		label := max(len([]rune(FormatBytes(hi))), len([]rune(FormatBytes(lo))), c.labelRunes)
		padL, padT, padB = float64(label)*charWidth+14, 10, 20
	}
	pw, ph := float64(c.width)-padL-padR, float64(c.height)-padT-padB
	x := func(i int) float64 {
		if n == 1 {
			return padL + pw/2
		}
		return padL + pw*float64(i)/float64(n-1)
	}
	y := func(v int64) float64 { return padT + ph*(1-float64(v-lo)/float64(hi-lo)) }
	h.printf("<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">\n", c.width, c.height, c.width, c.height)
	if c.axes {
		h.printf("<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", padL, y(lo), padL+pw, y(lo))
		h.printf("<line class=\"axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", padL, y(hi), padL+pw, y(hi))
		h.printf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", padL-8, y(hi)+4, esc(FormatBytes(hi)))
		h.printf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", padL-8, y(lo)+4, esc(FormatBytes(lo)))
		h.printf("<text x=\"%.1f\" y=\"%d\">%s</text>\n", padL, c.height-4, esc(c.first))
		h.printf("<text x=\"%.1f\" y=\"%d\" text-anchor=\"end\">%s</text>\n", padL+pw, c.height-4, esc(c.last))
	}
	for _, l := range c.lines {
		h.printf("<polyline class=\"line %s\" points=\"", l.class)
		for i, v := range l.values {
			if i > 0 {
				h.w.WriteByte(' ')
			}
			h.printf("%.1f,%.1f", x(i), y(v))
		}
		h.printf("\"><title>%s</title></polyline>\n", esc(l.label))
	}
	step := 1
	if n > c.maxMarks {
		step = (n + c.maxMarks - 1) / c.maxMarks
	}
	r := 3.5
	if !c.axes {
		r = 2.5
	}
	for i, v := range c.lines[0].values {
		if i%step != 0 && i != n-1 {
			continue
		}
		h.printf("<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\"><title>%s</title></circle>\n", c.markClass[i], x(i), y(v), r, esc(c.tips[i]))
	}
	h.printf("</svg>\n")
	if step > 1 {
		h.printf("<p class=\"legend\">%d stops; every %s is marked.</p>\n", n, ordinal(step))
	}
}

func ordinal(n int) string {
	s := strconv.Itoa(n)
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return s + "th"
	case n%10 == 1:
		return s + "st"
	case n%10 == 2:
		return s + "nd"
	case n%10 == 3:
		return s + "rd"
	}
	return s + "th"
}

// stopTip is a stop's tooltip: hit, thread, time and the value shown.
func stopTip(s StopPoint, what string, v int64) string {
	t := fmt.Sprintf("stop %d · hit %d", s.Seq, s.Hit)
	if s.Phase == "return" {
		t += " (return)"
	}
	if s.Thread != "" {
		t += " · thread " + s.Thread
	}
	if s.Time != "" {
		t += " · " + s.Time
	}
	return t + " · " + what + " " + FormatBytes(v)
}

// memoryChart draws the native backend's figures at every stop of one
// breakpoint, each in a panel of its own with its own axis, so that a
// heap that grows by kilobytes shows beside megabytes of resident memory:
// the heap in use, the heap held free by glibc's allocator, and resident
// memory, which together tell a leak from the allocator's retention.
func (h *htmlWriter) memoryChart(stops []StopPoint) {
	rss := chartLine{class: "heap", label: "resident memory"}
	inUse := chartLine{class: "heap", label: "heap in use"}
	free := chartLine{class: "heap", label: "heap held free"}
	var tips, marks []string
	heap := true
	for _, s := range stops {
		m := s.Memory
		rss.values = append(rss.values, m.RSSBytes)
		if m.HeapInUseBytes == nil || m.HeapFreeBytes == nil {
			heap = false
		} else {
			inUse.values = append(inUse.values, *m.HeapInUseBytes)
			free.values = append(free.values, *m.HeapFreeBytes)
		}
		tip := stopTip(s, "resident", m.RSSBytes)
		if m.HeapInUseBytes != nil && m.HeapFreeBytes != nil {
			tip += fmt.Sprintf(" · in use %s · free %s", FormatBytes(*m.HeapInUseBytes), FormatBytes(*m.HeapFreeBytes))
		}
		if m.Arenas != nil {
			tip += fmt.Sprintf(" · %d %s", *m.Arenas, plural(*m.Arenas, "arena", "arenas"))
		}
		if m.TrimReleasedBytes != nil {
			tip += " · malloc_trim(0) released " + FormatBytes(*m.TrimReleasedBytes)
		}
		tips = append(tips, tip)
		marks = append(marks, markClass(s))
	}
	last := stops[len(stops)-1]
	first := fmt.Sprintf("stop %d (hit %d)", stops[0].Seq, stops[0].Hit)
	lastLabel := fmt.Sprintf("stop %d (hit %d)", last.Seq, last.Hit)
	room := 0
	for _, l := range []chartLine{inUse, free, rss} {
		for _, v := range l.values {
			room = max(room, len([]rune(FormatBytes(v))))
		}
	}
	panel := func(title string, l chartLine) {
		h.printf("<h4>%s: %s → %s (<strong>%s</strong>)</h4>\n", esc(title), esc(FormatBytes(l.values[0])), esc(FormatBytes(l.values[len(l.values)-1])),
			esc(FormatDelta(l.values[len(l.values)-1]-l.values[0])))
		h.drawChart(chart{width: chartWidth, height: panelHeight, maxMarks: maxChartMarks, axes: true,
			lines: []chartLine{l}, tips: tips, markClass: marks, first: first, last: lastLabel, labelRunes: room})
	}
	h.printf("<h3>Memory over the stops</h3>\n")
	if heap {
		panel("Heap in use", inUse)
		panel("Heap held free by the allocator", free)
	}
	panel("Resident memory", rss)
	h.printf("<p class=\"legend\">Each panel has its own axis, which spans the values drawn, not from 0; one mark per stop%s, hover for its hit, thread, time and figures.</p>\n", returnLegend(stops))
}

// returnLegend is what the legend says of the filled marks: the stops
// after an around_call's call returned, when the breakpoint has some.
func returnLegend(stops []StopPoint) string {
	for _, s := range stops {
		if s.Phase == "return" {
			return " (filled: after the call returned)"
		}
	}
	return ""
}

// markClass is the class of a stop's mark on a chart: filled after the
// call returned.
func markClass(s StopPoint) string {
	if s.Phase == "return" {
		return "return"
	}
	return "hit"
}

// heapChart draws the heap at every stop of one breakpoint.
func (h *htmlWriter) heapChart(stops []StopPoint) {
	heap := chartLine{class: "heap", label: "heap (bytes the program asked for)"}
	extra := chartLine{class: "extra", label: "heap + allocator overhead"}
	stacks := chartLine{class: "stacks", label: "stacks"}
	c := chart{width: chartWidth, height: chartHeight, maxMarks: maxChartMarks, axes: true}
	var anyExtra, anyStacks bool
	for _, s := range stops {
		heap.values = append(heap.values, s.HeapBytes)
		extra.values = append(extra.values, s.HeapBytes+s.HeapExtraBytes)
		stacks.values = append(stacks.values, s.StacksBytes)
		anyExtra = anyExtra || s.HeapExtraBytes != 0
		anyStacks = anyStacks || s.StacksBytes != 0
		c.tips = append(c.tips, stopTip(s, "heap", s.HeapBytes))
		c.markClass = append(c.markClass, markClass(s))
	}
	c.lines = []chartLine{heap}
	legend := "heap (solid)"
	if anyExtra {
		c.lines = append(c.lines, extra)
		legend += ", heap with the allocator's overhead (dashed)"
	}
	if anyStacks {
		c.lines = append(c.lines, stacks)
		legend += ", stacks (dotted)"
	}
	c.first = fmt.Sprintf("stop %d (hit %d)", stops[0].Seq, stops[0].Hit)
	last := stops[len(stops)-1]
	c.last = fmt.Sprintf("stop %d (hit %d)", last.Seq, last.Hit)
	h.printf("<h3>Heap over the stops</h3>\n")
	h.printf("<p>Heap %s at stop %d, %s at stop %d (<strong>%s</strong>).</p>\n", esc(FormatBytes(stops[0].HeapBytes)), stops[0].Seq,
		esc(FormatBytes(last.HeapBytes)), last.Seq, esc(FormatDelta(last.HeapBytes-stops[0].HeapBytes)))
	h.drawChart(c)
	h.printf("<p class=\"legend\">%s; the axis spans the values drawn, not from 0; one mark per stop%s, hover for its hit, thread and time.</p>\n", esc(legend), returnLegend(stops))
}

// sparkline draws a suspect's bytes at its breakpoint's stops.
func (h *htmlWriter) sparkline(s Suspect) {
	if len(s.History) == 0 {
		return
	}
	line := chartLine{class: "site", label: FrameString(s.Frame)}
	c := chart{width: sparkWidth, height: sparkHeight, maxMarks: maxSparkMarks}
	for _, p := range s.History {
		line.values = append(line.values, p.Bytes)
		st, ok := h.stops[p.Seq]
		if !ok {
			st = StopPoint{Seq: p.Seq}
		}
		c.tips = append(c.tips, stopTip(st, "site", p.Bytes))
		c.markClass = append(c.markClass, "site")
	}
	c.lines = []chartLine{line}
	h.drawChart(c)
}

// flame draws a breakpoint's growth as icicles: the outermost callers on
// top, the allocation sites below them. The bytes grown and the bytes
// freed get a graph each, a box's width its share of that one sign, so
// that a small leak beside a large churn that freed memory fills the
// growth graph rather than being a sliver of a graph of both.
func (h *htmlWriter) flame(g *Growth) {
	root := g.Root
	if root == nil {
		return
	}
	h.printf("<h3>Growth from stop %d to stop %d</h3>\n", g.FromSeq, g.ToSeq)
	if root.Grown+root.Shrunk == 0 {
		h.printf("<p>No allocation changed between the first and the last snapshot.</p>\n")
		return
	}
	h.printf("<p>Heap %s: %s grown, %s freed.</p>\n", esc(FormatDelta(root.Net())), esc(FormatBytes(root.Grown)), esc(FormatBytes(root.Shrunk)))
	if root.Grown > 0 {
		h.printf("<h4>Grown: %s</h4>\n", esc(FormatBytes(root.Grown)))
		h.flameGraph(root, grownBytes, "g")
	}
	if root.Shrunk > 0 {
		h.printf("<details><summary>Freed: %s</summary>\n", esc(FormatBytes(root.Shrunk)))
		h.flameGraph(root, freedBytes, "s")
		h.printf("</details>\n")
	}
	h.printf("<p class=\"legend\">Outermost callers on top, allocation sites below them, each box labelled with its function and file:line; a box's width is the bytes grown (red) or freed (blue) under it, pale for library frames folded into one box. Hover a box for its frames and its net change.</p>\n")
}

// grownBytes and freedBytes are the widths of the two flame graphs.
func grownBytes(n *FlameNode) int64 { return n.Grown }
func freedBytes(n *FlameNode) int64 { return n.Shrunk }

// flameGraph draws root's boxes, each as wide as its share of width(root)
// and of class class.
func (h *htmlWriter) flameGraph(root *FlameNode, width func(*FlameNode) int64, class string) {
	depth := min(flameDepth(root, width), flameMaxDepth)
	h.printf("<svg class=\"flame\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">\n",
		flameWidth, (depth+1)*flameRow, flameWidth, (depth+1)*flameRow)
	h.box(root, width, class, 0, float64(flameWidth), 0, true)
	h.printf("</svg>\n")
}

// flameDepth is the depth of the boxes under n that have a width.
func flameDepth(n *FlameNode, width func(*FlameNode) int64) int {
	d := 0
	for _, c := range n.Children {
		if width(c) > 0 {
			d = max(d, flameDepth(c, width)+1)
		}
	}
	return d
}

// box draws n in [x, x+w) at row depth, then its children.
func (h *htmlWriter) box(n *FlameNode, width func(*FlameNode) int64, graph string, x, w float64, depth int, root bool) {
	if w < 0.5 || depth > flameMaxDepth {
		return
	}
	class := graph
	if root {
		class = "root"
	}
	if n.Library {
		class += " lib"
	}
	var tip strings.Builder
	if root {
		tip.WriteString("all allocations")
	}
	for i := len(n.Frames) - 1; i >= 0; i-- { // innermost first, as stacks read
		if tip.Len() > 0 {
			tip.WriteString("\n")
		}
		tip.WriteString(FrameString(n.Frames[i]))
	}
	if len(n.Frames) == 0 && !root {
		tip.WriteString(n.Name)
	}
	fmt.Fprintf(&tip, "\n%s (grown %s, freed %s)", FormatDelta(n.Net()), FormatBytes(n.Grown), FormatBytes(n.Shrunk))
	y := depth * flameRow
	h.printf("<g class=\"box %s\"><title>%s</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", class, esc(tip.String()), x, y, w, flameRow-1)
	if label := fitLabel(flameLabel(n), w); label != "" {
		h.printf("<text x=\"%.1f\" y=\"%d\">%s</text>", x+3, y+flameRow-5, esc(label))
	}
	h.printf("</g>\n")
	total := float64(width(n))
	if total == 0 {
		return
	}
	cx := x
	for _, c := range n.Children {
		cw := w * float64(width(c)) / total
		h.box(c, width, graph, cx, cw, depth+1, false)
		cx += cw
	}
}

// flameLabel is a box's label: its name, and for a box of one frame of
// the program its file:line, which tells two lines of one function apart.
func flameLabel(n *FlameNode) string {
	if n.Library || len(n.Frames) != 1 {
		return n.Name
	}
	f := n.Frames[0]
	if f.File == "" || f.Line <= 0 {
		return n.Name
	}
	return n.Name + " " + path.Base(f.File) + ":" + strconv.Itoa(f.Line)
}

// fitLabel shortens a label to the box's width, or returns "" when not
// even a few characters fit.
func fitLabel(s string, w float64) string {
	fit := int((w - 6) / charWidth)
	if fit < 3 {
		return ""
	}
	if utf8.RuneCountInString(s) <= fit {
		return s
	}
	r := []rune(s)
	return string(r[:fit-1]) + "…"
}

// diff writes one diff of the breakpoint: totals and a table of sites.
func (h *htmlWriter) diff(d *Diff) {
	h.printf("<h4>%s</h4>\n<p>Heap %s → %s (<strong>%s</strong>); sites %s", esc(stopTitle("Stop", d)),
		esc(FormatBytes(d.BeforeBytes)), esc(FormatBytes(d.AfterBytes)), esc(FormatDelta(d.DeltaBytes)), esc(FormatDelta(d.SitesDeltaBytes)))
	if d.BelowThresholdDeltaBytes != 0 {
		h.printf(", below threshold %s", esc(FormatDelta(d.BelowThresholdDeltaBytes)))
	}
	if d.FilteredDeltaBytes != 0 {
		h.printf(", filtered out %s", esc(FormatDelta(d.FilteredDeltaBytes)))
	}
	h.printf(".</p>\n")
	sites, more := limitSites(d.Sites, h.opts.MaxSites)
	if len(sites) == 0 {
		h.printf("<p>No site changed.</p>\n")
		return
	}
	blocks := anyBlocks(sites)
	blocksHead := ""
	if blocks {
		blocksHead = "<th class=\"num\">Blocks</th>"
	}
	h.printf("<table>\n<thead><tr><th class=\"num\">Δ</th>%s<th class=\"num\">Before</th><th class=\"num\">After</th><th>Change</th><th>Site</th></tr></thead>\n<tbody>\n", blocksHead)
	for _, s := range sites {
		before, after := beforeAfter(s)
		h.printf("<tr><td class=\"num\">%s</td>", esc(FormatDelta(s.Delta)))
		if blocks {
			b := ""
			if s.SiteBlocks != nil {
				b = formatCount(s.DeltaBlocks)
			}
			h.printf("<td class=\"num\">%s</td>", esc(b))
		}
		h.printf("<td class=\"num\">%s</td><td class=\"num\">%s</td><td>%s</td><td>%s %s</td></tr>\n",
			esc(before), esc(after), esc(string(s.Change)), htmlSite(s.Frame), h.stackLink(s.Library, s.Stack))
	}
	h.printf("</tbody>\n</table>\n")
	for _, s := range sites {
		if h.stacks.first(s.Library, s.Stack) {
			h.printf("<details id=\"%s\"><summary>%s: %s</summary>\n", h.stacks.label(s.Library, s.Stack), h.stacks.label(s.Library, s.Stack), htmlSite(s.Frame))
			h.stack(s.Library, s.Stack)
			h.printf("</details>\n")
		}
	}
	if more > 0 {
		h.printf("<p class=\"note\">%s not shown.</p>\n", esc(countOf(more, "more site", "more sites")))
	}
	if d.UnchangedSites > 0 {
		h.printf("<p class=\"note\">%s unchanged.</p>\n", esc(countOf(d.UnchangedSites, "site", "sites")))
	}
	for _, n := range changeNote(sites) {
		h.printf("<p class=\"note\">%s</p>\n", esc(n))
	}
}
