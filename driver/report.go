package driver

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// WriteText prints the run's report for the terminal: the verdict, how the
// run ended, the stops per breakpoint, then the suspects and the diffs with the
// largest heap changes as the snapshots package renders them, and how many
// more diffs run.json holds.
func WriteText(w io.Writer, res *Result, opts snapshots.RenderOptions) error {
	bw := bufio.NewWriter(w)
	m := res.Manifest
	if m.Backend == BackendNative {
		return writeNativeText(bw, res)
	}
	// The program's arguments and the crash's frame may hold anything:
	// control characters are escaped (snapshots.Printable).
	pw := snapshots.PrintableWriter(bw)
	fmt.Fprintf(pw, "%s\n", verdict(res))
	fmt.Fprintf(pw, "snapctl run: %s\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(pw, "status: %s%s\n", m.Status, exitNote(m))
	for _, b := range m.Breakpoints {
		fmt.Fprintf(pw, "breakpoint %s (%s): %s, %s%s\n", b.Name, b.Location, plural(b.Hits, "hit"), plural(b.Snapshots, "snapshot"), unchangedNote(b))
	}
	fmt.Fprintf(pw, "run directory: %s\n\n", res.Dir)
	if err := bw.Flush(); err != nil {
		return err
	}
	if res.Report == nil || measuredNothing(m) {
		return nil
	}
	if err := snapshots.RenderReportText(w, res.Report, opts); err != nil {
		return err
	}
	if more := moreText(res, opts); more != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", more)
		return err
	}
	return nil
}

// moreText is the terminal report's last line when it leaves out diffs in
// which a site changed: where to find them. It shows some only at the
// breakpoints with a suspect, at most opts.MaxDiffs each.
func moreText(res *Result, opts snapshots.RenderOptions) string {
	changed := changedDiffs(res)
	if changed == 0 {
		return ""
	}
	suspected := make(map[string]bool)
	for _, s := range suspectsOf(res) {
		suspected[s.Breakpoint] = true
	}
	perBreakpoint := make(map[string]int)
	for _, d := range res.Report.Diffs {
		if suspected[d.Breakpoint] && len(d.Sites) > 0 {
			perBreakpoint[d.Breakpoint]++
		}
	}
	shown := 0
	for _, n := range perBreakpoint {
		if opts.MaxDiffs > 0 {
			n = min(n, opts.MaxDiffs)
		}
		shown += n
	}
	if shown >= changed {
		return ""
	}
	lead := "Shown: none"
	if shown > 0 {
		lead = fmt.Sprintf("Shown: %d", shown)
	}
	return fmt.Sprintf("%s of the %s in which a site changed; report.md has up to %d of each breakpoint and kind, run.json all.",
		lead, plural(changed, "diff"), shownDiffs)
}

// changedDiffs counts the run's diffs in which a site changed.
func changedDiffs(res *Result) int {
	if res.Report == nil {
		return 0
	}
	if res.Report.Intervals == nil {
		return res.Diffs
	}
	n := 0
	for _, c := range res.Report.Intervals {
		n += c.Diffs - c.Unchanged
	}
	return n
}

// verdict is the report's first line: whether sites grew, the fastest
// suspect, and the exit code when it is not 0.
func verdict(res *Result) string {
	m := res.Manifest
	var v string
	switch sus := suspectsOf(res); {
	case measuredNothing(m):
		v = "verdict: nothing measured: " + whyNothing(m)
	case len(sus) == 0 && m.Status == runjson.StatusCompleted:
		v = "verdict: no leak found: no site grew between hits"
	case len(sus) == 0:
		v = fmt.Sprintf("verdict: no leak found in what ran (%s)", m.Status)
	default:
		s := sus[0]
		v = fmt.Sprintf("verdict: %s; fastest %s %s per hit%s at breakpoint %s", plural(len(sus), "suspect"),
			snapshots.ShortFrame(s.Frame), snapshots.FormatDelta(s.GrowthPerHit), blocksNote(s), s.Breakpoint)
	}
	if m.ExitCode != nil && *m.ExitCode != 0 {
		v += fmt.Sprintf(" (exit %d: %s)", *m.ExitCode, m.ExitReason)
	}
	return v
}

// blocksNote gives a suspect's blocks per hit and their size, " (2 blocks
// of 50 B)", when it gains at least one block per hit: the size is what
// names the object.
func blocksNote(s snapshots.Suspect) string {
	if s.BlocksPerHit == nil || *s.BlocksPerHit < 1 || s.BytesPerBlock == nil {
		return ""
	}
	n := strconv.FormatFloat(*s.BlocksPerHit, 'f', -1, 64)
	word := "blocks"
	if *s.BlocksPerHit == 1 {
		word = "block"
	}
	return fmt.Sprintf(" (%s %s of %s)", n, word, snapshots.FormatBytes(*s.BytesPerBlock))
}

func suspectsOf(res *Result) []snapshots.Suspect {
	if res.Report == nil {
		return nil
	}
	return res.Report.Suspects
}

// moreDiffs says how many diffs in which a site changed report.md and
// report.html leave out, or "".
func moreDiffs(res *Result) string {
	if res.Report == nil {
		return ""
	}
	n := changedDiffs(res) - len(res.Report.Diffs)
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("%s more in run.json (shown: the %d largest heap changes of each breakpoint and kind in which a site changed).",
		plural(n, "diff"), shownDiffs)
}

// unchangedNote says how many snapshots keep_snapshots: changed dropped.
func unchangedNote(b runjson.BreakpointSummary) string {
	if b.Unchanged == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d unchanged, not kept)", b.Unchanged)
}

// MaxFrames is the number of callers shown per stack in the run's reports:
// the plan's report.depth (0 shows whole stacks), or its default when the
// Result has no plan.
func (r *Result) MaxFrames() int {
	if r.Plan == nil {
		return plan.DefaultReportDepth
	}
	return r.Plan.Report.Depth
}

// writeReport writes report.md: a summary of the run, then the analysis
// rendered by the snapshots package. It is written through a temporary file
// and a rename, so that a report.md that exists is complete.
func writeReport(path string, res *Result) error {
	return writeFileAtomicFunc(path, func(w io.Writer) error {
		bw := bufio.NewWriter(w)
		m := res.Manifest
		if m.Backend == BackendNative {
			return writeNativeMarkdown(bw, res)
		}
		pw := snapshots.PrintableWriter(bw) // see WriteText
		fmt.Fprintf(pw, "# snapctl run\n\n")
		fmt.Fprintf(pw, "- Command: `%s`\n", strings.Join(m.Target.Argv, " "))
		fmt.Fprintf(pw, "- Status: **%s**%s\n", m.Status, exitNote(m))
		if m.Error != "" {
			fmt.Fprintf(pw, "- Error: %s\n", m.Error)
		}
		fmt.Fprintf(pw, "- Stops: %d\n\n", res.Stops)
		fmt.Fprintf(pw, "| Breakpoint | Location | Hits | Snapshots |\n|---|---|---:|---:|\n")
		for _, b := range m.Breakpoints {
			fmt.Fprintf(pw, "| %s | `%s` | %d | %d%s |\n", b.Name, b.Location, b.Hits, b.Snapshots, unchangedNote(b))
		}
		fmt.Fprintln(pw)
		if measuredNothing(m) {
			fmt.Fprintf(pw, "**Nothing measured:** %s.\n", whyNothing(m))
			return bw.Flush()
		}
		if res.Report != nil {
			r := *res.Report
			r.Title = ""
			if err := snapshots.RenderReportMarkdown(bw, &r, snapshots.RenderOptions{MaxFrames: res.MaxFrames()}); err != nil {
				return err
			}
			if more := moreDiffs(res); more != "" {
				fmt.Fprintf(bw, "%s\n", more)
			}
		}
		return bw.Flush()
	})
}

func exitNote(m *runjson.Manifest) string {
	switch {
	case m.Target.Signal != nil:
		note := fmt.Sprintf(" (target killed by %s", *m.Target.Signal)
		if c := m.Target.Crash; c != nil {
			if f := userFrame(c.Backtrace); f != nil {
				note += " in " + f.String()
			}
		}
		return note + ")"
	case m.Target.ExitCode != nil:
		return fmt.Sprintf(" (target exit code %d)", *m.Target.ExitCode)
	}
	return ""
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// massifNote is what the native backend's reports say instead of site
// tables.
const massifNote = "Per-site diffs are the massif backend's job: rerun with --backend massif to see which call sites hold the memory."

// nativeVerdicts are the lines the native backend's reports lead with. A
// run that did not complete says so first: its verdicts are from the
// stops taken before it ended.
func nativeVerdicts(m *runjson.Manifest) []string {
	var out []string
	prefix := "verdict: "
	if m.Status != runjson.StatusCompleted {
		lead := fmt.Sprintf("run %s", m.Status)
		if m.Error != "" {
			lead += ": " + m.Error
		}
		out = append(out, lead)
		prefix = "verdict of the stops taken before the run ended: "
	}
	for _, v := range m.Verdicts {
		out = append(out, prefix+v.Sentence)
	}
	switch {
	case measuredNothing(m):
		out = []string{"verdict: nothing measured: " + whyNothing(m)}
	case len(m.Verdicts) == 0:
		out = append(out, prefix+"no breakpoint stopped twice: nothing to compare")
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
	out := fmt.Sprintf("%s, %s", plural(b.Hits, "hit"), plural(b.Snapshots, "measurement"))
	for _, v := range m.Verdicts {
		if v.Breakpoint != b.Name {
			continue
		}
		out += "; " + v.Verdict
		if len(v.Findings) > 1 {
			out += " (also " + strings.Join(v.Findings[1:], ", ") + ")"
		}
		if a := v.Figures.Arenas; a != nil {
			out += "; " + plural(*a, "arena")
		}
		if tr := v.Figures.TrimReleased; tr != nil {
			out += fmt.Sprintf("; malloc_trim(0) released up to %s at a stop, %s in all", snapshots.FormatBytes(*tr), snapshots.FormatBytes(deref(v.Figures.TrimReleasedTotal)))
		}
	}
	return out
}

// writeNativeText is the terminal report of the native backend: how a run
// that did not complete ended, the verdicts, then how the run ended and
// each breakpoint's stops.
func writeNativeText(bw *bufio.Writer, res *Result) error {
	m := res.Manifest
	pw := snapshots.PrintableWriter(bw)
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(pw, "%s\n", v)
	}
	fmt.Fprintf(pw, "snapctl run (native): %s\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(pw, "status: %s%s\n", m.Status, exitNote(m))
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(pw, "native.trim_probe: on (every stop called malloc_trim(0) after measuring)\n")
	}
	for _, b := range m.Breakpoints {
		fmt.Fprintf(pw, "breakpoint %s (%s): %s\n", b.Name, b.Location, nativeBreakpoint(m, b))
	}
	fmt.Fprintf(pw, "run directory: %s\n\n%s\n", res.Dir, massifNote)
	return bw.Flush()
}

// writeNativeMarkdown is report.md of the native backend.
func writeNativeMarkdown(bw *bufio.Writer, res *Result) error {
	m := res.Manifest
	pw := snapshots.PrintableWriter(bw) // see WriteText
	fmt.Fprintf(pw, "# snapctl run (native)\n\n")
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(pw, "**%s**\n\n", v)
	}
	fmt.Fprintf(pw, "- Command: `%s`\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(pw, "- Status: **%s**%s\n", m.Status, exitNote(m))
	if m.Error != "" {
		fmt.Fprintf(pw, "- Error: %s\n", m.Error)
	}
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(pw, "- native.trim_probe: on (every stop called malloc_trim(0) after measuring)\n")
	}
	fmt.Fprintf(pw, "- Stops: %d\n\n", res.Stops)
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
	fmt.Fprintf(pw, "\nGrowths are trends over all of a breakpoint's stops (docs/native.md, \"Native verdicts\"); run.json's `diffs` hold the %s between consecutive measurements.\n", plural(res.Diffs, "change"))
	fmt.Fprintf(pw, "\n%s\n", massifNote)
	return bw.Flush()
}
