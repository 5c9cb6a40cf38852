package snapshots

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Report is the analysis of one run, as the driver hands it to the
// renderers for report.md and the terminal: the diffs it made (between hits
// of each breakpoint, and within calls) and the suspects of all its series.
type Report struct {
	// Title heads the Markdown report; empty for none.
	Title string `json:"-"`
	// Breakpoints orders the per-breakpoint sections; breakpoints of Diffs
	// that it does not name follow in order of appearance.
	Breakpoints []string  `json:"-"`
	Diffs       []*Diff   `json:"diffs"`
	Suspects    []Suspect `json:"suspects"`
	// Stops and Growth are what report.html draws besides the above: the
	// heap at every stop, and per breakpoint the change between its first
	// and last snapshot. The other formats leave them out.
	Stops  []StopPoint `json:"-"`
	Growth []Growth    `json:"-"`
	// Intervals count every diff the run made, per breakpoint and kind,
	// whichever of them Diffs holds: the reports say how many intervals
	// (or calls) changed no site from these true counts. Nil: Diffs are
	// all the run made.
	Intervals []IntervalCount `json:"-"`
}

// IntervalCount is what a report says of all the diffs of one
// breakpoint and kind: how many were made, in how many no site changed,
// where they start and end, and the largest heap change among those in
// which a site changed.
type IntervalCount struct {
	Breakpoint string
	Kind       string // "between-hits" or "within-call"
	// Diffs is how many diffs were made; Unchanged how many of them
	// changed no site.
	Diffs, Unchanged int
	// FromSeq and BeforeBytes are the first diff's, ToSeq and AfterBytes
	// the last's.
	FromSeq, ToSeq          int
	BeforeBytes, AfterBytes int64
	// Largest is the diff with the largest heap change among those in
	// which a site changed (its sites left out); nil when none changed.
	Largest *Diff
}

// Count adds d to the counts.
func (c *IntervalCount) Count(d *Diff) {
	if c.Diffs == 0 {
		c.FromSeq, c.BeforeBytes = d.FromSeq, d.BeforeBytes
	}
	c.Diffs++
	c.ToSeq, c.AfterBytes = d.ToSeq, d.AfterBytes
	if len(d.Sites) == 0 {
		c.Unchanged++
		return
	}
	if c.Largest == nil || absBytes(d.DeltaBytes) > absBytes(c.Largest.DeltaBytes) {
		l := *d
		l.Sites = nil
		c.Largest = &l
	}
}

// intervals returns the counts of one breakpoint's diffs, kind by kind
// (between hits first): r.Intervals', or counted from r.Diffs.
func (r *Report) intervals(name string, diffs []*Diff) []IntervalCount {
	var out []IntervalCount
	if r.Intervals != nil {
		for _, c := range r.Intervals {
			if c.Breakpoint == name && c.Diffs > 0 {
				out = append(out, c)
			}
		}
	} else {
		for _, d := range diffs {
			i := 0
			for i < len(out) && out[i].Kind != d.Kind {
				i++
			}
			if i == len(out) {
				out = append(out, IntervalCount{Breakpoint: name, Kind: d.Kind})
			}
			out[i].Count(d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return kindOrder(out[i].Kind) < kindOrder(out[j].Kind) })
	return out
}

func kindOrder(kind string) int {
	if kind == "within-call" {
		return 1
	}
	return 0
}

// RenderOptions tune the text and Markdown renderers.
type RenderOptions struct {
	// Color adds ANSI colours; the command sets it only when stdout is a
	// terminal and NO_COLOR is unset.
	Color bool
	// MaxSites limits the rows shown per diff (the largest changes); 0
	// shows all.
	MaxSites int
	// MaxFrames limits the callers shown per stack; 0 shows all.
	MaxFrames int
	// MaxDiffs limits the diffs the text report shows per breakpoint (the
	// largest heap changes); 0 shows all.
	MaxDiffs int
}

// Format is an output format of `snapctl diff`.
type Format string

// The formats of diffs and reports.
const (
	FormatText     Format = "text"
	FormatMarkdown Format = "markdown"
	FormatJSON     Format = "json"
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "text":
		return FormatText, nil
	case "markdown", "md":
		return FormatMarkdown, nil
	case "json":
		return FormatJSON, nil
	}
	return "", fmt.Errorf("unknown format %q (want text, markdown or json)", s)
}

// RenderDiff writes d in format f.
func RenderDiff(w io.Writer, d *Diff, f Format, opts RenderOptions) error {
	if d == nil {
		return errors.New("rendering diff: no diff")
	}
	switch f {
	case FormatMarkdown:
		return RenderDiffMarkdown(w, d, opts)
	case FormatJSON:
		return RenderDiffJSON(w, d)
	case FormatText, "":
		return RenderDiffText(w, d, opts)
	}
	return fmt.Errorf("unknown format %q", f)
}

// RenderReport writes r in format f.
func RenderReport(w io.Writer, r *Report, f Format, opts RenderOptions) error {
	if r == nil {
		r = &Report{}
	}
	switch f {
	case FormatMarkdown:
		return RenderReportMarkdown(w, r, opts)
	case FormatJSON:
		return RenderReportJSON(w, r)
	case FormatText, "":
		return RenderReportText(w, r, opts)
	}
	return fmt.Errorf("unknown format %q", f)
}

// sections groups a report's diffs by breakpoint in display order.
func (r *Report) sections() (names []string, byName map[string][]*Diff) {
	byName = make(map[string][]*Diff)
	if r == nil {
		return nil, byName
	}
	seen := make(map[string]bool)
	for _, b := range r.Breakpoints {
		if !seen[b] {
			seen[b] = true
			names = append(names, b)
		}
	}
	for _, d := range r.Diffs {
		if d == nil {
			continue
		}
		if !seen[d.Breakpoint] {
			seen[d.Breakpoint] = true
			names = append(names, d.Breakpoint)
		}
		byName[d.Breakpoint] = append(byName[d.Breakpoint], d)
	}
	for _, c := range r.Intervals {
		if !seen[c.Breakpoint] {
			seen[c.Breakpoint] = true
			names = append(names, c.Breakpoint)
		}
	}
	return names, byName
}

// FrameString prints a frame as massif does: "fn (file:line)",
// "fn (in /lib/x.so)" or "fn"; a frame with an Offset as "fn (in
// /lib/x.so+0x1a2b)".
func FrameString(f Frame) string { return Printable(frameText(f)) }

// frameText is FrameString with the names as they are.
func frameText(f Frame) string {
	switch {
	case f.File != "" && f.Line > 0:
		return f.Function + " (" + f.File + ":" + strconv.Itoa(f.Line) + ")"
	case f.File != "":
		return f.Function + " (" + f.File + ")"
	case f.Object != "" && ModuleOffset(f):
		return f.Function
	case f.Object != "" && f.Offset != 0:
		return f.Function + " (in " + f.Object + "+0x" + strconv.FormatUint(f.Offset, 16) + ")"
	case f.Object != "":
		return f.Function + " (in " + f.Object + ")"
	}
	return f.Function
}

// ModuleOffset reports whether f is named by its module and its offset
// there, "memcached+0x1a2b3" in /usr/bin/memcached: a frame without
// symbols, which addr2line or gdb names given the module's debug file.
func ModuleOffset(f Frame) bool {
	base := f.Object[strings.LastIndexByte(f.Object, '/')+1:]
	rest, ok := strings.CutPrefix(f.Function, base+"+0x")
	return ok && rest != "" && strings.Trim(rest, "0123456789abcdef") == ""
}

// shortFrame is FrameString with C++ template arguments folded to "<…>"
// and no return type.
func shortFrame(f Frame) string {
	f.Function = shortName(f.Function)
	return FrameString(f)
}

// ShortFrame is a frame as the reports name it in headlines and tables:
// FrameString with the function's return type dropped, C++ template
// arguments folded to "<…>", and a name still longer than a line's
// worth (maxNameRunes) cut to its qualified name, its parameters folded
// to "(…)". run.json keeps the whole name.
func ShortFrame(f Frame) string { return shortFrame(f) }

// maxNameRunes is the longest function name the reports print whole once
// its template arguments are folded.
const maxNameRunes = 80

// shortName is a function name as the renderers show it in tables.
func shortName(fn string) string {
	s := foldTemplates(withoutReturnType(fn))
	if utf8.RuneCountInString(s) <= maxNameRunes {
		return s
	}
	start, end := qualifiedSpan(fn)
	s = foldTemplates(fn[start:end])
	if r := []rune(s); len(r) > maxNameRunes-3 {
		s = "…" + string(r[len(r)-(maxNameRunes-4):])
	}
	if end < len(fn) {
		s += "(…)"
	}
	return s
}

// briefName is a function name without return type, parameters and
// template arguments, for the one-line summary of library frames.
func briefName(fn string) string { return Printable(foldTemplates(qualifiedName(fn))) }

// foldTemplates replaces the arguments of every outermost template with "…":
// "std::vector<int, std::allocator<int> >::push_back(int const&)" gives
// "std::vector<…>::push_back(int const&)". "operator<" and "operator<<"
// are kept.
func foldTemplates(fn string) string {
	if strings.IndexByte(fn, '<') < 0 {
		return fn
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(fn); i++ {
		c := fn[i]
		if depth == 0 && strings.HasPrefix(fn[i:], "operator") {
			j := i + len("operator")
			for j < len(fn) && strings.IndexByte("<>=!+-*/%^&|~", fn[j]) >= 0 {
				j++
			}
			b.WriteString(fn[i:j])
			i = j - 1
			continue
		}
		switch c {
		case '<':
			if depth == 0 {
				b.WriteString("<…")
			}
			depth++
			continue
		case '>':
			if depth > 0 {
				depth--
				if depth == 0 {
					b.WriteByte('>')
				}
				continue
			}
		}
		if depth == 0 {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// changeNote explains the change kinds a table uses that need a word.
func changeNote(sites []SiteDelta) []string {
	var hidden, revealed bool
	for _, s := range sites {
		hidden = hidden || s.Change == ChangeHidden
		revealed = revealed || s.Change == ChangeRevealed
	}
	var out []string
	if hidden {
		out = append(out, "hidden: the site went into massif's below-threshold bucket; its size after is unknown (run massif with --threshold=0)")
	}
	if revealed {
		out = append(out, "revealed: the site came out of massif's below-threshold bucket; its size before is unknown (run massif with --threshold=0)")
	}
	return out
}

func limitSites(s []SiteDelta, n int) ([]SiteDelta, int) {
	if n > 0 && len(s) > n {
		return s[:n], len(s) - n
	}
	return s, 0
}

// anyBlocks reports whether any of sites counts blocks (xtmemory
// snapshots do, massif's own do not): the tables then have a blocks column.
func anyBlocks(sites []SiteDelta) bool {
	for _, s := range sites {
		if s.SiteBlocks != nil {
			return true
		}
	}
	return false
}

// beforeAfter returns a site's before and after bytes as the tables print
// them: "?" for the side a filter hid (hidden, revealed).
func beforeAfter(s SiteDelta) (before, after string) {
	before, after = FormatBytes(s.Before), FormatBytes(s.After)
	switch s.Change {
	case ChangeHidden:
		after = "?"
	case ChangeRevealed:
		before = "?"
	}
	return before, after
}

func limitFrames(s []Frame, n int) ([]Frame, int) {
	if n > 0 && len(s) > n {
		return s[:n], len(s) - n
	}
	return s, 0
}

func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// sectionLabel names a report section: its breakpoint, or "(no breakpoint)"
// for diffs that belong to none.
func sectionLabel(name string) string {
	if name == "" {
		return "(no breakpoint)"
	}
	return name
}

// stopTitle heads one diff of a run: "stop 1 → 2 (between hits)", with
// the word for "stop" as the format capitalises it.
func stopTitle(stop string, d *Diff) string {
	title := fmt.Sprintf("%s %d → %d", stop, d.FromSeq, d.ToSeq)
	if d.Kind != "" {
		title += " (" + strings.ReplaceAll(d.Kind, "-", " ") + ")"
	}
	return title
}

// vectorGrowth are the functions of libstdc++'s std::vector that
// allocate its buffer anew, larger: reserve, resize, and the insertions
// that outgrow the capacity.
var vectorGrowth = []string{"::reserve", "::resize", "::_M_realloc_insert", "::_M_realloc_append", "::_M_default_append", "::_M_fill_insert", "::_M_range_insert"}

// CapacityNote says that a stepwise suspect is a std::vector's buffer,
// grown by one of vectorGrowth (a frame between the allocator and the
// site, or the site itself): its bytes per block jump in steps as the
// capacity doubles, and clear() keeps the capacity. "" for any other
// suspect. The terminal's verdict, report.md and report.html say it.
func CapacityNote(s Suspect) string {
	if s.Pattern != PatternStepwise {
		return ""
	}
	for _, f := range append(append([]Frame{s.Frame}, s.Library...), s.Stack...) {
		if !strings.Contains(f.Function, "std::vector<") {
			continue
		}
		for _, g := range vectorGrowth {
			if strings.Contains(f.Function, g+"(") || strings.Contains(f.Function, g+"<") {
				return "it is a std::vector's buffer growing in steps (" + g[2:] + "): a vector keeps its capacity after clear(), so one cleared and refilled holds its largest size for good; shrink_to_fit() (or swapping with an empty vector) returns it"
			}
		}
	}
	return ""
}
