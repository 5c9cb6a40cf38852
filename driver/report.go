package driver

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/breakpoints"
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
	fmt.Fprintf(bw, "%s\n", verdict(res))
	fmt.Fprintf(bw, "snapctl run: %s\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(bw, "status: %s%s\n", m.Status, exitNote(m))
	for _, b := range m.Breakpoints {
		fmt.Fprintf(bw, "breakpoint %s (%s): %s, %s%s\n", b.Name, b.Location, plural(b.Hits, "hit"), plural(b.Snapshots, "snapshot"), unchangedNote(b))
	}
	fmt.Fprintf(bw, "run directory: %s\n\n", res.Dir)
	if err := bw.Flush(); err != nil {
		return err
	}
	if res.Report == nil {
		return nil
	}
	if err := snapshots.RenderReportText(w, res.Report, opts); err != nil {
		return err
	}
	more := moreDiffs(res)
	if opts.MaxDiffs > 0 && opts.MaxDiffs < shownDiffs && res.Diffs > opts.MaxDiffs {
		more = fmt.Sprintf("Shown: the %d largest heap changes of each breakpoint; report.md has up to %d, run.json all %s.",
			opts.MaxDiffs, shownDiffs, plural(res.Diffs, "diff"))
	}
	if more != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", more)
		return err
	}
	return nil
}

// verdict is the report's first line: whether sites grew, the fastest
// suspect, and the exit code when it is not 0.
func verdict(res *Result) string {
	m := res.Manifest
	var v string
	switch sus := suspectsOf(res); {
	case len(sus) == 0 && m.Status == StatusCompleted:
		v = "verdict: no leak found: no site grew between hits"
	case len(sus) == 0:
		v = fmt.Sprintf("verdict: no leak found in what ran (%s)", m.Status)
	default:
		s := sus[0]
		v = fmt.Sprintf("verdict: %s; fastest %s %s per hit at breakpoint %s", plural(len(sus), "suspect"),
			snapshots.FrameString(s.Frame), snapshots.FormatDelta(s.GrowthPerHit), s.Breakpoint)
	}
	if m.ExitCode != nil && *m.ExitCode != 0 {
		v += fmt.Sprintf(" (exit %d: %s)", *m.ExitCode, m.ExitReason)
	}
	return v
}

func suspectsOf(res *Result) []snapshots.Suspect {
	if res.Report == nil {
		return nil
	}
	return res.Report.Suspects
}

// moreDiffs says how many diffs the report leaves out, or "".
func moreDiffs(res *Result) string {
	if res.Report == nil || res.Diffs <= len(res.Report.Diffs) {
		return ""
	}
	n := res.Diffs - len(res.Report.Diffs)
	return fmt.Sprintf("%s more in run.json (shown: the %d largest heap changes of each breakpoint and kind).",
		plural(n, "diff"), shownDiffs)
}

// unchangedNote says how many snapshots keep_snapshots: changed dropped.
func unchangedNote(b BreakpointSummary) string {
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
		return breakpoints.DefaultReportDepth
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
		fmt.Fprintf(bw, "# snapctl run\n\n")
		fmt.Fprintf(bw, "- Command: `%s`\n", strings.Join(m.Target.Argv, " "))
		fmt.Fprintf(bw, "- Status: **%s**%s\n", m.Status, exitNote(m))
		if m.Error != "" {
			fmt.Fprintf(bw, "- Error: %s\n", m.Error)
		}
		fmt.Fprintf(bw, "- Stops: %d\n\n", res.Stops)
		fmt.Fprintf(bw, "| Breakpoint | Location | Hits | Snapshots |\n|---|---|---:|---:|\n")
		for _, b := range m.Breakpoints {
			fmt.Fprintf(bw, "| %s | `%s` | %d | %d%s |\n", b.Name, b.Location, b.Hits, b.Snapshots, unchangedNote(b))
		}
		fmt.Fprintln(bw)
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

func exitNote(m *Manifest) string {
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
func nativeVerdicts(m *Manifest) []string {
	var out []string
	prefix := "verdict: "
	if m.Status != StatusCompleted {
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
	if len(m.Verdicts) == 0 {
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
func nativeBreakpoint(m *Manifest, b BreakpointSummary) string {
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
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(bw, "%s\n", v)
	}
	fmt.Fprintf(bw, "snapctl run (native): %s\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(bw, "status: %s%s\n", m.Status, exitNote(m))
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(bw, "native.trim_probe: on (every stop called malloc_trim(0) after measuring)\n")
	}
	for _, b := range m.Breakpoints {
		fmt.Fprintf(bw, "breakpoint %s (%s): %s\n", b.Name, b.Location, nativeBreakpoint(m, b))
	}
	fmt.Fprintf(bw, "run directory: %s\n\n%s\n", res.Dir, massifNote)
	return bw.Flush()
}

// writeNativeMarkdown is report.md of the native backend.
func writeNativeMarkdown(bw *bufio.Writer, res *Result) error {
	m := res.Manifest
	fmt.Fprintf(bw, "# snapctl run (native)\n\n")
	for _, v := range nativeVerdicts(m) {
		fmt.Fprintf(bw, "**%s**\n\n", v)
	}
	fmt.Fprintf(bw, "- Command: `%s`\n", strings.Join(m.Target.Argv, " "))
	fmt.Fprintf(bw, "- Status: **%s**%s\n", m.Status, exitNote(m))
	if m.Error != "" {
		fmt.Fprintf(bw, "- Error: %s\n", m.Error)
	}
	if m.Native != nil && m.Native.TrimProbe {
		fmt.Fprintf(bw, "- native.trim_probe: on (every stop called malloc_trim(0) after measuring)\n")
	}
	fmt.Fprintf(bw, "- Stops: %d\n\n", res.Stops)
	fmt.Fprintf(bw, "| Breakpoint | Verdict | Findings | Stops | RSS growth | In-use heap growth | Free heap growth | Arenas | Released by malloc_trim (most at a stop, in all) |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n")
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
		fmt.Fprintf(bw, "| %s | %s | %s | %d | %s | %s | %s | %s | %s |\n", v.Breakpoint, v.Verdict, findings, f.Stops,
			snapshots.FormatDelta(f.RSSGrowth), opt(f.InUseGrowth), opt(f.FreeGrowth), arenas, trim)
	}
	fmt.Fprintf(bw, "\nGrowths are trends over all of a breakpoint's stops (README, \"Native verdicts\"); run.json's `diffs` hold the %s between consecutive measurements.\n", plural(res.Diffs, "change"))
	fmt.Fprintf(bw, "\n%s\n", massifNote)
	return bw.Flush()
}
