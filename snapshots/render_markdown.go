package snapshots

import (
	"bufio"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"
)

// mdWriter collects Markdown output; write errors surface in done.
type mdWriter struct{ w *bufio.Writer }

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
		m.details(fmt.Sprintf("%s %s", siteCell(s.Frame), FormatDelta(s.Delta)), s.Library, s.Stack, opts)
	}
}

// details writes a collapsible stack: the library frames from the
// allocator outwards, the site marked with →, then its callers. Names are
// printed in full: a bug report wants them exact.
func (m *mdWriter) details(summary string, lib, stack []Frame, opts RenderOptions) {
	m.printf("<details><summary>%s</summary>\n\n```text\n", summary)
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
// table of the suspects with their stacks, then the diffs of every
// breakpoint.
func RenderReportMarkdown(w io.Writer, r *Report, opts RenderOptions) error {
	if r == nil {
		r = &Report{}
	}
	m := &mdWriter{w: bufio.NewWriter(w)}
	if r.Title != "" {
		m.printf("# %s\n\n", mdCell(r.Title))
	}
	m.printf("## Suspects\n\n")
	if len(r.Suspects) == 0 {
		m.printf("No site grew steadily between hits.\n\n")
	} else {
		m.printf("Sites that grew between consecutive hits of a breakpoint: steadily (in most intervals, and still at the end), in steps that never went down (stepwise), or in the only interval there was (single-interval). Growth and blocks per hit are per hit of the breakpoint.\n\n")
		m.printf("| # | Site | Breakpoint | Growth/hit | Blocks/hit | Growing intervals | Pattern | Total growth |\n|---:|---|---|---:|---:|---:|---|---:|\n")
		for i, s := range r.Suspects {
			blocks := ""
			if s.BlocksPerHit != nil {
				blocks = formatBlocks(*s.BlocksPerHit)
			}
			site := siteCell(s.Frame)
			if s.Stacks > 1 {
				site += fmt.Sprintf(" (%d stacks)", s.Stacks)
			}
			m.printf("| %d | %s | %s | %s | %s | %d/%d | %s | %s |\n", i+1, site, mdCell(s.Breakpoint),
				FormatDelta(s.GrowthPerHit), blocks, s.GrowingIntervals, s.Intervals, s.Pattern, FormatDelta(s.TotalGrowth))
		}
		m.printf("\n")
		for i, s := range r.Suspects {
			m.details(fmt.Sprintf("%d. %s %s per hit", i+1, siteCell(s.Frame), FormatDelta(s.GrowthPerHit)), s.Library, s.Stack, opts)
		}
	}
	names, byName := r.sections()
	if len(r.Diffs) > 0 {
		m.printf("## Diffs\n\n")
	}
	for _, name := range names {
		diffs := byName[name]
		if len(diffs) == 0 {
			continue
		}
		label := sectionLabel(name)
		m.printf("### Breakpoint `%s`\n\n", strings.ReplaceAll(label, "`", "'"))
		for _, d := range diffs {
			title := stopTitle("Stop", d)
			m.printf("#### %s\n\n", title)
			m.diff(d, opts)
		}
	}
	return m.w.Flush()
}
