package sites

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// TextSections prints the per-site sections of the terminal report, for
// a backend that printed its run's header first: the suspects and the
// diffs with the largest heap changes as the snapshots package renders
// them, and how many more diffs run.json holds. A run without a report,
// or that measured nothing, has none.
func TextSections(w io.Writer, o *backend.Outcome, opts snapshots.RenderOptions) error {
	if o.Report == nil || backend.MeasuredNothing(o.Manifest) {
		return nil
	}
	if err := snapshots.RenderReportText(w, o.Report, opts); err != nil {
		return err
	}
	if more := moreText(o, opts); more != "" {
		_, err := fmt.Fprintf(w, "\n%s\n", more)
		return err
	}
	return nil
}

// MarkdownSections writes the per-site sections of report.md, after the
// backend's summary of the run: the analysis rendered by the snapshots
// package, and how many more diffs run.json holds.
func MarkdownSections(w io.Writer, o *backend.Outcome) error {
	if o.Report == nil || backend.MeasuredNothing(o.Manifest) {
		return nil
	}
	bw := bufio.NewWriter(w)
	r := *o.Report
	r.Title = ""
	if err := snapshots.RenderReportMarkdown(bw, &r, snapshots.RenderOptions{MaxFrames: o.MaxFrames}); err != nil {
		return err
	}
	if more := moreDiffs(o); more != "" {
		fmt.Fprintf(bw, "%s\n", more)
	}
	return bw.Flush()
}

// HTMLNotes adds report.html's notes on the sites: how many diffs it
// leaves out.
func HTMLNotes(opts *snapshots.HTMLOptions, o *backend.Outcome) {
	if backend.MeasuredNothing(o.Manifest) {
		return
	}
	if more := moreDiffs(o); more != "" {
		opts.Notes = append(opts.Notes, more)
	}
}

// Growth reads the trees of two kept snapshots of a breakpoint, their
// first snapshot's (an xtmemory file's curB), into the flame graph of
// what grew from one to the other; nil when either cannot be read.
func (s *Sites) Growth(first, last string) *snapshots.FlameNode {
	from, err1 := s.snapshotTree(first)
	to, err2 := s.snapshotTree(last)
	if err1 != nil || err2 != nil {
		return nil
	}
	return snapshots.GrowthFlameTrees(from, to, s.an.opts)
}

// snapshotTree reads the tree of a kept snapshot file.
func (s *Sites) snapshotTree(file string) (*snapshots.HeapTree, error) {
	if file == "" {
		return nil, fmt.Errorf("no snapshot file")
	}
	f, err := os.Open(filepath.Join(s.cfg.Dir, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return snapshots.ReadFirstTree(f, file, s.frameTable())
}

// moreText is the terminal report's last line when it leaves out diffs in
// which a site changed: where to find them. It shows some only at the
// breakpoints with a suspect, at most opts.MaxDiffs each.
func moreText(o *backend.Outcome, opts snapshots.RenderOptions) string {
	changed := changedDiffs(o)
	if changed == 0 {
		return ""
	}
	suspected := make(map[string]bool)
	for _, s := range suspectsOf(o) {
		suspected[s.Breakpoint] = true
	}
	perBreakpoint := make(map[string]int)
	for _, d := range o.Report.Diffs {
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
		lead, backend.Plural(changed, "diff"), shownDiffs)
}

// changedDiffs counts the run's diffs in which a site changed.
func changedDiffs(o *backend.Outcome) int {
	if o.Report == nil {
		return 0
	}
	if o.Report.Intervals == nil {
		return o.Diffs
	}
	n := 0
	for _, c := range o.Report.Intervals {
		n += c.Diffs - c.Unchanged
	}
	return n
}

// fewSnapshots reports whether no breakpoint took the three snapshots
// a suspect needs.
func fewSnapshots(m *runjson.Manifest) bool {
	for _, b := range m.Breakpoints {
		if b.Snapshots >= 3 {
			return false
		}
	}
	return true
}

// Verdict is the report's first line: whether sites grew, the fastest
// suspect, and the exit code when it is not 0.
func Verdict(o *backend.Outcome) string {
	m := o.Manifest
	var v string
	switch sus := suspectsOf(o); {
	case backend.MeasuredNothing(m):
		v = "verdict: nothing measured: " + backend.WhyNothing(m)
	case len(sus) == 0 && fewSnapshots(m):
		v = "verdict: too few snapshots to judge: no breakpoint took the 3 a suspect needs (two intervals between hits)"
	case len(sus) == 0 && m.Status == runjson.StatusCompleted:
		v = "verdict: no leak found: no site grew between hits"
	case len(sus) == 0:
		v = fmt.Sprintf("verdict: no leak found in what ran (%s)", m.Status)
	default:
		s := sus[0]
		v = fmt.Sprintf("verdict: %s; fastest %s %s per hit%s at breakpoint %s%s", backend.Plural(len(sus), "suspect"),
			snapshots.ShortFrame(s.Frame), snapshots.FormatDelta(s.GrowthPerHit), blocksNote(s), s.Breakpoint, CapacityNote(s))
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

// CapacityNote is snapshots.CapacityNote as a clause of the verdict's
// line: "; it is a std::vector's buffer...", "" for any other suspect.
func CapacityNote(s snapshots.Suspect) string {
	if n := snapshots.CapacityNote(s); n != "" {
		return "; " + n
	}
	return ""
}

func suspectsOf(o *backend.Outcome) []snapshots.Suspect {
	if o.Report == nil {
		return nil
	}
	return o.Report.Suspects
}

// moreDiffs says how many diffs in which a site changed report.md and
// report.html leave out, or "".
func moreDiffs(o *backend.Outcome) string {
	if o.Report == nil {
		return ""
	}
	n := changedDiffs(o) - len(o.Report.Diffs)
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf("%s more in run.json (shown: the %d largest heap changes of each breakpoint and kind in which a site changed).",
		backend.Plural(n, "diff"), shownDiffs)
}
