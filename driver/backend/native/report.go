package native

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/sites"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// emptyReport is the analysis for the renderers of a run without sites.
func emptyReport(title string, order []string) *snapshots.Report {
	return &snapshots.Report{Title: title, Breakpoints: order, Diffs: []*snapshots.Diff{}, Suspects: []snapshots.Suspect{}, Intervals: []snapshots.IntervalCount{}}
}

// HTML leads report.html with how a run that did not complete ended and
// the verdicts, drawn as verdicts above the facts, as the other reports
// lead with them; it draws sites only for a run with native.sites, and
// says so where those recorded nothing to compare.
func (*Backend) HTML(opts *snapshots.HTMLOptions, o *backend.Outcome) {
	m := o.Manifest
	opts.Facts = backend.Facts(o, func(b runjson.BreakpointSummary) string { return nativeBreakpoint(m, b) })
	lines := nativeVerdicts(m)
	if backend.MeasuredNothing(m) {
		opts.Lead = []snapshots.LeadLine{{Text: lines[0]}}
		return
	}
	off := 0
	if m.Status != runjson.StatusCompleted {
		off = 1
	}
	for i, l := range lines {
		kind := ""
		if j := i - off; i >= off && j < len(m.Verdicts) {
			switch m.Verdicts[j].Verdict {
			case runjson.VerdictFlat:
				kind = "clean"
			case runjson.VerdictTooFewStops:
			default:
				kind = "leak"
			}
		}
		opts.Lead = append(opts.Lead, snapshots.LeadLine{Text: l, Kind: kind})
	}
	if hasSites(m) {
		opts.SitesUnmeasured = sitesUnmeasured(m, o.Report)
		opts.Notes = append(opts.Notes, sitesNote(m))
		sites.HTMLNotes(opts, o)
		return
	}
	opts.NoSites = true
	opts.Notes = append(opts.Notes,
		fmt.Sprintf("run.json's diffs hold the %s between consecutive measurements of a breakpoint (and within around_call's calls) as memory_delta; the charts draw every measurement.", backend.Plural(o.Diffs, "change")),
		"The native backend measures resident memory and glibc's allocator at each stop; per-site diffs are massif's job: rerun with --backend massif for the call sites, or with --sites for them at native speed.")
}

// sitesUnmeasured says why a --sites run's per-site snapshots hold nothing
// to compare: the analysis made no diff of two of them (r's interval
// counts). "" when it did.
func sitesUnmeasured(m *runjson.Manifest, r *snapshots.Report) string {
	if r != nil {
		for _, c := range r.Intervals {
			if c.Diffs > 0 {
				return ""
			}
		}
	}
	// The verdicts count each breakpoint's stops without a per-site
	// snapshot; a run's events may not be in memory any more (they are
	// spooled to run.json as they come).
	failed, events := 0, 0
	for _, v := range m.Verdicts {
		failed += v.Figures.SitesMissingStops
	}
	for _, e := range m.Events {
		if e.Kind == runjson.EventSitesFailed {
			events++
		}
	}
	failed = max(failed, events)
	if failed > 0 {
		return fmt.Sprintf("heaptrack's recording took no two per-site snapshots of a breakpoint to compare (%s took none; see run.json's events)", backend.Plural(failed, "stop"))
	}
	return "heaptrack's recording took no two per-site snapshots of a breakpoint to compare"
}

// hasSites reports whether the run recorded its allocations per site
// (native.sites): its reports then hold the sites' sections, as
// massif's do.
func hasSites(m *runjson.Manifest) bool { return m.Native != nil && m.Native.Sites }

// sitesNote says where a sites run's per-site figures come from, and,
// for an attach, what the blocks from before it mean.
func sitesNote(m *runjson.Manifest) string {
	note := "Per-site figures are heaptrack's record of every allocation and free, cut at each stop: bytes as the program requested them and live blocks, as massif counts them."
	if m.Native.AttachedPid != 0 {
		note += " heaptrack was injected when snapctl attached: blocks allocated before are not known, so a free of one is not counted, and a site's growth is measured from the attach on."
	}
	return note
}

// massifNote is what the native backend's reports say instead of site
// tables.
const massifNote = MassifNote

// MassifNote is what the native backend's reports say instead of site
// tables.
const MassifNote = "Per-site diffs: rerun with --sites (heaptrack, at native speed) or with --backend massif to see which call sites hold the memory."

// nativeVerdicts are the lines the native backend's reports lead with. A
// run that did not complete says so first: its verdicts are from the
// stops taken before it ended.
func nativeVerdicts(m *runjson.Manifest) []string {
	var out []string
	prefix := "verdict: "
	if m.Status != runjson.StatusCompleted {
		lead := fmt.Sprintf("run %s", m.Status)
		switch {
		case m.Error == "" || m.Error == "run stopped: "+string(m.Status):
			// "run interrupted", said once.
		case strings.HasPrefix(m.Error, "run stopped"):
			lead = m.Error // "run stopped after 10m: timeout expired"
		default:
			lead += ": " + m.Error
		}
		out = append(out, lead)
		prefix = "verdict of the stops taken before the run ended: "
	}
	for _, v := range m.Verdicts {
		out = append(out, prefix+v.Sentence)
	}
	if k := keeper(m); k != "" && len(m.Verdicts) > 0 {
		out = append(out, k)
	}
	switch {
	case backend.MeasuredNothing(m):
		out = []string{"verdict: nothing measured: " + backend.WhyNothing(m)}
	case len(m.Verdicts) == 0:
		out = append(out, prefix+fmt.Sprintf("no breakpoint stopped twice: one measurement shows no growth, and a verdict needs at least %d stops", minTrendStops))
	}
	if m.ExitCode != nil && *m.ExitCode != 0 {
		out[0] += fmt.Sprintf(" (exit %d: %s)", *m.ExitCode, m.ExitReason)
	}
	return out
}

// nativeBreakpoint says what one breakpoint's stops measured: hits,
// measurements, the verdict's findings, arenas and what malloc_trim(0)
// released.
func nativeBreakpoint(m *runjson.Manifest, b runjson.BreakpointSummary) string {
	out := fmt.Sprintf("%s, %s", backend.Plural(b.Hits, "hit"), backend.Plural(b.Snapshots, "measurement"))
	for _, v := range m.Verdicts {
		if v.Breakpoint != b.Name {
			continue
		}
		out += "; " + v.Verdict
		if len(v.Findings) > 1 {
			out += " (also " + strings.Join(v.Findings[1:], ", ") + ")"
		}
		if a := v.Figures.Arenas; a != nil {
			out += "; " + backend.Plural(*a, "arena")
		}
		if tr := v.Figures.TrimReleased; tr != nil {
			// Resident memory can rise while malloc_trim(0) runs: that is
			// nothing released, not a negative release.
			out += fmt.Sprintf("; malloc_trim(0) released up to %s at a stop, %s in all", snapshots.FormatBytes(max(*tr, 0)), snapshots.FormatBytes(max(deref(v.Figures.TrimReleasedTotal), 0)))
		}
		if n := v.Figures.UnmeasuredStops; n > 0 {
			out += fmt.Sprintf("; %d of %d stops without allocator figures", n, v.Figures.Stops)
		}
		if n := v.Figures.SitesMissingStops; n > 0 {
			out += fmt.Sprintf("; %d of %d stops without a per-site snapshot", n, v.Figures.Stops)
		}
	}
	if len(m.Breakpoints) > 1 || len(m.Phases) > 0 {
		// Which phase keeps memory: each breakpoint's own figures.
		if ph := phaseOf(m, b.Name); ph != "" {
			out += "; " + ph
		}
	}
	return out
}

// Text is the terminal report of the native backend: how a run
// that did not complete ended, the verdicts, then how the run ended and
// each breakpoint's stops.
func (*Backend) Text(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	bw := bufio.NewWriter(w)
	m := o.Manifest
	pw := snapshots.PrintableWriter(bw)
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(pw, "%s\n", v)
	}
	fmt.Fprintf(pw, "%s: %s\n", command(m), backend.CommandLine(m.Target.Argv))
	fmt.Fprintf(pw, "status: %s%s\n", m.Status, backend.ExitNote(m))
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(pw, "native.trim_probe: %s\n", trimSaid(m))
	}
	for _, b := range m.Breakpoints {
		fmt.Fprintf(pw, "breakpoint %s (%s): %s\n", b.Name, b.Location, nativeBreakpoint(m, b))
	}
	if !hasSites(m) {
		fmt.Fprintf(pw, "run directory: %s\n\n%s\n", o.Dir, massifNote)
		return bw.Flush()
	}
	fmt.Fprintf(pw, "run directory: %s\n\n", o.Dir)
	if m.Native.AttachedPid != 0 {
		fmt.Fprintf(pw, "%s\n\n", sitesNote(m))
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return sites.TextSections(w, o, opts)
}

// Markdown is report.md of the native backend.
func (*Backend) Markdown(w io.Writer, o *backend.Outcome) error {
	bw := bufio.NewWriter(w)
	m := o.Manifest
	pw := snapshots.PrintableWriter(bw) // see Text
	fmt.Fprintf(pw, "# %s\n\n", command(m))
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(pw, "**%s**\n\n", v)
	}
	fmt.Fprintf(pw, "- Command: `%s`\n", backend.CommandLine(m.Target.Argv))
	fmt.Fprintf(pw, "- Status: **%s**%s\n", m.Status, backend.ExitNote(m))
	if m.Error != "" {
		fmt.Fprintf(pw, "- Error: %s\n", m.Error)
	}
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(pw, "- native.trim_probe: %s\n", trimSaid(m))
	}
	fmt.Fprintf(pw, "- Stops: %d\n\n", o.Stops)
	fmt.Fprintf(pw, "| Breakpoint | Verdict | Findings | Stops | RSS growth | In-use heap growth | Free heap growth | Arenas | Released by malloc_trim (most at a stop, in all) |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
	opt := func(p *int64) string {
		if p == nil {
			return "n/a"
		}
		return snapshots.FormatDelta(*p)
	}
	for _, v := range m.Verdicts {
		f := v.Figures
		arenas, trim := "n/a", "n/a"
		if f.Arenas != nil {
			arenas = strconv.Itoa(*f.Arenas)
		}
		if f.TrimReleased != nil {
			trim = snapshots.FormatBytes(*f.TrimReleased) + ", " + snapshots.FormatBytes(deref(f.TrimReleasedTotal))
		}
		findings := strings.Join(v.Findings, ", ")
		if findings == "" {
			findings = "none"
		}
		fmt.Fprintf(pw, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", v.Breakpoint, v.Verdict, findings, f.Stops,
			snapshots.FormatDelta(f.RSSGrowth), opt(f.InUseGrowth), opt(f.FreeGrowth), arenas, trim)
	}
	if len(m.Breakpoints) > 1 || len(m.Phases) > 0 {
		fmt.Fprintf(pw, "\nPer breakpoint (which phase keeps memory):\n\n")
		for _, b := range m.Breakpoints {
			fmt.Fprintf(pw, "- `%s` (%s): %s\n", b.Name, b.Location, nativeBreakpoint(m, b))
		}
	}
	fmt.Fprintf(pw, "\nGrowths are trends over all of a breakpoint's stops (docs/native.md, \"Native verdicts\"); run.json's `diffs` hold the %s between consecutive measurements.\n", backend.Plural(o.Diffs, "change"))
	if !hasSites(m) {
		fmt.Fprintf(pw, "\n%s\n", massifNote)
		return bw.Flush()
	}
	fmt.Fprintf(pw, "\n%s\n\n", sitesNote(m))
	if why := sitesUnmeasured(m, o.Report); why != "" {
		// "No site grew" would say sites were measured.
		fmt.Fprintf(pw, "## Suspects\n\nNo per-site figures: %s.\n", why)
		return bw.Flush()
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return sites.MarkdownSections(w, o)
}

// command names what made the run: snapctl attach, or snapctl run with
// the native backend.
func command(m *runjson.Manifest) string {
	if m.Native != nil && m.Native.AttachedPid != 0 {
		return fmt.Sprintf("snapctl attach %d (native)", m.Native.AttachedPid)
	}
	return "snapctl run (native)"
}

// trimSaid says what native.trim_probe did at the stops: glibc's
// malloc_trim(0) does not touch jemalloc's heap, so under jemalloc it
// was not called.
func trimSaid(m *runjson.Manifest) string {
	if m.Native != nil && isJemalloc(m.Native.Allocator) && !m.Native.Sites {
		return "on, not applied (the program allocates with jemalloc, whose heap malloc_trim(0) does not touch)"
	}
	return "on (every stop called malloc_trim(0) after measuring)"
}
