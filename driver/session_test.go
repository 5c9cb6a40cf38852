package driver

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// runPlan writes plan into a temporary directory and runs a session on
// binary with args, into a run directory whose path holds a space.
func runPlan(t *testing.T, plan, binary string, args ...string) (*Result, error) {
	t.Helper()
	return runPlanOpts(t, Options{}, plan, binary, args...)
}

// stopPaths are the two ways a plain stop is taken: by gdb's agent, and
// over MI as when gdb has no Python. Tests of what a run records run
// both.
var stopPaths = []struct {
	name    string
	noAgent bool
}{{"agent", false}, {"mi", true}}

// runPlanOpts is runPlan with opts, whose plan, binary, arguments and run
// directory it sets. With a plan that has a breakpoint without commands
// and around_call, it checks that gdb's agent ran unless opts.NoAgent.
func runPlanOpts(t *testing.T, opts Options, p, binary string, args ...string) (*Result, error) {
	t.Helper()
	res, err := runPlanDir(t, opts, p, binary, args...)
	if res != nil && slices.ContainsFunc(res.Plan.Breakpoints, func(bp plan.Breakpoint) bool { return agentOwns(&bp) }) &&
		res.Manifest.GdbAgent == opts.NoAgent {
		t.Errorf("gdb_agent = %v with NoAgent %v", res.Manifest.GdbAgent, opts.NoAgent)
	}
	return res, err
}

func runPlanDir(t *testing.T, opts Options, plan, binary string, args ...string) (*Result, error) {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	return runSession(t, opts, plan, binary, args...)
}

// runSession runs a session on binary with args, its plan written into a
// temporary directory and its run directory a path with a space in it, its
// processes marked as the test's and checked for leftovers.
func runSession(t *testing.T, opts Options, plan, binary string, args ...string) (*Result, error) {
	t.Helper()
	testenv.NoLeftovers(t)
	dir, planPath := writePlan(t, plan)
	opts.PlanPath, opts.Binary, opts.Args, opts.OutDir = planPath, binary, args, filepath.Join(dir, "run dir")
	opts.Env = append(opts.Env, testenv.ScopeEnv(t))
	return Run(context.Background(), opts)
}

// writePlan writes plan as plan.yaml into a new temporary directory and
// returns both.
func writePlan(t *testing.T, plan string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(path, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// readManifest reads run.json back as a user would.
// mustOpen opens a file that the test closes at its end.
func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func readManifest(t *testing.T, dir string) *runjson.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m runjson.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("run.json: %v", err)
	}
	if err := m.ResolveStacks(); err != nil {
		t.Fatalf("run.json: %v", err)
	}
	return &m
}

// leak.c keeps 16 bytes per handle_request call, after a calloc of
// n*8 bytes in main: at hit k the heap holds 8n + 16(k-1) bytes.
func TestRunLeak(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n", bin, "4")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			if m.Schema != runjson.Schema || m.Status != runjson.StatusCompleted {
				t.Errorf("schema, status = %q, %q; want %q, %q", m.Schema, m.Status, runjson.Schema, runjson.StatusCompleted)
			}
			if m.Target.ExitCode == nil || *m.Target.ExitCode != 0 || m.Target.Signal != nil {
				t.Errorf("target exit = %v, signal %v; want 0, null", m.Target.ExitCode, m.Target.Signal)
			}
			type stop struct {
				Seq, Hit  int
				Phase     string
				Function  string
				Line      int
				Snapshot  string
				HeapBytes int64
			}
			var got []stop
			for _, s := range m.Stops {
				got = append(got, stop{s.Seq, s.Hit, s.Phase, s.Frame.Function, s.Frame.Line, s.Snapshot, s.HeapBytes})
				if s.Thread.ID != "1" || !strings.HasPrefix(s.Thread.TargetID, "Thread ") {
					t.Errorf("stop %d: thread %+v, want id 1 and a target id", s.Seq, s.Thread)
				}
				if _, err := os.Stat(filepath.Join(res.Dir, s.Snapshot)); err != nil {
					t.Errorf("stop %d: %v", s.Seq, err)
				}
			}
			want := []stop{
				{1, 1, "hit", "handle_request", 23, "snapshots/0001-request-1.massif.gz", 32},
				{2, 2, "hit", "handle_request", 23, "snapshots/0002-request-2.massif.gz", 48},
				{3, 3, "hit", "handle_request", 23, "snapshots/0003-request-3.massif.gz", 64},
				{4, 4, "hit", "handle_request", 23, "snapshots/0004-request-4.massif.gz", 80},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stops (-want +got):\n%s", diff)
			}

			// Every between-hits diff is exactly the 16 bytes kept at leak.c:15.
			var diffs []struct {
				Kind       string `json:"kind"`
				FromSeq    int    `json:"from_seq"`
				ToSeq      int    `json:"to_seq"`
				DeltaBytes int64  `json:"delta_bytes"`
				Sites      []struct {
					Frame struct {
						Function string `json:"function"`
						Line     int    `json:"line"`
					} `json:"frame"`
					Delta        int64  `json:"delta"`
					BeforeBlocks *int64 `json:"before_blocks"`
					AfterBlocks  *int64 `json:"after_blocks"`
					DeltaBlocks  *int64 `json:"delta_blocks"`
				} `json:"sites"`
			}
			raw, _ := json.Marshal(m.Diffs)
			if err := json.Unmarshal(raw, &diffs); err != nil {
				t.Fatal(err)
			}
			if len(diffs) != 3 {
				t.Fatalf("%d diffs, want 3", len(diffs))
			}
			for i, d := range diffs {
				if d.Kind != "between-hits" || d.FromSeq != i+1 || d.ToSeq != i+2 || d.DeltaBytes != 16 {
					t.Errorf("diff %d: %s %d..%d %+d B, want between-hits %d..%d +16 B", i, d.Kind, d.FromSeq, d.ToSeq, d.DeltaBytes, i+1, i+2)
				}
				if len(d.Sites) != 1 || d.Sites[0].Frame.Function != "keep" || d.Sites[0].Frame.Line != 15 || d.Sites[0].Delta != 16 {
					t.Errorf("diff %d: sites %+v, want keep (leak.c:15) +16", i, d.Sites)
					continue
				}
				// One 16-byte block per call: i blocks before, i+1 after.
				if b := d.Sites[0]; b.BeforeBlocks == nil || b.AfterBlocks == nil || b.DeltaBlocks == nil ||
					*b.BeforeBlocks != int64(i) || *b.AfterBlocks != int64(i+1) || *b.DeltaBlocks != 1 {
					t.Errorf("diff %d: blocks %+v, want %d → %d (+1)", i, b, i, i+1)
				}
			}
			for _, name := range []string{planFile, reportFile, valgrindLog, massifOut} {
				if _, err := os.Stat(filepath.Join(res.Dir, name)); err != nil {
					t.Error(err)
				}
			}
			// valgrind's end-of-run xtree stays out of the target's directory.
			if left, _ := filepath.Glob("xtmemory.kcg.*"); len(left) > 0 {
				t.Errorf("valgrind left %v in the target's directory", left)
			}
			// massif's own profile is kept in the run directory.
			if want := "--massif-out-file=" + filepath.Join(res.Dir, massifOut); !slices.Contains(m.Valgrind, want) {
				t.Errorf("valgrind %q, want %s", m.Valgrind, want)
			}
			if m.Native != nil {
				t.Errorf("run.json's native %+v under massif, want none", m.Native)
			}
			if prof, err := snapshots.ParseTotals(mustOpen(t, filepath.Join(res.Dir, massifOut)), massifOut); err != nil || len(prof.Snapshots) == 0 {
				t.Errorf("massif.out: %v", err)
			}
		})
	}
}

// An explicit location (-source F -line N) is an MI option, not a location
// string: it must reach -break-insert as options both when the plan is
// checked and in the live target.
func TestRunExplicitLocation(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: keep\n    location: -source leak.c -line 15\n", bin, "3")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			if len(m.Stops) != 3 {
				t.Fatalf("%d stops, want 3", len(m.Stops))
			}
			for _, st := range m.Stops {
				if st.Frame.Function != "keep" || st.Frame.Line != 15 {
					t.Errorf("stop %d at %s:%d, want keep:15", st.Seq, st.Frame.Function, st.Frame.Line)
				}
			}
		})
	}
}

// A location gdb cannot resolve is refused with the plan's position
// before valgrind starts, and no run directory is made.
func TestRunUnresolvedLocation(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_requets\n", bin)
	var pe *plan.Error
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *plan.Error", err)
	}
	if res != nil {
		t.Errorf("a run directory was made: %s", res.Dir)
	}
	if pe.Line != 3 || !strings.Contains(err.Error(), `Function "handle_requets" not defined`) {
		t.Errorf("err = %v, want line 3 and gdb's words", err)
	}
}

// A breakpoint that is never reached fails the run with its name, after
// the complete run directory was written.
func TestRunNeverHit(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n  - name: unused\n    location: keep\n    condition: n == 3\n", bin, "2")
			var nh *NeverHitError
			if !errors.As(err, &nh) || len(nh.Breakpoints) != 1 || nh.Breakpoints[0] != "unused" {
				t.Fatalf("err = %v, want breakpoint \"unused\" never hit", err)
			}
			m := readManifest(t, res.Dir)
			if m.Status != runjson.StatusCompleted || len(m.Stops) != 2 {
				t.Errorf("status %s with %d stops, want completed with 2", m.Status, len(m.Stops))
			}
		})
	}
}

func TestPrepareRunDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out with space")
	if _, err := prepareRunDir(dir, false); err != nil {
		t.Fatal(err)
	}
	// Empty (but for snapshots/): accepted again? No: snapshots/ is there.
	if err := os.WriteFile(filepath.Join(dir, manifestFile), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := prepareRunDir(dir, false)
	var de *OutputDirError
	if !errors.As(err, &de) || !errors.Is(err, errDirNotEmpty) {
		t.Fatalf("non-empty dir: err = %v, want OutputDirError", err)
	}
	if _, err := prepareRunDir(dir, true); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, manifestFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--force kept the old run.json: %v", err)
	}

	// An earlier run's snapshots go too; files snapctl does not write stay.
	old := filepath.Join(dir, snapshotName(1, "request", 1, runjson.PhaseHit))
	mine := []string{filepath.Join(dir, "notes.txt"), filepath.Join(dir, snapshotDir, "notes.txt")}
	for _, p := range append(mine, old) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prepareRunDir(dir, true); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if _, err := os.Stat(old); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--force kept the old snapshot %s: %v", old, err)
	}
	for _, p := range mine {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("--force removed %s, which snapctl did not write: %v", p, err)
		}
	}
}

// Once the run directory exists, a failure still writes run.json and
// returns the Result: here the plan cannot be copied into it.
func TestRunWritesManifestWhenPlanCopyFails(t *testing.T) {
	plan, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: request\n    location: handle_request\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := prepareRunDir(filepath.Join(t.TempDir(), "run"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, planFile), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{}
	opts.defaults()
	res, err := newSession(opts, plan, backend.Tools{}, "/src/leak", dir).run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "copying the plan") {
		t.Errorf("err = %v, want a failure to copy the plan", err)
	}
	if res == nil {
		t.Fatal("nil Result once the run directory exists")
	}
	if m := readManifest(t, dir); m.Status != runjson.StatusFailed || !strings.Contains(m.Error, "copying the plan") {
		t.Errorf("run.json: status %q, error %q", m.Status, m.Error)
	}
}

// A run stopped by the user before valgrind starts (while the tools and
// the breakpoint locations are checked) is interrupted, not a tool failure.
func TestRunInterruptedBeforeStart(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "testdata/leak.c")
	dir, planPath := writePlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := Run(ctx, Options{PlanPath: planPath, Binary: bin, OutDir: filepath.Join(dir, "run"), Env: []string{testenv.ScopeEnv(t)}})
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run with a cancelled context: err = %v, want ErrInterrupted", err)
	}
	if res != nil {
		t.Errorf("Result %+v before the run directory exists, want nil", res)
	}

	plan, err := plan.Load(planPath)
	if err != nil {
		t.Fatal(err)
	}
	gdb, err := preflight.FindTool("gdb", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := validateLocations(ctx, gdb, bin, 0, plan, append(os.Environ(), testenv.ScopeEnv(t)), 5e9); !errors.Is(err, ErrInterrupted) {
		t.Errorf("validateLocations with a cancelled context: err = %v, want ErrInterrupted", err)
	}
}

// With every > 1, gdb's ignore count swallows the hits after the last
// snapshot: the breakpoint's hits still count every call, as gdb does.
// leak 11 calls handle_request 11 times; every 3 snapshots hits 1, 4, 7, 10.
// skip 2 leaves 9 hits that count (snapshots at 1, 4, 7).
func TestRunHitsCountIgnoredHits(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n    every: 3\n"+
				"  - name: skipped\n    location: keep\n    every: 3\n    skip: 2\n", bin, "11")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			type count struct{ Hits, Snapshots int }
			var got []count
			for _, b := range m.Breakpoints {
				got = append(got, count{b.Hits, b.Snapshots})
			}
			if diff := cmp.Diff([]count{{11, 4}, {9, 3}}, got); diff != "" {
				t.Errorf("breakpoints' hits and snapshots (-want +got):\n%s", diff)
			}
		})
	}
}

// run.json lists the stops while the run goes on, so that a snapctl killed
// outright leaves a run directory that accounts for its snapshots: a
// program that ticks 50 times and then blocks has its five snapshots in
// run.json, with status failed and the reason, before the run ends.
func TestRunManifestDuringRun(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	out := filepath.Join(t.TempDir(), "run")
	cancel, done, m := startTicksRun(t, out)
	if m.Status != runjson.StatusFailed || !strings.Contains(m.Error, "had not ended") {
		t.Errorf("status %q, error %q during the run; want failed and why", m.Status, m.Error)
	}
	// A snapshot takes its own name once a run.json that lists it is
	// written: just after.
	for _, st := range m.Stops {
		var err error
		for deadline := testenv.NewDeadline(10 * time.Second); !deadline.Passed(); time.Sleep(10 * time.Millisecond) {
			if _, err = os.Stat(filepath.Join(out, st.Snapshot)); err == nil {
				break
			}
		}
		if err != nil {
			t.Errorf("stop %d: %v", st.Seq, err)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Errorf("Run = %v, want ErrInterrupted", err)
	}
	if final := readManifest(t, out); final.Status != runjson.StatusInterrupt || final.Error == unfinished {
		t.Errorf("final status %q, error %q", final.Status, final.Error)
	}
}

// A location that names two functions stops in each in turn, and every
// stop records the frame it stopped in: the agent reads a breakpoint's
// frame once per address only while the breakpoint has one location.
func TestStopFrameOfEachLocation(t *testing.T) {
	t.Parallel()
	const src = "testdata/overload.cpp"
	bin := testenv.Build(t, src)
	var want []int
	for range 3 {
		want = append(want, testenv.LineOf(t, src, "// note(int)"), testenv.LineOf(t, src, "// note(double)"))
	}
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: note\n    location: note\n", bin, "3")
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, s := range readManifest(t, res.Dir).Stops {
				got = append(got, s.Frame.Line)
				if !strings.HasPrefix(s.Frame.Function, "note") || s.Frame.File != "overload.cpp" {
					t.Errorf("stop %d: frame %+v, want one of note's", s.Seq, s.Frame)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the stops' lines (-want +got):\n%s", diff)
			}
		})
	}
}

// startTicksRun starts a massif run of ticks.c into out, rewriting
// run.json every 50 ms, and returns once run.json lists its 5 stops (50
// ticks, a stop every 10; the program then blocks): the run's cancel,
// the channel its error comes on, and that run.json.
func startTicksRun(t *testing.T, out string) (context.CancelFunc, <-chan error, runjson.Manifest) {
	t.Helper()
	bin := testenv.Build(t, "../testdata/e2e/ticks.c")
	_, planPath := writePlan(t, "breakpoints:\n  - name: tick\n    location: tick\n    every: 10\n")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, Options{Timeouts: Timeouts{ManifestEvery: 50 * time.Millisecond}, PlanPath: planPath, Binary: bin, Args: []string{"50"}, OutDir: out,
			Env: []string{testenv.ScopeEnv(t)}})
		done <- err
	}()
	var m runjson.Manifest
	for deadline := testenv.NewDeadline(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if data, err := os.ReadFile(filepath.Join(out, manifestFile)); err == nil && json.Unmarshal(data, &m) == nil && len(m.Stops) == 5 {
			return cancel, done, m
		}
		select {
		case err := <-done:
			t.Fatalf("the run ended (%v) before run.json listed its 5 stops", err)
		default:
		}
		if deadline.Passed() {
			t.Fatalf("run.json never listed 5 stops during the run: %+v", m.Stops)
		}
	}
}
