package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/fsutil"
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
(leak, retention, outside-heap, rss-growth) is gone, persists or new. A
massif run and a native run are compared only by what grew at each
breakpoint: a leak both show persists, but a fix is shown only between
runs of one backend.

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
	Backend  string              `json:"backend"`
	Verdicts []struct {
		Breakpoint string   `json:"breakpoint"`
		Verdict    string   `json:"verdict"`
		Findings   []string `json:"findings"`
		Figures    struct {
			InUsePerHit *int64 `json:"heap_in_use_growth_per_hit_bytes"`
		} `json:"figures"`
	} `json:"verdicts"`
}

// jsonTypeName is how a JSON document spells the kind of a Go type.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	if t.ConvertibleTo(reflect.TypeFor[float64]()) {
		if k := t.Kind(); k >= reflect.Int && k <= reflect.Uint64 {
			return "an integer"
		}
		return "a number"
	}
	return t.String()
}

// manifestError says what is wrong with a run.json that does not decode:
// where its syntax breaks, or which field holds what type.
func manifestError(data []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("run.json is not valid JSON: line %d (byte %d): %v", line, syn.Offset, err)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the document"
		}
		return fmt.Sprintf("run.json is valid JSON but not a run: field %s (byte %d) is %s, where snapctl expects %s", field, typ.Offset, article(typ.Value), jsonTypeName(typ.Type))
	}
	return "run.json is not valid JSON: " + err.Error()
}

// article puts "a" or "an" before one of encoding/json's value kinds.
func article(kind string) string {
	switch {
	case kind == "":
		return "a value"
	case strings.ContainsRune("aeiou", rune(kind[0])):
		return "an " + kind
	}
	return "a " + kind
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
		return snapshots.CompareRun{}, &runDirError{dir, manifestError(data, err)}
	}
	// A comparison reads the suspects' frames and growth, which v1 and
	// v2 spell alike (v2 only moved the stacks into a table): a run
	// recorded before the upgrade still compares with one after.
	if m.Schema != runjson.Schema && m.Schema != schemaV1 {
		return snapshots.CompareRun{}, &runDirError{dir, fmt.Sprintf("run.json has schema %q; this snapctl reads %s and %s", m.Schema, schemaV1, runjson.Schema)}
	}
	if m.Status != string(runjson.StatusCompleted) {
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
	run := snapshots.CompareRun{Dir: dir, Backend: snapshots.BackendMassif, Suspects: m.Suspects}
	switch m.Backend {
	case "", driver.BackendMassif:
	case driver.BackendNative:
		run.Backend = snapshots.BackendNative
	default:
		return snapshots.CompareRun{}, &runDirError{dir, fmt.Sprintf("run.json names backend %q; this snapctl knows massif and native", m.Backend)}
	}
	for _, b := range m.Breakpoints {
		cb := snapshots.CompareBreakpoint{Name: b.Name, Location: b.Location, Snapshots: snaps[b.Name]}
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
