package driver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
)

// TestEarlyGDBChecks: the early gdb gives the first line of gdb's
// version (from Python when the agent reads, else from -gdb-version),
// says whether it has read the agent, and whether every location
// resolves; a gdb whose Python cannot read the agent still gives its
// version and leaves the locations to the checking gdb.
func TestEarlyGDBChecks(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "testdata/leak.c")
	out, err := exec.Command("gdb", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version, _, _ := strings.Cut(string(out), "\n")
	pydir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pydir, "json.py"), []byte("raise ImportError('json is broken here')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, locations           string
		env                       []string
		wantSourced, wantResolved bool
	}{
		{name: "resolved", locations: "    location: handle_request\n  - name: b\n    location: main\n", wantSourced: true, wantResolved: true},
		{name: "unresolved", locations: "    location: handle_request\n  - name: b\n    location: no_such_function\n", wantSourced: true},
		{name: "broken python", locations: "    location: handle_request\n", env: []string{"PYTHONPATH=" + pydir}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: a\n"+tt.locations))
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{Env: append(tt.env, testenv.ScopeEnv(t))}
			opts.defaults()
			e, priv := startEarlyGDB(context.Background(), "gdb", bin, plan, &opts)
			if e == nil {
				t.Fatal("no early gdb")
			}
			defer priv.remove()
			defer e.CloseUnused()
			if got := e.Version(); got != version {
				t.Errorf("version %q, want %q", got, version)
			}
			if e.AgentSourced() != tt.wantSourced || e.LocationsResolved() != tt.wantResolved {
				t.Errorf("sourced %v, resolved %v; want %v, %v", e.AgentSourced(), e.LocationsResolved(), tt.wantSourced, tt.wantResolved)
			}
		})
	}
}
