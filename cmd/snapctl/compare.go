package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/fsutil"
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

Exit status 0 when every suspect of RUN_A is gone and none is new; 10 when
a suspect persists or is new, or a suspect of RUN_A could not be judged
because its breakpoint took too few snapshots in RUN_B.`,
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
		return "compare: 1 suspect persists, is new or could not be judged"
	}
	return fmt.Sprintf("compare: %d suspects persist, are new or could not be judged", e.n)
}

// runDirError is a RUN argument of compare that cannot be used (exit 5).
type runDirError struct {
	dir, msg string
}

func (e *runDirError) Error() string { return fmt.Sprintf("%s: %s", e.dir, e.msg) }

// runManifest is what compare reads of run.json.
type runManifest struct {
	Schema      string `json:"schema"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	Breakpoints []struct {
		Name     string `json:"name"`
		Location string `json:"location"`
	} `json:"breakpoints"`
	Stops []struct {
		Breakpoint string `json:"breakpoint"`
		Phase      string `json:"phase"`
	} `json:"stops"`
	Suspects []snapshots.Suspect `json:"suspects"`
}

// schemaV1 is run.json's schema before the stacks moved into a table.
const schemaV1 = "snapctl.run/v1"

// loadRun reads a run directory's run.json for a comparison. It must be a
// completed run of a schema this snapctl knows.
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
	data, err := readRunJSON(ctx, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return snapshots.CompareRun{}, &runDirError{dir, "not a run directory: it has no run.json"}
	}
	if errors.Is(err, context.Canceled) {
		return snapshots.CompareRun{}, err
	}
	if err != nil {
		return snapshots.CompareRun{}, &runDirError{dir, err.Error()}
	}
	var m runManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return snapshots.CompareRun{}, &runDirError{dir, fmt.Sprintf("run.json is not valid JSON: %v", err)}
	}
	// A comparison reads the suspects' frames and growth, which v1 and
	// v2 spell alike (v2 only moved the stacks into a table): a run
	// recorded before the upgrade still compares with one after.
	if m.Schema != driver.Schema && m.Schema != schemaV1 {
		return snapshots.CompareRun{}, &runDirError{dir, fmt.Sprintf("run.json has schema %q; this snapctl reads %s and %s", m.Schema, schemaV1, driver.Schema)}
	}
	if m.Status != string(driver.StatusCompleted) {
		msg := fmt.Sprintf("the run did not complete (status %s", m.Status)
		if m.Error != "" {
			msg += ": " + m.Error
		}
		return snapshots.CompareRun{}, &runDirError{dir, msg + "); its suspects may be incomplete"}
	}
	snaps := make(map[string]int)
	for _, s := range m.Stops {
		if s.Phase == "hit" {
			snaps[s.Breakpoint]++
		}
	}
	run := snapshots.CompareRun{Dir: dir, Suspects: m.Suspects}
	for _, b := range m.Breakpoints {
		run.Breakpoints = append(run.Breakpoints, snapshots.CompareBreakpoint{Name: b.Name, Location: b.Location, Snapshots: snaps[b.Name]})
	}
	return run, nil
}

// maxRunJSON bounds the run.json compare reads: a run of 100,000 stops
// writes a few tens of megabytes.
const maxRunJSON = 256 << 20

// readRunJSON reads dir's run.json, which must be a regular file no larger
// than maxRunJSON; the read ends when ctx does.
func readRunJSON(ctx context.Context, dir string) ([]byte, error) {
	data, err := fsutil.ReadFile(ctx, filepath.Join(dir, "run.json"), fsutil.ReadOptions{What: "run.json", Limit: maxRunJSON})
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the message names the directory already
	}
	return data, err
}
