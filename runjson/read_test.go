package runjson_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// v2 is a run.json of schema v2 as snapctl writes it: two stops, a diff
// and a suspect naming their stacks in the table.
const v2 = `{
  "schema": "snapctl.run/v2",
  "status": "completed",
  "exit_code": 0,
  "exit_reason": "ok",
  "started_at": "2026-11-25T19:00:00.123Z",
  "finished_at": "2026-11-25T19:00:02.5Z",
  "plan": "plan.yaml",
  "target": {"argv": ["./leak", "5"], "exit_code": 0, "signal": null},
  "backend": "massif",
  "valgrind": ["valgrind", "--tool=massif"],
  "gdb_agent": true,
  "breakpoints": [{"name": "request", "location": "handle_request", "number": "1", "hits": 2, "snapshots": 2}],
  "stops": [
    {"seq": 1, "breakpoint": "request", "hit": 1, "phase": "hit", "time": "2026-11-25T19:00:01.000Z",
     "thread": {"id": "1"}, "frame": {"function": "handle_request", "file": "leak.c", "line": 12},
     "snapshot": "snapshots/0001-request-hit.massif", "heap_bytes": 1024},
    {"seq": 2, "breakpoint": "request", "hit": 2, "phase": "hit", "time": "2026-11-25T19:00:01.500Z",
     "thread": {"id": "1"}, "frame": {"function": "handle_request", "file": "leak.c", "line": 12},
     "snapshot": "snapshots/0002-request-hit.massif", "heap_bytes": 1104}
  ],
  "events": [],
  "diffs": [{"kind": "between-hits", "breakpoint": "request", "from_seq": 1, "to_seq": 2, "delta_bytes": 80,
    "sites": [{"frame": {"function": "make_buffer", "file": "leak.c", "line": 7}, "stack_id": 0, "delta_bytes": 80}]}],
  "suspects": [{"frame": {"function": "make_buffer", "file": "leak.c", "line": 7}, "stack_id": 0,
    "breakpoint": "request", "pattern": "steady", "growth_per_hit": 80, "growth_per_interval": 80}],
  "stacks": [[{"function": "make_buffer", "file": "leak.c", "line": 7}, {"function": "handle_request", "file": "leak.c", "line": 12}]]
}
`

// theStack is the stack of v2's diff site and suspect.
var theStack = []snapshots.Frame{{Function: "make_buffer", File: "leak.c", Line: 7}, {Function: "handle_request", File: "leak.c", Line: 12}}

// v1 is v2 as snapctl wrote it before the stacks table: each stack inline.
var v1 = strings.NewReplacer(
	`"snapctl.run/v2"`, `"snapctl.run/v1"`,
	`"stack_id": 0`, `"stack": [{"function": "make_buffer", "file": "leak.c", "line": 7}, {"function": "handle_request", "file": "leak.c", "line": 12}]`,
	`,
  "stacks": [[{"function": "make_buffer", "file": "leak.c", "line": 7}, {"function": "handle_request", "file": "leak.c", "line": 12}]]`, ``,
).Replace(v2)

// runDir makes a run directory whose run.json holds doc.
func runDir(t *testing.T, doc string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Schema v2 and v1 read alike: every stop, and, once resolved, the stacks
// of the diff's site and of the suspect, from the table or inline.
func TestReadSchemas(t *testing.T) {
	if strings.Contains(v1, "stack_id") || strings.Contains(v1, `"stacks"`) || !strings.Contains(v1, `"stack": [`) {
		t.Fatalf("v1 still names a stack table:\n%s", v1)
	}
	for _, tt := range []struct{ name, doc, schema string }{
		{"v2", v2, runjson.Schema},
		{"v1", v1, runjson.SchemaV1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := runjson.Read(context.Background(), runDir(t, tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if m.Schema != tt.schema || m.Status != runjson.StatusCompleted || m.Backend != "massif" || m.ExitCode == nil || *m.ExitCode != 0 {
				t.Errorf("schema %q, status %q, backend %q, exit code %v", m.Schema, m.Status, m.Backend, m.ExitCode)
			}
			if got := m.FinishedAt.Sub(m.StartedAt).String(); got != "2.377s" {
				t.Errorf("the run took %s, want 2.377s", got)
			}
			var stops []string
			for _, s := range m.Stops {
				stops = append(stops, s.Breakpoint+"/"+s.Phase+"/"+s.Snapshot)
			}
			want := []string{"request/hit/snapshots/0001-request-hit.massif", "request/hit/snapshots/0002-request-hit.massif"}
			if diff := cmp.Diff(want, stops); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}
			if len(m.Diffs) != 1 || len(m.Diffs[0].Sites) != 1 || len(m.Suspects) != 1 {
				t.Fatalf("%d diffs, %d suspects, want 1 of each with 1 site", len(m.Diffs), len(m.Suspects))
			}
			if tt.schema == runjson.Schema && (m.Suspects[0].StackID == nil || m.Suspects[0].Stack != nil || len(m.Stacks) != 1) {
				t.Errorf("read resolved v2's stacks already: stack_id %v, stack %v, %d in the table", m.Suspects[0].StackID, m.Suspects[0].Stack, len(m.Stacks))
			}
			if err := m.ResolveStacks(); err != nil {
				t.Fatal(err)
			}
			site, suspect := m.Diffs[0].Sites[0], m.Suspects[0]
			if diff := cmp.Diff(theStack, site.Stack); diff != "" || site.StackID != nil {
				t.Errorf("the diff site's stack (-want +got), stack_id %v:\n%s", site.StackID, diff)
			}
			if diff := cmp.Diff(theStack, suspect.Stack); diff != "" || suspect.StackID != nil {
				t.Errorf("the suspect's stack (-want +got), stack_id %v:\n%s", suspect.StackID, diff)
			}
			if suspect.GrowthPerHit != 80 || suspect.Frame.Function != "make_buffer" {
				t.Errorf("suspect %+v", suspect)
			}
		})
	}
}

// Every run.json that is not a run of a known schema is an *Error saying
// why in words: where the JSON breaks, which field has which type, which
// schema it is, or what the file is instead of a regular file.
func TestReadRefuses(t *testing.T) {
	root := t.TempDir()
	inRoot := func(name string, make func(path string) error) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := make(filepath.Join(dir, "run.json")); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, []byte(v2), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dir, msg string
		cause          any // a pointer to the type errors.As finds, or an error errors.Is finds
	}{
		{"not JSON", runDir(t, "{\n  \"schema\": \"snapctl.run/v2\",\n  \"status\": completed\n}\n"),
			"run.json is not valid JSON: line 3 (byte 45): invalid character 'c' looking for beginning of value", new(*json.SyntaxError)},
		{"cut short", runDir(t, v2[:200]), "run.json is not valid JSON: line 8 (byte 200): unexpected end of JSON input", new(*json.SyntaxError)},
		{"wrong type", runDir(t, strings.Replace(v2, `"suspects": [{`, `"suspects": "none", "x": [{`, 1)),
			"run.json is valid JSON but not a run: field suspects (byte 1314) is a string, where snapctl expects an array", new(*json.UnmarshalTypeError)},
		{"deep wrong type", runDir(t, strings.Replace(v2, `"phase": "hit"`, `"phase": 5`, 1)),
			"run.json is valid JSON but not a run: field stops.phase (byte 553) is a number, where snapctl expects a string", new(*json.UnmarshalTypeError)},
		{"integer", runDir(t, strings.Replace(v2, `"heap_bytes": 1024`, `"heap_bytes": 10.5`, 1)),
			"field stops.heap_bytes (byte 766) is a number 10.5, where snapctl expects an integer", new(*json.UnmarshalTypeError)},
		{"not an object", runDir(t, `["snapctl.run/v2"]`),
			"run.json is valid JSON but not a run: field the document (byte 1) is an array, where snapctl expects an object", new(*json.UnmarshalTypeError)},
		{"time", runDir(t, strings.Replace(v2, `"2026-11-25T19:00:00.123Z"`, `5`, 1)),
			"run.json is valid JSON but not a run: Time.UnmarshalJSON: input is not a JSON string", nil},
		{"future schema", runDir(t, strings.Replace(v2, "snapctl.run/v2", "snapctl.run/v9", 1)),
			`run.json has schema "snapctl.run/v9"; this snapctl reads snapctl.run/v1 and snapctl.run/v2`, nil},
		// A schema that is not known is said before a field it types
		// otherwise.
		{"future schema, other types", runDir(t, strings.Replace(strings.Replace(v2, "snapctl.run/v2", "snapctl.run/v9", 1), `"suspects": [{`, `"suspects": {}, "x": [{`, 1)),
			`run.json has schema "snapctl.run/v9"; this snapctl reads snapctl.run/v1 and snapctl.run/v2`, nil},
		{"no schema", runDir(t, `{"status": "completed"}`), `run.json has schema ""; this snapctl reads`, nil},
		{"no run.json", t.TempDir(), "not a run directory: it has no run.json", fs.ErrNotExist},
		{"no directory", filepath.Join(root, "missing"), "no such run directory", fs.ErrNotExist},
		{"a file", file, "not a run directory: it is a file", syscall.ENOTDIR},
		{"FIFO", inRoot("fifo", func(p string) error { return syscall.Mkfifo(p, 0o600) }), "run.json is a FIFO, not a regular file", new(*fsutil.NotFileError)},
		{"/dev/zero", inRoot("zero", func(p string) error { return os.Symlink("/dev/zero", p) }), "run.json is a character device, not a regular file", new(*fsutil.NotFileError)},
		{"directory", inRoot("dir", func(p string) error { return os.Mkdir(p, 0o755) }), "run.json is a directory, not a regular file", new(*fsutil.NotFileError)},
		{"too large", inRoot("huge", func(p string) error {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return err
			}
			return os.Truncate(p, runjson.MaxSize+1)
		}), "run.json is larger than 256 MiB, too large for a run.json", new(*fsutil.TooLargeError)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m, err := runjson.Read(context.Background(), tt.dir)
			var re *runjson.Error
			if !errors.As(err, &re) {
				t.Fatalf("Read returned %v, %v; want a *runjson.Error", m, err)
			}
			if m != nil || re.Dir != tt.dir || !strings.Contains(re.Msg, tt.msg) || re.Error() != tt.dir+": "+re.Msg {
				t.Errorf("Read returned %v, %q (dir %q, msg %q); want nil and %q in the message", m, err, re.Dir, re.Msg, tt.msg)
			}
			if strings.Contains(re.Msg, tt.dir) {
				t.Errorf("message %q names the directory again", re.Msg)
			}
			switch cause := tt.cause.(type) {
			case error:
				if !errors.Is(err, cause) {
					t.Errorf("error %v is not %v", err, cause)
				}
			case nil:
			default:
				if !errors.As(err, cause) {
					t.Errorf("error %v has no cause of type %T", err, cause)
				}
			}
		})
	}
}

// A symlink to a regular run.json is read.
func TestReadSymlink(t *testing.T) {
	good := runDir(t, v2)
	linked := t.TempDir()
	if err := os.Symlink(filepath.Join(good, "run.json"), filepath.Join(linked, "run.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := runjson.Read(context.Background(), linked); err != nil {
		t.Fatal(err)
	}
}

// A read whose context has ended returns the *fsutil.InterruptedError
// itself, not an *Error: the caller exits as interrupted, not on bad input.
func TestReadInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := runjson.Read(ctx, runDir(t, v2))
	var interrupted *fsutil.InterruptedError
	var re *runjson.Error
	if !errors.As(err, &interrupted) || errors.As(err, &re) || !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel returned %v (%T), want the *fsutil.InterruptedError alone", err, err)
	}
}

// A stack table that does not hold a suspect's stack_id is read: a reader
// of the frames alone (compare) can use the run. ResolveStacks says what
// is wrong.
func TestReadLeavesStacks(t *testing.T) {
	doc := strings.Replace(v2, `"stack_id": 0,
    "breakpoint"`, `"stack_id": 7,
    "breakpoint"`, 1)
	m, err := runjson.Read(context.Background(), runDir(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Suspects) != 1 || m.Suspects[0].Frame.Function != "make_buffer" {
		t.Fatalf("suspects %+v", m.Suspects)
	}
	want := "suspect make_buffer (leak.c:7): stack_id 7: the table has 1 stacks"
	if err := m.ResolveStacks(); err == nil || err.Error() != want {
		t.Errorf("ResolveStacks: %v, want %q", err, want)
	}
}
