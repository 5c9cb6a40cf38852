package native_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// The tests of this file's package run the native backend as a user
// does, through driver.Run, and read what it wrote in the run directory
// as a user would: run.json through runjson.Read, the other files by the
// names the README gives them.

// The run directory's files.
const (
	manifestFile = "run.json"
	reportFile   = "report.md"
	htmlFile     = "report.html"
	traceFile    = "gdb-mi.log"
	snapshotDir  = backend.SnapshotDir
)

// stopPaths are the two ways a plain stop is taken: by gdb's agent, and
// over MI as when gdb has no Python. Tests of what a run records run
// both.
var stopPaths = []struct {
	name    string
	noAgent bool
}{{"agent", false}, {"mi", true}}

// traceTail is the end of the MI transcript in run directory dir, its last
// n lines, for the message of a run that failed.
func traceTail(dir string, n int) string {
	data, err := os.ReadFile(filepath.Join(dir, traceFile))
	if err != nil {
		return fmt.Sprintf("no MI transcript: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	lines = lines[max(0, len(lines)-n):]
	return "the MI transcript's end:\n" + strings.Join(lines, "\n")
}

// runSession runs a session on binary with args, its plan written into a
// temporary directory and its run directory a path with a space in it, its
// processes marked as the test's and checked for leftovers.
func runSession(t *testing.T, opts driver.Options, plan, binary string, args ...string) (*driver.Result, error) {
	t.Helper()
	testenv.NoLeftovers(t)
	dir := t.TempDir()
	opts.PlanPath = filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(opts.PlanPath, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Binary, opts.Args, opts.OutDir = binary, args, filepath.Join(dir, "run dir")
	opts.Env = append(opts.Env, testenv.ScopeEnv(t))
	return driver.Run(context.Background(), opts)
}

// runPlan runs a session of plan, whose backend is valgrind's, on
// binary with args, and checks that gdb's agent took the stops of a
// plan whose breakpoints have neither commands nor around_call.
func runPlan(t *testing.T, plan, binary string, args ...string) (*driver.Result, error) {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	res, err := runSession(t, driver.Options{}, plan, binary, args...)
	if res != nil && res.Manifest != nil && !res.Manifest.GdbAgent {
		agentOwns := true
		for _, bp := range res.Plan.Breakpoints {
			agentOwns = agentOwns && !bp.AroundCall && len(bp.Commands) == 0
		}
		if agentOwns {
			t.Errorf("gdb_agent = false with the agent on")
		}
	}
	return res, err
}

// readManifest reads run.json back as a user would, its stacks resolved.
func readManifest(t *testing.T, dir string) *runjson.Manifest {
	t.Helper()
	m, err := runjson.Read(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ResolveStacks(); err != nil {
		t.Fatalf("run.json: %v", err)
	}
	return m
}

// nativeAgent writes gdb's agent for a native run, agent.py and the
// native backend's part, into dir and returns a script that reads them
// into gdb's namespace as a run does (gdb.WriteAgent, gdb.WriteScripts),
// for gdb -x.
func nativeAgent(t *testing.T, dir string) string {
	t.Helper()
	core, err := gdb.WriteAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	part, err := gdb.WriteScripts(dir, native.Name, native.Python)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "read-agent.py")
	if err := os.WriteFile(script, []byte(core+part), 0o600); err != nil {
		t.Fatal(err)
	}
	return script
}

// mustAtoi is the number s says, 0 for none.
func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
