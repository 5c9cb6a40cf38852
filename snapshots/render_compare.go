package snapshots

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// RenderComparison writes c in format f: a table of the suspects with
// their status and growth per hit on each side, the suspects not
// compared, the notes, and a verdict line.
func RenderComparison(w io.Writer, c *Comparison, f Format) error {
	switch f {
	case FormatJSON:
		return writeAnalysisJSON(w, c)
	case FormatMarkdown:
		return renderComparisonMarkdown(w, c)
	case FormatText, "":
		return renderComparisonText(w, c)
	}
	return fmt.Errorf("unknown format %q", f)
}

func growthCell(g *int64) string {
	if g == nil {
		return "-"
	}
	return FormatDelta(*g)
}

// compareVerdict says in one sentence what the comparison shows.
func compareVerdict(c *Comparison) string {
	count := map[string]int{}
	for _, s := range c.Suspects {
		count["suspect "+s.Status]++
	}
	for _, f := range c.Findings {
		count["finding "+f.Status]++
	}
	var parts []string
	say := func(n int, noun, verb string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", countOf(n, noun, noun+"s"), verb))
		}
	}
	say(count["suspect persists"], "suspect", plural(count["suspect persists"], "persists", "persist"))
	say(count["finding persists"], "finding", plural(count["finding persists"], "persists", "persist"))
	say(count["suspect new"], "suspect", plural(count["suspect new"], "is new", "are new"))
	say(count["finding new"], "finding", plural(count["finding new"], "is new", "are new"))
	say(len(c.NotCompared), "suspect", "could not be compared")
	say(count["finding unjudged"], "finding", "could not be judged")
	if len(parts) > 0 {
		return "Not fixed: " + strings.Join(parts, ", ") + "."
	}
	var gone []string
	if n := count["suspect gone"]; n > 0 {
		gone = append(gone, countOf(n, "suspect", "suspects"))
	}
	if n := count["finding gone"]; n > 0 {
		gone = append(gone, countOf(n, "finding", "findings"))
	}
	if len(gone) == 0 {
		return "No suspect in either run."
	}
	return fmt.Sprintf("Fixed: %s gone, none new.", strings.Join(gone, " and "))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func renderComparisonText(w io.Writer, c *Comparison) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "snapctl compare: %s → %s\n\n", c.Before, c.After)
	if len(c.Suspects) > 0 {
		rows := [][]string{{"STATUS", "BEFORE/HIT", "AFTER/HIT", "BREAKPOINT", "SITE"}}
		for _, s := range c.Suspects {
			site := shortFrame(s.Frame)
			if s.BeforeFrame != nil {
				site += fmt.Sprintf(", line %d before", s.BeforeFrame.Line)
			}
			if s.BeforeMemcheck != nil || s.AfterMemcheck != nil {
				site += "; " + standingChange(s.BeforeMemcheck, s.AfterMemcheck)
			}
			rows = append(rows, []string{s.Status, growthCell(s.BeforeGrowthPerHit), growthCell(s.AfterGrowthPerHit),
				sectionLabel(s.Breakpoint), site})
		}
		width := make([]int, 4)
		for _, r := range rows {
			for i := range width {
				width[i] = max(width[i], utf8.RuneCountInString(r[i]))
			}
		}
		for _, r := range rows {
			fmt.Fprintf(bw, "  %-*s  %*s  %*s  %-*s  %s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], r[4])
		}
		bw.WriteString("\n")
	}
	if len(c.Findings) > 0 {
		rows := [][]string{{"STATUS", "FINDING", "BREAKPOINT", "BEFORE", "AFTER"}}
		for _, f := range c.Findings {
			rows = append(rows, []string{f.Status, f.Finding, sectionLabel(f.Breakpoint), dash(f.Before), dash(f.After)})
		}
		width := make([]int, 4)
		for _, r := range rows {
			for i := range width {
				width[i] = max(width[i], utf8.RuneCountInString(r[i]))
			}
		}
		for _, r := range rows {
			fmt.Fprintf(bw, "  %-*s  %-*s  %-*s  %-*s  %s\n", width[0], r[0], width[1], r[1], width[2], r[2], width[3], r[3], r[4])
		}
		for _, f := range c.Findings {
			if f.Reason != "" {
				fmt.Fprintf(bw, "  %s at breakpoint %s: %s\n", f.Finding, sectionLabel(f.Breakpoint), f.Reason)
			}
		}
		bw.WriteString("\n")
	}
	if len(c.NotCompared) > 0 {
		fmt.Fprintf(bw, "Not compared:\n")
		for _, s := range c.NotCompared {
			side, g := "before", s.BeforeGrowthPerHit
			if g == nil {
				side, g = "after", s.AfterGrowthPerHit
			}
			fmt.Fprintf(bw, "  %s at breakpoint %s, %s per hit %s: %s\n", shortFrame(s.Frame), sectionLabel(s.Breakpoint), growthCell(g), side, s.Reason)
		}
		bw.WriteString("\n")
	}
	for _, n := range c.Notes {
		fmt.Fprintf(bw, "note: %s\n", n)
	}
	if len(c.Notes) > 0 {
		bw.WriteString("\n")
	}
	fmt.Fprintf(bw, "%s\n", compareVerdict(c))
	return bw.Flush()
}

func renderComparisonMarkdown(w io.Writer, c *Comparison) error {
	m := &mdWriter{w: bufio.NewWriter(w)}
	m.printf("# snapctl compare\n\n- Before: `%s`\n- After: `%s`\n\n**%s**\n\n", strings.ReplaceAll(c.Before, "`", "'"),
		strings.ReplaceAll(c.After, "`", "'"), mdCell(compareVerdict(c)))
	if len(c.Suspects) > 0 {
		m.printf("| Status | Before/hit | After/hit | Breakpoint | Site |\n|---|---:|---:|---|---|\n")
		for _, s := range c.Suspects {
			site := siteCell(s.Frame)
			if s.BeforeFrame != nil {
				site += fmt.Sprintf(", line %d before", s.BeforeFrame.Line)
			}
			m.printf("| %s | %s | %s | %s | %s |\n", s.Status, growthCell(s.BeforeGrowthPerHit), growthCell(s.AfterGrowthPerHit),
				mdCell(sectionLabel(s.Breakpoint)), site)
		}
		m.printf("\n")
	}
	if len(c.Findings) > 0 {
		m.printf("| Status | Finding | Breakpoint | Before | After | Why |\n|---|---|---|---|---|---|\n")
		for _, f := range c.Findings {
			m.printf("| %s | %s | %s | %s | %s | %s |\n", f.Status, f.Finding, mdCell(sectionLabel(f.Breakpoint)), mdCell(dash(f.Before)), mdCell(dash(f.After)), mdCell(f.Reason))
		}
		m.printf("\n")
	}
	if len(c.NotCompared) > 0 {
		m.printf("Not compared:\n\n")
		for _, s := range c.NotCompared {
			m.printf("- %s at breakpoint %s: %s\n", siteCell(s.Frame), mdCell(sectionLabel(s.Breakpoint)), mdCell(s.Reason))
		}
		m.printf("\n")
	}
	for _, n := range c.Notes {
		m.printf("_%s_\n\n", mdCell(n))
	}
	return m.w.Flush()
}

// dash is s, or "-" when empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// standingChange says how a compared site's blocks stood on each side
// (memcheck): "lost +640 B/hit → none".
func standingChange(before, after *Standing) string {
	return standingCell(before) + " → " + standingCell(after)
}

func standingCell(st *Standing) string {
	if st == nil {
		return "none"
	}
	var parts []string
	if lost := st.LostPerHit(); lost != 0 {
		parts = append(parts, "lost "+FormatDelta(lost)+"/hit")
	}
	if p := st.PossiblyLost.BytesPerHit; p != 0 {
		parts = append(parts, "possibly lost "+FormatDelta(p)+"/hit")
	}
	if r := st.StillReachable.BytesPerHit; r != 0 {
		held := ""
		if st.HeldBy != nil && st.HeldBy.Root != nil {
			held = " held by " + st.HeldBy.Root.Name
		}
		parts = append(parts, "reachable "+FormatDelta(r)+"/hit"+held)
	}
	if len(parts) == 0 {
		return "not growing"
	}
	return strings.Join(parts, ", ")
}
