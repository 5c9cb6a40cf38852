package main

// Helpers for the end-to-end and fault-injection tests: they run the real
// snapctl binary as a subprocess, exactly as a user would, against C and C++
// fixtures under valgrind and gdb, and read back the run directory.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// runFile mirrors run.json, schema snapctl.run/v2 (docs/design.md,
// "run.json, schema snapctl.run/v2"). Fields the tests do not look at are
// left out; unknown fields are ignored, since the schema allows additions.
// Sites and suspects name their stacks in Stacks by stack_id; readRunFile
// puts the stacks in their place.
type runFile struct {
	Schema string `json:"schema"`
	Status string `json:"status"`
	Error  string `json:"error"` // why a run did not complete
	// ExitCode and ExitReason are what snapctl exited with, and why.
	ExitCode    *int      `json:"exit_code"`
	ExitReason  string    `json:"exit_reason"`
	Target      runTarget `json:"target"`
	GdbAgent    bool      `json:"gdb_agent"`
	Breakpoints []struct {
		Name      string `json:"name"`
		Hits      int    `json:"hits"`
		Snapshots int    `json:"snapshots"`
		Deleted   bool   `json:"deleted"`
	} `json:"breakpoints"`
	Stops    []runStop    `json:"stops"`
	Events   []runEvent   `json:"events"`
	Diffs    []runDiff    `json:"diffs"`
	Suspects []runSuspect `json:"suspects"`
	Stacks   [][]frame    `json:"stacks"`
}

// readRunFile decodes run.json and resolves every stack_id. A site or
// suspect that repeats its stack inline, or names none, is an error: v2
// stores each stack once.
func readRunFile(data []byte) (*runFile, error) {
	run := new(runFile)
	if err := json.Unmarshal(data, run); err != nil {
		return nil, err
	}
	resolve := func(what string, id *int, stack *[]frame) error {
		switch {
		case *stack != nil:
			return fmt.Errorf("%s repeats its stack inline", what)
		case id == nil:
			return fmt.Errorf("%s has no stack_id", what)
		case *id < 0 || *id >= len(run.Stacks):
			return fmt.Errorf("%s: stack_id %d out of %d stacks", what, *id, len(run.Stacks))
		}
		*stack = run.Stacks[*id]
		return nil
	}
	for i := range run.Diffs {
		for j := range run.Diffs[i].Sites {
			site := &run.Diffs[i].Sites[j]
			if err := resolve(fmt.Sprintf("diffs[%d].sites[%d]", i, j), site.StackID, &site.Stack); err != nil {
				return nil, err
			}
			site.StackID = nil
		}
	}
	for i := range run.Suspects {
		s := &run.Suspects[i]
		if err := resolve(fmt.Sprintf("suspects[%d]", i), s.StackID, &s.Stack); err != nil {
			return nil, err
		}
		s.StackID = nil
	}
	return run, nil
}

type runTarget struct {
	Argv     []string        `json:"argv"`
	ExitCode *int            `json:"exit_code"`
	Signal   json.RawMessage `json:"signal"`
	Crash    *struct {
		Signal    string  `json:"signal"`
		Backtrace []frame `json:"backtrace"`
	} `json:"crash"`
}

// runEvent is a stop that was no declared breakpoint's, or a problem at a
// stop that the run survived.
type runEvent struct {
	Kind    string `json:"kind"` // "signal", "unexpected-stop", "stop-abandoned", ...
	Signal  string `json:"signal"`
	Reason  string `json:"reason"` // gdb's stop reason
	Frame   frame  `json:"frame"`
	Message string `json:"message"`
}

// signal returns the target's fatal signal as run.json spells it ("SIGSEGV"
// or a number), or "" when it is null or absent.
func (t runTarget) signal() string {
	s := strings.TrimSpace(string(t.Signal))
	if s == "" || s == "null" {
		return ""
	}
	var name string
	if json.Unmarshal(t.Signal, &name) == nil {
		return name
	}
	return s
}

type runStop struct {
	Seq        int       `json:"seq"`
	Breakpoint string    `json:"breakpoint"`
	Hit        int       `json:"hit"`
	Phase      string    `json:"phase"`
	Thread     runThread `json:"thread"`
	Frame      frame     `json:"frame"`
	// Backtrace is the stopped thread's stack, innermost first.
	Backtrace []frame `json:"backtrace"`
	Snapshot  string  `json:"snapshot"`
	HeapBytes int64   `json:"heap_bytes"`
	// Threads is every thread of the target at the stop.
	Threads []runThread `json:"threads"`
	// Commands are the breakpoint's gdb commands and what they printed.
	Commands []struct {
		Command string `json:"command"`
		Output  string `json:"output"`
	} `json:"commands"`
}

type runThread struct {
	ID       string `json:"id"`
	TargetID string `json:"target_id"`
	Details  string `json:"details"`
	Frame    *frame `json:"frame,omitempty"`
}

type runDiff struct {
	Kind       string    `json:"kind"`
	Breakpoint string    `json:"breakpoint"`
	FromSeq    int       `json:"from_seq"`
	ToSeq      int       `json:"to_seq"`
	DeltaBytes int64     `json:"delta_bytes"`
	Sites      []runSite `json:"sites"`
}

type runSite struct {
	Frame frame   `json:"frame"`
	Stack []frame `json:"stack"`
	// StackID names Stack in runFile.Stacks; nil once resolved.
	StackID *int  `json:"stack_id"`
	Before  int64 `json:"before"`
	After   int64 `json:"after"`
	Delta   int64 `json:"delta"`
}

type runSuspect struct {
	Frame            frame   `json:"frame"`
	Stack            []frame `json:"stack"`
	StackID          *int    `json:"stack_id"` // nil once resolved
	Breakpoint       string  `json:"breakpoint"`
	GrowthPerHit     int64   `json:"growth_per_hit"`
	GrowingIntervals int     `json:"growing_intervals"`
	Intervals        int     `json:"intervals"`
	TotalGrowth      int64   `json:"total_growth"`
}

// frame is a code location as run.json spells it. The object a frame lives
// in is left out on purpose: it names paths of the machine.
type frame struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
}

func (f frame) String() string {
	if f.File == "" {
		return f.Function
	}
	return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
}

// changed returns the sites of d whose bytes changed. Whether run.json also
// lists unchanged sites is not part of the schema, so tests compare only
// the changed ones.
func (d runDiff) changed() []runSite {
	var out []runSite
	for _, s := range d.Sites {
		if s.Delta != 0 {
			out = append(out, s)
		}
	}
	return out
}

// diffsOf returns the diffs of one kind ("between-hits" or "within-call")
// for one breakpoint, in run.json order.
func (r *runFile) diffsOf(kind, breakpoint string) []runDiff {
	var out []runDiff
	for _, d := range r.Diffs {
		if d.Kind == kind && d.Breakpoint == breakpoint {
			out = append(out, d)
		}
	}
	return out
}

// stopsOf returns the stops of one breakpoint, in run.json order.
func (r *runFile) stopsOf(breakpoint string) []runStop {
	var out []runStop
	for _, s := range r.Stops {
		if s.Breakpoint == breakpoint {
			out = append(out, s)
		}
	}
	return out
}

// session is one `snapctl run` invocation.
type session struct {
	Plan  string   // the plan's YAML text, written to plan.yaml in a temporary directory
	Bin   string   // the target binary
	Args  []string // the target's arguments, passed after `--`
	Flags []string // snapctl flags besides --out and --quiet
	// Out is the run directory given to --out; by default a fresh path under
	// t.TempDir(). Set NoOut to leave --out off.
	Out   string
	NoOut bool
	// Loud leaves --quiet off.
	Loud bool
	// Env is added to the test's environment for snapctl.
	Env []string
	// Limit caps the whole command; the test fails (and kills snapctl) when
	// it is reached. Default 2 minutes on a quiet machine, stretched on a
	// loaded one (testenv.Deadline).
	Limit time.Duration
}

// result is what one snapctl invocation left behind.
type result struct {
	Code           int
	Stdout, Stderr string
	Out            string   // the run directory
	Run            *runFile // nil when run.json was not written
	Elapsed        time.Duration
}

// running is a snapctl invocation in progress, for the tests that act on it
// while it runs.
type running struct {
	t      testing.TB
	cmd    *exec.Cmd
	cancel context.CancelFunc
	out    string // the run directory, "" until known
	dir    string // snapctl's working directory
	stdout bytes.Buffer
	stderr testenv.Buffer
	start  time.Time
}

// snapctlBinary builds the real snapctl binary once per test process.
func snapctlBinary(t testing.TB) string {
	t.Helper()
	return testenv.BuildCommand(t, ".")
}

// startSnapctl writes the plan and starts snapctl run without waiting for it.
func startSnapctl(t testing.TB, s session) *running {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	bin := snapctlBinary(t)
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(planPath, []byte(s.Plan), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run"}
	out := s.Out
	if !s.NoOut {
		if out == "" {
			out = filepath.Join(dir, "run")
		}
		args = append(args, "--out", out)
	}
	if !s.Loud {
		args = append(args, "--quiet")
	}
	args = append(args, s.Flags...)
	args = append(args, "--", planPath, s.Bin)
	args = append(args, s.Args...)

	limit := s.Limit
	if limit == 0 {
		limit = 2 * time.Minute
	}
	ctx, cancel := testenv.Context(limit)
	if s.NoOut {
		out = "" // found under DIR/snapctl-runs/ once the run is over
	}
	r := &running{t: t, cancel: cancel, out: out, dir: dir}
	r.cmd = exec.CommandContext(ctx, bin, args...)
	r.cmd.Dir = dir
	// The mark lets this test find its own gdb, vgdb and valgrind among
	// those of the tests running beside it.
	r.cmd.Env = append(append(os.Environ(), testenv.ScopeEnv(t)), s.Env...)
	r.cmd.Stdout = &r.stdout
	r.cmd.Stderr = &r.stderr
	// The target's output passes through snapctl's stdout; an orphaned
	// child holding the pipe must not make Wait hang.
	r.cmd.WaitDelay = 5 * time.Second
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting snapctl: %v", err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.cmd.Wait()
		}
		cancel()
		// vgdb outlives a killed gdb and is adopted by the test binary.
		testenv.ReapOrphans()
	})
	return r
}

// signal sends sig to the snapctl process, as a terminal's Ctrl-C does (its
// children run in their own process groups, so only snapctl gets it).
func (r *running) signal(sig syscall.Signal) {
	r.t.Helper()
	if err := r.cmd.Process.Signal(sig); err != nil {
		r.t.Fatalf("sending %v to snapctl: %v", sig, err)
	}
}

// waitDelivered waits until sig is no longer pending for snapctl: the
// kernel has handed it to snapctl's handler.
func (r *running) waitDelivered(sig syscall.Signal) {
	r.t.Helper()
	bit := uint64(1) << (uint(sig) - 1)
	pending := func() bool {
		files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", r.cmd.Process.Pid))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				name, mask, ok := strings.Cut(line, ":\t")
				if !ok || (name != "SigPnd" && name != "ShdPnd") {
					continue
				}
				if v, err := strconv.ParseUint(mask, 16, 64); err == nil && v&bit != 0 {
					return true
				}
			}
		}
		return false
	}
	for deadline := testenv.NewDeadline(10 * time.Second); pending(); time.Sleep(5 * time.Millisecond) {
		if deadline.Passed() {
			r.t.Fatalf("%v still pending for snapctl after %v", sig, deadline)
		}
	}
}

// wait waits for snapctl to exit and reads the run directory.
func (r *running) wait() *result {
	r.t.Helper()
	err := r.cmd.Wait()
	elapsed := time.Since(r.start)
	r.cancel()
	if r.out == "" {
		// The default run directory: one new folder under ./snapctl-runs.
		if names, _ := filepath.Glob(filepath.Join(r.dir, "snapctl-runs", "*")); len(names) == 1 {
			r.out = names[0]
		}
	}
	res := &result{Stdout: r.stdout.String(), Stderr: r.stderr.String(), Out: r.out, Elapsed: elapsed}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		res.Code = ee.ExitCode()
	default:
		r.t.Fatalf("snapctl did not exit by itself (%v) after %v\nstderr:\n%s", err, elapsed, res.Stderr)
	}
	if r.out != "" {
		data, err := os.ReadFile(filepath.Join(r.out, "run.json"))
		if err == nil {
			if res.Run, err = readRunFile(data); err != nil {
				r.t.Fatalf("run.json: %v\n%s", err, data)
			}
		}
	}
	return res
}

// runSnapctl runs snapctl to the end.
func runSnapctl(t testing.TB, s session) *result {
	t.Helper()
	return startSnapctl(t, s).wait()
}

// mustRun runs snapctl and fails the test unless it exited with code and
// wrote run.json.
func mustRun(t testing.TB, s session, code int) *result {
	t.Helper()
	res := runSnapctl(t, s)
	if res.Code != code {
		t.Fatalf("snapctl exited with %d, want %d\nstdout:\n%s\nstderr:\n%s", res.Code, code, res.Stdout, res.Stderr)
	}
	if res.Run == nil {
		t.Fatalf("no run.json in %s\nstderr:\n%s", res.Out, res.Stderr)
	}
	if res.Run.ExitCode == nil || *res.Run.ExitCode != code || res.Run.ExitReason == "" {
		t.Fatalf("run.json exit_code %v (%q), want %d and a reason", res.Run.ExitCode, res.Run.ExitReason, code)
	}
	return res
}

// sharedRuns holds the run directories of runs that several tests read
// and none changes (compare's inputs): each such run is made once per test
// binary, by the first test that asks for it, and removed by TestMain.
var sharedRuns struct {
	mu   sync.Mutex
	dir  string
	runs map[string]*sharedRun
}

type sharedRun struct {
	mu  sync.Mutex
	out string
	res *result
}

// mustRunShared is mustRun for a run that the test only reads: a test
// asking for the same session and exit code as an earlier one gets that
// run's result, whose directory it must not change. A session that
// fails in the first test that asks for it is run again by the next.
func mustRunShared(t testing.TB, s session, code int) *result {
	t.Helper()
	if s.Out != "" || s.NoOut || s.Env != nil {
		t.Fatalf("mustRunShared: a shared run has its own directory and environment")
	}
	key := fmt.Sprintf("%q %q %q %q %d", s.Plan, s.Bin, s.Args, s.Flags, code)
	sharedRuns.mu.Lock()
	if sharedRuns.runs == nil {
		dir, err := os.MkdirTemp("", "snapctl-shared-runs-")
		if err != nil {
			sharedRuns.mu.Unlock()
			t.Fatal(err)
		}
		sharedRuns.dir, sharedRuns.runs = dir, map[string]*sharedRun{}
	}
	sr := sharedRuns.runs[key]
	if sr == nil {
		sr = &sharedRun{out: filepath.Join(sharedRuns.dir, fmt.Sprintf("run-%d", len(sharedRuns.runs)+1))}
		sharedRuns.runs[key] = sr
	}
	sharedRuns.mu.Unlock()
	s.Out = sr.out
	sr.mu.Lock()
	defer sr.mu.Unlock()
	if sr.res == nil {
		os.RemoveAll(s.Out) // what a failed first attempt left
		sr.res = mustRun(t, s, code)
	}
	return sr.res
}

// removeSharedRuns removes the shared runs' directories.
func removeSharedRuns() {
	if sharedRuns.dir != "" {
		os.RemoveAll(sharedRuns.dir)
	}
}

// snapshotFiles lists the massif files kept in a run directory.
func snapshotFiles(t testing.TB, out string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(out, "snapshots", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkSnapshotsKept fails the test unless every stop's snapshot file exists
// and holds a gzip-compressed massif snapshot.
func checkSnapshotsKept(t testing.TB, res *result) {
	t.Helper()
	for _, s := range res.Run.Stops {
		path := filepath.Join(res.Out, s.Snapshot)
		data, err := gunzipFile(path)
		if err != nil {
			t.Errorf("stop %d: %v", s.Seq, err)
			continue
		}
		if !bytes.Contains(data, []byte("snapshot=0")) || !bytes.Contains(data, []byte("heap_tree=")) {
			t.Errorf("stop %d: %s is not a massif snapshot:\n%s", s.Seq, path, data)
		}
	}
}

// gunzipFile returns what the gzip file at path holds, and an error when it
// is not gzip.
func gunzipFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}
