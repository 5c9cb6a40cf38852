package sites

import (
	"bufio"
	"fmt"
	"io"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Text prints the terminal report of a run with call sites: the verdict,
// how the run ended, the stops per breakpoint, then the sites' sections
// (TextSections).
func Text(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	bw := bufio.NewWriter(w)
	m := o.Manifest
	// The program's arguments and the crash's frame may hold anything:
	// control characters are escaped (snapshots.Printable).
	pw := snapshots.PrintableWriter(bw)
	fmt.Fprintf(pw, "%s\n", Verdict(o))
	fmt.Fprintf(pw, "snapctl run: %s\n", backend.CommandLine(m.Target.Argv))
	fmt.Fprintf(pw, "status: %s%s\n", m.Status, backend.ExitNote(m))
	for _, bp := range m.Breakpoints {
		fmt.Fprintf(pw, "breakpoint %s (%s): %s, %s%s\n", bp.Name, bp.Location, backend.Plural(bp.Hits, "hit"), backend.Plural(bp.Snapshots, "snapshot"), backend.UnchangedNote(bp))
	}
	fmt.Fprintf(pw, "run directory: %s\n\n", o.Dir)
	if err := bw.Flush(); err != nil {
		return err
	}
	return TextSections(w, o, opts)
}

// Markdown writes report.md: a summary of the run, then the sites'
// sections (MarkdownSections).
func Markdown(w io.Writer, o *backend.Outcome) error {
	bw := bufio.NewWriter(w)
	m := o.Manifest
	pw := snapshots.PrintableWriter(bw) // see Text
	fmt.Fprintf(pw, "# snapctl run\n\n")
	fmt.Fprintf(pw, "- Command: `%s`\n", backend.CommandLine(m.Target.Argv))
	fmt.Fprintf(pw, "- Status: **%s**%s\n", m.Status, backend.ExitNote(m))
	if m.Error != "" {
		fmt.Fprintf(pw, "- Error: %s\n", m.Error)
	}
	fmt.Fprintf(pw, "- Stops: %d\n\n", o.Stops)
	fmt.Fprintf(pw, "| Breakpoint | Location | Hits | Snapshots |\n|---|---|---:|---:|\n")
	for _, bp := range m.Breakpoints {
		fmt.Fprintf(pw, "| %s | `%s` | %d | %d%s |\n", bp.Name, bp.Location, bp.Hits, bp.Snapshots, backend.UnchangedNote(bp))
	}
	fmt.Fprintln(pw)
	if backend.MeasuredNothing(m) {
		fmt.Fprintf(pw, "**Nothing measured:** %s.\n", backend.WhyNothing(m))
		return bw.Flush()
	}
	if err := MarkdownSections(bw, o); err != nil {
		return err
	}
	return bw.Flush()
}

// HTML gives report.html its facts and notes: how many diffs it leaves
// out.
func HTML(opts *snapshots.HTMLOptions, o *backend.Outcome) {
	opts.Facts = backend.Facts(o, func(bp runjson.BreakpointSummary) string {
		return fmt.Sprintf("%s, %s%s", backend.Plural(bp.Hits, "hit"), backend.Plural(bp.Snapshots, "snapshot"), backend.UnchangedNote(bp))
	})
	HTMLNotes(opts, o)
}
