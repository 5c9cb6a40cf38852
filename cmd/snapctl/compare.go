package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// compareOptions are the flags of `snapctl compare`.
type compareOptions struct {
	format string
}

func newCompareCmd() *cobra.Command {
	opts := &compareOptions{}
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B",
		Short: "Compare the suspects of two run directories: gone, persists or new",
		Long: `Compare reads the suspects of two completed runs, typically before and
after a fix, and says for each whether it is gone, persists or is new, with
its growth per hit on each side.

Suspects are matched per breakpoint (by name), by function and file:line;
those left over are matched by function and file when both runs have as
many suspect lines in that function (a rebuild moved the code), in line
order. Sites that still match nothing are reported as gone and new, with
a note. Breakpoints that only one plan has, or that took fewer than three
snapshots in a run, are not compared, and the output says so.

Native runs are compared by their verdicts per breakpoint: each finding
(leak, retention, outside-heap, rss-growth) is gone, persists or new.
Native runs recorded with --sites have suspects too, compared as a massif
run's: two such runs are compared by both, and show a fix only when both
do; one against a massif run by its suspects alone. A memcheck run
compares as a massif run, by its suspects, and says how each side's
blocks stood (lost, reachable, held by). A
massif run and a native run without --sites are compared only by what
grew at each breakpoint: a leak both show persists, but a fix is shown
only between runs of one backend.

Exit status 0 only when every suspect and finding of RUN_A was judged gone
and none is new; 10 when one persists or is new, or when anything could not
be compared or judged (a breakpoint in one plan only, too few snapshots,
two backends), with the reason; 5 when a RUN is not a completed run
directory.`,
		Example: `  snapctl compare runs/before runs/after
  snapctl compare runs/before runs/after --format json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("compare takes two run directories RUN_A and RUN_B, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCompareCmd(cmd.Context(), cmd.OutOrStdout(), args[0], args[1], opts)
		},
	}
	formatFlag(cmd, &opts.format, "output format", "text", "markdown", "json")
	return cmd
}

func runCompareCmd(ctx context.Context, w io.Writer, dirA, dirB string, o *compareOptions) error {
	format, err := snapshots.ParseFormat(o.format)
	if err != nil {
		return usageError{fmt.Errorf("--format: %w", err)}
	}
	a, err := loadRun(ctx, dirA)
	if err != nil {
		return err
	}
	b, err := loadRun(ctx, dirB)
	if err != nil {
		return err
	}
	c := snapshots.Compare(a, b)
	if err := snapshots.RenderComparison(w, c, format); err != nil {
		return err
	}
	if n := c.Unfixed(); n > 0 {
		return &notFixedError{n: n}
	}
	return nil
}

// notFixedError ends a comparison that does not show a fix (exit 10).
type notFixedError struct{ n int }

func (e *notFixedError) Error() string {
	if e.n == 1 {
		return "compare: 1 suspect or finding persists, is new or could not be compared"
	}
	return fmt.Sprintf("compare: %d suspects or findings persist, are new or could not be compared", e.n)
}

// runDirError is a RUN argument of compare that cannot be used (exit 5).
type runDirError struct {
	dir, msg string
}

func (e *runDirError) Error() string { return fmt.Sprintf("%s: %s", e.dir, e.msg) }

// loadRun reads a run directory's run.json for a comparison. It must be a
// completed run of a schema this snapctl knows; a run recorded with schema
// v1 compares with one of v2, since the comparison reads the suspects'
// frames and growth, which both spell alike.
func loadRun(ctx context.Context, dir string) (snapshots.CompareRun, error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return snapshots.CompareRun{}, &runDirError{dir, "no such run directory"}
	case err != nil:
		return snapshots.CompareRun{}, &runDirError{dir, err.Error()}
	case !fi.IsDir():
		return snapshots.CompareRun{}, &runDirError{dir, "not a run directory (compare takes the directories `snapctl run` writes, not files)"}
	}
	m, err := runjson.Read(ctx, dir)
	var bad *runjson.Error
	if errors.As(err, &bad) {
		return snapshots.CompareRun{}, &runDirError{dir, bad.Msg}
	}
	if err != nil {
		return snapshots.CompareRun{}, err // interrupted
	}
	if m.Status != runjson.StatusCompleted {
		msg := fmt.Sprintf("the run did not complete (status %s", m.Status)
		if m.Error != "" {
			msg += ": " + m.Error
		}
		return snapshots.CompareRun{}, &runDirError{dir, msg + "); its suspects may be incomplete"}
	}
	snaps := make(map[string]int)
	// What each breakpoint of a native --sites run measured: a stop
	// without a per-site snapshot says why (memory.sites_missing); runs
	// of an earlier snapctl only have sites-failed events, "breakpoint
	// "NAME" hit N: ...". Stops that carry no memory at all say nothing.
	sited, measured := make(map[string]int), make(map[string]int)
	failed := make(map[string]bool)
	for _, e := range m.Events {
		if e.Kind == runjson.EventSitesFailed {
			failed[strings.SplitN(e.Message, ":", 2)[0]] = true
		}
	}
	for _, s := range m.Stops {
		if s.Phase != runjson.PhaseHit {
			continue
		}
		snaps[s.Breakpoint]++
		if s.Memory == nil {
			continue
		}
		measured[s.Breakpoint]++
		if s.Memory.SitesMissing == "" && !failed[fmt.Sprintf("breakpoint %q hit %d", s.Breakpoint, s.Hit)] {
			sited[s.Breakpoint]++
		}
	}
	run := snapshots.CompareRun{Dir: dir, Backend: m.Backend, Sites: true, Suspects: m.Suspects}
	traits, ok := driver.BackendTraits(m.Backend)
	if !ok {
		return snapshots.CompareRun{}, &runDirError{dir, fmt.Sprintf("run.json names backend %q; this snapctl knows %s", m.Backend, orList(driver.BackendNames()))}
	}
	if run.Backend == "" {
		run.Backend = driver.BackendNames()[0]
	}
	if !traits.Sites {
		// Judged by verdicts, and by call sites when it recorded them.
		run.Verdicts = true
		run.Sites = m.Native != nil && m.Native.Sites
	}
	for _, b := range m.Breakpoints {
		cb := snapshots.CompareBreakpoint{Name: b.Name, Location: b.Location, Snapshots: snaps[b.Name]}
		switch n := measured[b.Name]; {
		case !run.Verdicts || !run.Sites || n == 0:
		case sited[b.Name] == 0:
			cb.Unmeasured = fmt.Sprintf("none of its %d stops has a per-site snapshot: heaptrack's recording failed", n)
		default:
			cb.Snapshots = sited[b.Name]
		}
		for _, v := range m.Verdicts {
			if v.Breakpoint != b.Name {
				continue
			}
			cb.Verdict, cb.Findings, cb.InUsePerHit = v.Verdict, v.Findings, v.Figures.InUsePerHit
			// A run of a snapctl before findings: its verdict is its only
			// finding.
			if v.Findings == nil && v.Verdict != runjson.VerdictFlat {
				cb.Findings = []string{v.Verdict}
			}
		}
		run.Breakpoints = append(run.Breakpoints, cb)
	}
	return run, nil
}
