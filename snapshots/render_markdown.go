package snapshots

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"strconv"
	"strings"
)

// mdWriter collects Markdown output; write errors surface in done.
type mdWriter struct {
	w *bufio.Writer
	// stacks labels the report's stacks so each is printed once; nil for
	// a single diff, whose sites' stacks are all distinct.
	stacks *stackIndex
}

// stackIndex numbers the distinct stacks of a report (stackKey) in the
// order they are first shown, s1, s2..., and remembers which were
// printed: the Markdown and HTML reports print each stack once and refer
// to it by its label elsewhere.
type stackIndex struct {
	labels  map[string]int
	printed map[string]bool
}

func newStackIndex() *stackIndex {
	return &stackIndex{labels: make(map[string]int), printed: make(map[string]bool)}
}

// label returns the stack's label, "s3", numbering it if it is new.
func (x *stackIndex) label(lib, stack []Frame) string {
	k := stackKey(lib, stack)
	n, ok := x.labels[k]
	if !ok {
		n = len(x.labels) + 1
		x.labels[k] = n
	}
	return "s" + strconv.Itoa(n)
}

// first reports whether the stack is printed now for the first time, and
// marks it printed.
func (x *stackIndex) first(lib, stack []Frame) bool {
	k := stackKey(lib, stack)
	if x.printed[k] {
		return false
	}
	x.printed[k] = true
	return true
}

func (m *mdWriter) printf(format string, args ...any) { fmt.Fprintf(m.w, format, args...) }

// mdCell escapes text for a GitHub table cell or <summary>: HTML-escaped
// (C++ templates are full of < and >) and with | escaped so that it does
// not split the cell.
func mdCell(s string) string {
	return strings.ReplaceAll(html.EscapeString(s), "|", "&#124;")
}

// siteCell prints a frame as <code>function</code> file:line.
func siteCell(f Frame) string { return codeSite(f, mdCell) }

// codeSite prints a frame as <code>function</code> file:line, each part
// escaped by esc for the format at hand (Markdown, HTML).
func codeSite(f Frame, esc func(string) string) string {
	f.Function, f.File, f.Object = Printable(f.Function), Printable(f.File), Printable(f.Object)
	fn := "<code>" + esc(shortName(f.Function)) + "</code>"
	switch {
	case f.File != "" && f.Line > 0:
		return fmt.Sprintf("%s %s:%d", fn, esc(f.File), f.Line)
	case f.File != "":
		return fn + " " + esc(f.File)
	case f.Object != "" && f.Offset != 0:
		return fn + " in " + esc(f.Object+"+0x"+strconv.FormatUint(f.Offset, 16))
	case f.Object != "":
		return fn + " in " + esc(f.Object)
	}
	return fn
}

// RenderDiffMarkdown writes d for a bug report: the heap totals, a table
// of the sites, and each site's stack in a collapsible <details>.
func RenderDiffMarkdown(w io.Writer, d *Diff, opts RenderOptions) error {
	if d == nil {
		return errors.New("rendering diff: no diff")
	}
	m := &mdWriter{w: bufio.NewWriter(w)}
	if title := diffTitle(d); title != "" {
		m.printf("### %s\n\n", mdCell(title))
	}
	m.diff(d, opts)
	return m.w.Flush()
}

func (m *mdWriter) diff(d *Diff, opts RenderOptions) {
	m.printf("Heap %s → %s (**%s**); sites %s", FormatBytes(d.BeforeBytes), FormatBytes(d.AfterBytes),
		FormatDelta(d.DeltaBytes), FormatDelta(d.SitesDeltaBytes))
	if d.BelowThresholdDeltaBytes != 0 {
		m.printf(", below threshold %s", FormatDelta(d.BelowThresholdDeltaBytes))
	}
	if d.FilteredDeltaBytes != 0 {
		m.printf(", filtered out %s", FormatDelta(d.FilteredDeltaBytes))
	}
	m.printf(".\n\n")
	sites, more := limitSites(d.Sites, opts.MaxSites)
	if len(sites) == 0 {
		m.printf("No site changed.\n\n")
		return
	}
	blocks := anyBlocks(sites)
	if blocks {
		m.printf("| Δ | Δ blocks | Before | After | Change | Site |\n|---:|---:|---:|---:|---|---|\n")
	} else {
		m.printf("| Δ | Before | After | Change | Site |\n|---:|---:|---:|---|---|\n")
	}
	for _, s := range sites {
		before, after := beforeAfter(s)
		site := siteCell(s.Frame)
		if s.Stacks > 1 {
			site += fmt.Sprintf(" (%d stacks)", s.Stacks)
		}
		if m.stacks != nil {
			l := m.stacks.label(s.Library, s.Stack)
			site += fmt.Sprintf(" [%s](#%s)", l, l)
		}
		if blocks {
			b := ""
			if s.SiteBlocks != nil {
				b = formatCount(s.DeltaBlocks)
			}
			m.printf("| %s | %s | %s | %s | %s | %s |\n", FormatDelta(s.Delta), b, before, after, s.Change, site)
			continue
		}
		m.printf("| %s | %s | %s | %s | %s |\n", FormatDelta(s.Delta), before, after, s.Change, site)
	}
	m.printf("\n")
	if more > 0 {
		m.printf("%s not shown.\n\n", countOf(more, "more site", "more sites"))
	}
	if d.UnchangedSites > 0 {
		m.printf("%s unchanged.\n\n", countOf(d.UnchangedSites, "site", "sites"))
	}
	for _, n := range changeNote(sites) {
		m.printf("_%s_\n\n", mdCell(n))
	}
	for _, s := range sites {
		summary := fmt.Sprintf("%s %s", siteCell(s.Frame), FormatDelta(s.Delta))
		if m.stacks == nil {
			m.details(summary, s.Library, s.Stack, opts, false)
			continue
		}
		if m.stacks.first(s.Library, s.Stack) {
			l := m.stacks.label(s.Library, s.Stack)
			m.printf("<a id=\"%s\"></a>\n\n", l)
			m.details(fmt.Sprintf("%s: %s", l, siteCell(s.Frame)), s.Library, s.Stack, opts, false)
		}
	}
}

// details writes a collapsible stack, open with open: the library frames
// from the allocator outwards, the site marked with →, then its callers.
// Names are printed in full: a bug report wants them exact.
func (m *mdWriter) details(summary string, lib, stack []Frame, opts RenderOptions, open bool) {
	tag := "<details>"
	if open {
		tag = "<details open>"
	}
	m.printf("%s<summary>%s</summary>\n\n```text\n", tag, summary)
	for _, f := range lib {
		m.printf("   %s\n", FrameString(f))
	}
	if len(stack) > 0 {
		m.printf("→  %s\n", FrameString(stack[0]))
		callers, more := limitFrames(stack[1:], opts.MaxFrames)
		for _, f := range callers {
			m.printf("   %s\n", FrameString(f))
		}
		if more > 0 {
			m.printf("   … %s\n", countOf(more, "more caller", "more callers"))
		}
	}
	m.printf("```\n\n</details>\n\n")
}

// RenderReportMarkdown writes a run's analysis for report.md: a summary
// table of the suspects with their stacks (open), then per breakpoint how
// many intervals (or calls) there were and in how many no site changed,
// and the diffs of r in which a site changed. Each distinct stack is
// printed once, where it first appears, and named by its label (s1) with
// a link to it wherever else it appears.
func RenderReportMarkdown(w io.Writer, r *Report, opts RenderOptions) error {
	if r == nil {
		r = &Report{}
	}
	m := &mdWriter{w: bufio.NewWriter(w), stacks: newStackIndex()}
	if r.Title != "" {
		m.printf("# %s\n\n", mdCell(r.Title))
	}
	m.printf("## Suspects\n\n")
	if len(r.Suspects) == 0 {
		m.printf("No site grew steadily between hits.\n\n")
	} else {
		m.printf("Sites that grew between consecutive hits of a breakpoint: steadily (in most intervals, and still at the end), in steps that never went down (stepwise), or in the only interval there was (single-interval). Growth and blocks per hit are per hit of the breakpoint; bytes per block is the growth over the blocks gained, the size of the object when they are alike.\n\n")
		m.printf("| # | Site | Breakpoint | Growth/hit | Blocks/hit | Bytes/block | Growing intervals | Pattern | Total growth | Stack |\n|---:|---|---|---:|---:|---:|---:|---|---:|---|\n")
		for i, s := range r.Suspects {
			blocks := ""
			if s.BlocksPerHit != nil {
				blocks = formatBlocks(*s.BlocksPerHit)
			}
			site := siteCell(s.Frame)
			if s.Stacks > 1 {
				site += fmt.Sprintf(" (%d stacks)", s.Stacks)
			}
			l := m.stacks.label(s.Library, s.Stack)
			m.printf("| %d | %s | %s | %s | %s | %s | %d/%d | %s | %s | [%s](#%s) |\n", i+1, site, mdCell(s.Breakpoint),
				FormatDelta(s.GrowthPerHit), blocks, bytesPerBlock(s), s.GrowingIntervals, s.Intervals, s.Pattern, FormatDelta(s.TotalGrowth), l, l)
		}
		m.printf("\n")
		notes := 0
		for i, s := range r.Suspects {
			if n := CapacityNote(s); n != "" {
				m.printf("- Suspect %d, %s: %s.\n", i+1, siteCell(s.Frame), n)
				notes++
			}
		}
		if notes > 0 {
			m.printf("\n")
		}
		for i, s := range r.Suspects {
			if !m.stacks.first(s.Library, s.Stack) {
				continue
			}
			l := m.stacks.label(s.Library, s.Stack)
			m.printf("<a id=\"%s\"></a>\n\n", l)
			m.details(fmt.Sprintf("%s: %d. %s %s per hit", l, i+1, siteCell(s.Frame), FormatDelta(s.GrowthPerHit)), s.Library, s.Stack, opts, true)
		}
	}
	names, byName := r.sections()
	if len(r.Diffs) > 0 || len(r.Intervals) > 0 {
		m.printf("## Diffs\n\n")
	}
	for _, name := range names {
		diffs := byName[name]
		counts := r.intervals(name, diffs)
		if len(diffs) == 0 && len(counts) == 0 {
			continue
		}
		label := sectionLabel(name)
		m.printf("### Breakpoint `%s`\n\n", strings.ReplaceAll(label, "`", "'"))
		for _, c := range counts {
			m.printf("- %s.\n", intervalLine(c))
		}
		if len(counts) > 0 {
			m.printf("\n")
		}
		for _, d := range diffs {
			if len(d.Sites) == 0 {
				continue // counted above
			}
			m.printf("#### %s\n\n", stopTitle("Stop", d))
			m.diff(d, opts)
		}
	}
	return m.w.Flush()
}
