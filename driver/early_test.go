package driver

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// A run in which no breakpoint took a snapshot says so, on every backend:
// its exit code, an event in run.json and the verdict line of every
// report, never "no leak found". early.c starts four threads that
// allocate and exit, then, with "fail", exits with status 71 before its
// breakpoint's function ever runs, as memcached does when it cannot raise
// its file limit under valgrind; a pending breakpoint whose location no
// library defines never resolves.
func TestRunNothingMeasured(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/early.c")
	for _, tt := range []struct {
		name, plan string
		args       []string
		code       int
		why        string
		unresolved bool
	}{
		{"exits 71", "breakpoints:\n  - name: request\n    location: handle_request\n", []string{"fail"},
			ExitEndedEarly, "the target exited with status 71 before any breakpoint took a snapshot", false},
		{"optional, exits 71", "breakpoints:\n  - name: request\n    location: handle_request\n    optional: true\n", []string{"fail"},
			ExitEndedEarly, "the target exited with status 71 before any breakpoint took a snapshot", false},
		{"optional, exits 0", "breakpoints:\n  - name: request\n    location: handle_request\n    condition: i > 100\n    optional: true\n", []string{"ok"},
			ExitNeverHit, "the target exited with status 0 before any breakpoint took a snapshot", false},
		{"pending never resolves", "breakpoints:\n  - name: plugin\n    location: no_such_plugin_fn\n    pending: true\n", []string{"ok"},
			ExitNeverHit, `the target exited with status 0 before any breakpoint took a snapshot; the location of breakpoint "plugin" never resolved`, true},
	} {
		for _, backend := range BackendNames() {
			t.Run(tt.name+"/"+backend, func(t *testing.T) {
				t.Parallel()
				if traits, _ := BackendTraits(backend); traits.GDBStarts {
					testenv.MustHave(t, "gdb")
				} else {
					testenv.MustHave(t, "gdb", "valgrind", "vgdb")
				}
				res, err := runSession(t, Options{}, "backend: "+backend+"\n"+tt.plan, bin, tt.args...)
				if res == nil {
					t.Fatalf("no run: %v", err)
				}
				if code, _ := ExitStatus(err); code != tt.code {
					t.Fatalf("exit code %d (%v), want %d", code, err, tt.code)
				}
				if !strings.Contains(err.Error(), "nothing measured") {
					t.Errorf("error %q does not say that nothing was measured", err)
				}
				var nh *NeverHitError
				if errors.As(err, &nh) && tt.unresolved != (len(nh.Unresolved) == 1) {
					t.Errorf("unresolved breakpoints %q", nh.Unresolved)
				}
				m := readManifest(t, res.Dir)
				if m.Status != runjson.StatusCompleted || *m.ExitCode != tt.code || len(m.Stops) != 0 {
					t.Errorf("status %s, exit code %d, %d stops; want completed, %d, none", m.Status, *m.ExitCode, len(m.Stops), tt.code)
				}
				var kinds []runjson.EventKind
				for _, e := range m.Events {
					kinds = append(kinds, e.Kind)
					if e.Kind == runjson.EventNothingMeasured && e.Message != "nothing measured: "+tt.why {
						t.Errorf("event message %q, want %q", e.Message, "nothing measured: "+tt.why)
					}
				}
				want := []runjson.EventKind{runjson.EventNothingMeasured}
				if tt.unresolved {
					want = []runjson.EventKind{runjson.EventBreakpointUnresolved, runjson.EventNothingMeasured}
				}
				if !slicesHaveInOrder(kinds, want) {
					t.Errorf("events %v, want %v among them", kinds, want)
				}
				var text bytes.Buffer
				if err := WriteText(&text, res, snapshots.RenderOptions{}); err != nil {
					t.Fatal(err)
				}
				verdict, _, _ := strings.Cut(text.String(), "\n")
				if want := "verdict: nothing measured: " + tt.why; !strings.HasPrefix(verdict, want) {
					t.Errorf("verdict %q, want it to start %q", verdict, want)
				}
				for _, name := range []string{reportFile, htmlFile} {
					data, err := os.ReadFile(filepath.Join(res.Dir, name))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Contains(data, []byte("othing measured")) || bytes.Contains(bytes.ToLower(data), []byte("no leak")) {
						t.Errorf("%s does not say that nothing was measured, or says no leak was found:\n%s", name, data)
					}
				}
				if bytes.Contains(bytes.ToLower(text.Bytes()), []byte("no leak")) || bytes.Contains(text.Bytes(), []byte("no site grew")) {
					t.Errorf("the terminal report claims no leak:\n%s", text.String())
				}
			})
		}
	}
}

// slicesHaveInOrder reports whether want appears in got in order.
func slicesHaveInOrder[T comparable](got, want []T) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}
