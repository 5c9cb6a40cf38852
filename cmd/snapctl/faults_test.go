package main

// The fault-injection suite: real runs of snapctl against fixtures, with a
// fault injected at a chosen moment (a child killed, a signal to snapctl, a
// target that crashes, hangs or forks, a broken plan). Each case checks
// run.json's status, the exit code, the message, the snapshots kept, and that
// no valgrind, vgdb or gdb of the run is left (testenv.NoLeftovers).

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// A moment of a run at which a fault is injected.
type moment string

const (
	atStartup moment = "startup" // the process exists, no stop has happened yet
	atStop    moment = "stop"    // gdb is running a breakpoint's commands
	atRunning moment = "running" // the target runs between two stops
)

// faultPlan's breakpoint runs `shell sleep 2` at every stop, so that a run
// spends two seconds at each stop and the tests can see it there: the
// sleep is a child of gdb.
const faultPlan = `breakpoints:
  - name: request
    location: handle_request
    commands: ["shell sleep 2"]
`

// reachWithin bounds each wait of reach: valgrind's start and first
// snapshot took more than 30 s at load average 50 on 2 cores.
const reachWithin = 2 * time.Minute

// reach starts snapctl on the faults fixture and returns once the run is at
// moment m. At atStop the run is at its first stop; at atRunning it has
// taken its first snapshot and the target is sleeping before its next
// request.
func reach(t *testing.T, m moment, extraFlags ...string) *running {
	t.Helper()
	bin := testenv.Build(t, fixtures+"faults.c")
	s := session{Bin: bin, Flags: extraFlags, Limit: 3 * time.Minute}
	// Every test that reaches a moment ends the run there (a kill, a
	// signal): the slow target's 100 requests, 20 s of sleep, only keep
	// it going while the test looks for its processes. With 10 the run
	// could end first on a loaded machine, where each look at the process
	// table takes a while, and the test found no gdb left to kill.
	switch m {
	case atStartup:
		s.Plan, s.Args = requestPlan, []string{"slow", "100"}
	case atStop:
		s.Plan, s.Args = faultPlan, []string{"exit", "3"}
	case atRunning:
		s.Plan, s.Args = requestPlan, []string{"slow", "100"}
	}
	r := startSnapctl(t, s)
	switch m {
	case atStartup:
		testenv.WaitFor(t, testenv.Valgrind, reachWithin)
	case atStop:
		waitDescendant(t, "sleep 2", reachWithin)
	case atRunning:
		waitFile(t, r, filepath.Join(r.out, "snapshots"), reachWithin)
		// The target sleeps 200 ms before each request: once valgrind
		// is seen in that sleep after the first snapshot, the target runs
		// between two stops.
		vg := testenv.WaitFor(t, testenv.Valgrind, reachWithin)
		testenv.WaitForProc(t, "valgrind sleeping between requests", func(p testenv.Proc) bool {
			return p.PID == vg.PID && testenv.Sleeping(p.PID)
		}, reachWithin)
	}
	return r
}

// waitDescendant waits until a process of the test's own run runs cmdline.
func waitDescendant(t *testing.T, cmdline string, timeout time.Duration) testenv.Proc {
	t.Helper()
	return testenv.WaitForProc(t, fmt.Sprintf("%q", cmdline), func(p testenv.Proc) bool { return p.Cmdline == cmdline }, timeout)
}

// waitFile waits until dir holds at least one file.
func waitFile(t *testing.T, r *running, dir string, timeout time.Duration) {
	t.Helper()
	for deadline := testenv.NewDeadline(timeout); ; time.Sleep(20 * time.Millisecond) {
		if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) > 0 {
			return
		}
		// A snapctl that has ended will write nothing more: it says
		// why on its stderr.
		if !proc.Alive(r.cmd.Process.Pid) {
			t.Fatalf("snapctl ended before anything appeared in %s\nstderr:\n%s", dir, r.stderr.String())
		}
		if deadline.Passed() {
			t.Fatalf("nothing appeared in %s within %v\nstderr so far:\n%s", dir, deadline, r.stderr.String())
		}
	}
}

// noneLike fails the test if a process of the test's own run still runs
// cmdline once the run is over: gdb's shell commands must go with gdb.
func noneLike(t *testing.T, cmdline string) {
	t.Helper()
	var left []testenv.Proc
	for deadline := testenv.NewDeadline(3 * time.Second); !deadline.Passed(); time.Sleep(50 * time.Millisecond) {
		if left = testenv.Mine(t, func(p testenv.Proc) bool { return p.Cmdline == cmdline }); len(left) == 0 {
			return
		}
	}
	for _, p := range left {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	t.Errorf("%q left running after the run: %+v", cmdline, left)
}

// checkPartial checks a run that ended early: run.json has the status, every
// stop it lists kept its snapshot, and at least min stops were recorded.
func checkPartial(t *testing.T, res *result, status string, min int) {
	t.Helper()
	if res.Run == nil {
		t.Fatalf("no run.json in %s\nstderr:\n%s", res.Out, res.Stderr)
	}
	if res.Run.Status != status {
		t.Errorf("status = %q, want %q (error %q)", res.Run.Status, status, res.Run.Error)
	}
	if len(res.Run.Stops) < min {
		t.Errorf("%d stops recorded, want at least %d", len(res.Run.Stops), min)
	}
	checkSnapshotsKept(t, res)
	if got, want := len(snapshotFiles(t, res.Out)), len(res.Run.Stops); got != want {
		t.Errorf("%d files in snapshots/, want one per recorded stop (%d)", got, want)
	}
}

// oneLine fails the test unless stderr ends with exactly one "snapctl: "
// line, the message a user sees.
func oneLine(t *testing.T, stderr string) string {
	t.Helper()
	var msgs []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "snapctl: ") {
			msgs = append(msgs, l)
		}
	}
	if len(msgs) != 1 {
		t.Errorf("stderr holds %d snapctl: lines, want 1:\n%s", len(msgs), stderr)
		return strings.Join(msgs, "\n")
	}
	t.Logf("message: %s", msgs[0])
	return msgs[0]
}

// A child killed from outside with SIGKILL, at each moment of a run: snapctl
// ends with exit code 1, says which child died, writes a partial report with
// status failed that keeps every snapshot taken, and leaves no process.
func TestChildKilled(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	for _, tool := range []testenv.Tool{testenv.Valgrind, testenv.Vgdb, testenv.Gdb} {
		for _, m := range []moment{atStartup, atStop, atRunning} {
			t.Run(fmt.Sprintf("%s/%s", tool, m), func(t *testing.T) {
				t.Parallel()
				testenv.NoLeftovers(t)
				r := reach(t, m)
				victim := testenv.WaitFor(t, tool, 30*time.Second)
				if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
					t.Fatalf("killing %s: %v", tool, err)
				}
				killed := time.Now()
				res := r.wait()
				if d := time.Since(killed); d > testenv.Scaled(45*time.Second) { // a hang guard
					t.Errorf("snapctl took %v to end after %s died", d, tool)
				}
				if res.Code != exitFailure {
					t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
				}
				msg := oneLine(t, res.Stderr)
				if !regexp.MustCompile(`\b` + string(tool) + `\b`).MatchString(msg) {
					t.Errorf("message %q does not name %s", msg, tool)
				}
				// valgrind and gdb are snapctl's own children: it knows
				// how they died. vgdb is gdb's child; gdb only sees the
				// connection drop.
				if tool != testenv.Vgdb && !regexp.MustCompile(`SIGKILL|signal 9|signal: killed`).MatchString(msg) {
					t.Errorf("message %q does not say that %s was killed by SIGKILL", msg, tool)
				}
				min := 0
				if m != atStartup {
					min = 1
				}
				checkPartial(t, res, "failed", min)
				if res.Run != nil && !strings.Contains(res.Run.Error, string(tool)) {
					t.Errorf("run.json error %q does not name %s", res.Run.Error, tool)
				}
				noneLike(t, "sleep 2")
			})
		}
	}
}

// SIGINT, SIGTERM and SIGHUP at each moment: the run stops, the partial
// report says interrupted, every snapshot taken is kept, snapctl exits with
// 130 within a few seconds and leaves no process.
func TestInterrupted(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	tests := []struct {
		sig syscall.Signal
		at  moment
	}{
		{syscall.SIGINT, atStartup},
		{syscall.SIGINT, atStop},
		{syscall.SIGINT, atRunning},
		{syscall.SIGTERM, atStop},
		{syscall.SIGTERM, atRunning},
		{syscall.SIGHUP, atRunning},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%s", tt.sig, tt.at), func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			r := reach(t, tt.at)
			r.signal(tt.sig)
			sent := time.Now()
			res := r.wait()
			if d := time.Since(sent); d > testenv.Scaled(45*time.Second) { // a hang guard
				t.Errorf("snapctl took %v to end after %v", d, tt.sig)
			}
			if res.Code != exitInterrupted {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitInterrupted, res.Stderr)
			}
			if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "interrupt") {
				t.Errorf("message %q does not say the run was interrupted", msg)
			}
			min := 0
			if tt.at != atStartup {
				min = 1
			}
			checkPartial(t, res, "interrupted", min)
			noneLike(t, "sleep 2")
		})
	}
}

// A second SIGINT while the first is being handled kills everything at once:
// snapctl does not wait for the stop's two-second command to finish.
func TestSecondInterruptKillsAtOnce(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	plan := `breakpoints:
  - name: request
    location: handle_request
    commands: ["shell sleep 20"]
`
	r := startSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{"exit", "3"}, Limit: reachWithin + time.Minute})
	waitDescendant(t, "sleep 20", reachWithin)
	r.signal(syscall.SIGINT)
	// Two signals pending at once are one: the second is sent once the
	// first has been delivered to snapctl.
	r.waitDelivered(syscall.SIGINT)
	r.signal(syscall.SIGINT)
	sent := time.Now()
	res := r.wait()
	// Well under the 20 s that waiting for the command would take.
	if d := time.Since(sent); d > testenv.Scaled(15*time.Second) {
		t.Errorf("snapctl took %v to end after the second SIGINT", d)
	}
	if res.Code != exitInterrupted {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitInterrupted, res.Stderr)
	}
	if res.Run != nil && res.Run.Status != "interrupted" {
		t.Errorf("run.json status %q, want interrupted or no run.json", res.Run.Status)
	}
	noneLike(t, "sleep 20")
}

// --timeout ends the run with status timeout and exit code 124, keeping the
// snapshots taken so far.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	// A loaded machine can spend 10 s starting valgrind: a run that timed
	// out before its first stop is done again with twice the time. The
	// target's 1,000 requests (200 s of sleep) outlast the longest of
	// those timeouts: with 100 a run given 40 s at load average 25
	// completed first.
	timeout := 10 * time.Second
	var res *result
	for {
		res = runSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"slow", "1000"},
			Flags: []string{"--timeout", timeout.String()}, Limit: timeout + 2*time.Minute})
		if res.Code != exitTimeout || res.Run == nil || len(res.Run.Stops) > 0 || timeout >= 80*time.Second {
			break
		}
		t.Logf("no stop before --timeout %v; again with twice the time", timeout)
		timeout *= 2
	}
	if res.Code != exitTimeout {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitTimeout, res.Stderr)
	}
	if res.Elapsed > timeout+testenv.Scaled(35*time.Second) { // a hang guard
		t.Errorf("a run with --timeout %v took %v", timeout, res.Elapsed)
	}
	if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "timeout") && !strings.Contains(msg, "timed out") {
		t.Errorf("message %q does not say the run timed out", msg)
	}
	checkPartial(t, res, "timeout", 1)
}

// A target that dies of a signal: status target-crashed with the signal and
// the stack where it died, exit code 12, the signal and the function named on
// the terminal, and the snapshots and diffs of the stops before the crash.
func TestTargetCrashes(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	tests := []struct {
		name   string
		src    string
		args   []string
		signal string
		where  string // the innermost function of the program's own code on the crash stack
	}{
		// With --vgdb=yes valgrind reports a fault at the start of the
		// translated block (the line may be the function's first). By
		// default valgrind chases calls into the caller's block, which
		// would put the crash in main; snapctl turns that off.
		{"segv", "faults.c", []string{"segv", "3"}, "SIGSEGV", "crash_here"},
		{"abort", "faults.c", []string{"abort", "3"}, "SIGABRT", "abort_here"},
		{"uncaught exception", "throw.cpp", []string{"3"}, "SIGABRT", "fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			bin := testenv.Build(t, fixtures+tt.src)
			res := runSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: tt.args, Limit: time.Minute})
			if res.Code != exitCrashed {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitCrashed, res.Stderr)
			}
			msg := oneLine(t, res.Stderr)
			if !strings.Contains(msg, tt.signal) || !strings.Contains(msg, " "+tt.where+" (") {
				t.Errorf("message %q does not name %s and %s", msg, tt.signal, tt.where)
			}
			checkPartial(t, res, "target-crashed", 3)
			if res.Run == nil {
				return
			}
			if got := res.Run.Target.signal(); got != tt.signal {
				t.Errorf("target.signal = %q, want %q", got, tt.signal)
			}
			if c := res.Run.Target.Crash; c == nil || !stackHas(c.Backtrace, tt.where) {
				t.Errorf("target.crash = %+v, want a backtrace through %s", c, tt.where)
			}
			var deltas []int64
			for _, d := range res.Run.diffsOf("between-hits", "request") {
				deltas = append(deltas, d.DeltaBytes)
			}
			if diff := cmp.Diff([]int64{24, 24}, deltas); diff != "" {
				t.Errorf("between-hits deltas before the crash (-want +got):\n%s", diff)
			}
		})
	}
}

// killAsBreakpointsGoIn is a gdb script for a plan's init: it kills the
// program with SIGKILL when gdb first sets one of the plan's breakpoints
// into it, after gdb has started it and before it has inserted them; it
// gives the program a tenth of a second to die before gdb goes on.
const killAsBreakpointsGoIn = `import gdb, os, signal, time
def kill_program(bp):
    inferior = gdb.selected_inferior()
    if bp.number >= 1 and inferior.pid > 0:
        gdb.events.breakpoint_modified.disconnect(kill_program)
        os.kill(inferior.pid, signal.SIGKILL)
        time.sleep(0.1)
gdb.events.breakpoint_modified.connect(kill_program)
`

// A program killed as gdb inserts the plan's breakpoints is the target's
// death, natively and under --sites: exit 12 naming SIGKILL, not exit 1
// for gdb's "Cannot insert breakpoint 1. Cannot access memory at address
// ...". gdb has reaped the program by then without a word, or it is still
// dying; snapctl asks gdb which process it started and looks. (The fault
// matrix's "kill -9 target/start-up [native]" exited 1 so in a CI run.)
func TestKilledAsBreakpointsGoIn(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, fixtures+"faults.c")
	script := filepath.Join(t.TempDir(), "kill.py")
	if err := os.WriteFile(script, []byte(killAsBreakpointsGoIn), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := requestPlan + "gdb:\n  init:\n    - source " + script + "\n"
	for _, mode := range []struct {
		name  string
		flags []string
	}{
		{"native", []string{"--backend", "native"}},
		{"sites", []string{"--backend", "native", "--sites"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			if mode.name == "sites" {
				testenv.MustHave(t, "heaptrack")
			}
			testenv.NoLeftovers(t)
			for range 2 {
				res := runSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{"slow", "15"}, Flags: mode.flags, Limit: time.Minute})
				if res.Code != exitCrashed || !strings.Contains(oneLine(t, res.Stderr), "target crashed with SIGKILL") {
					t.Fatalf("exit code %d, want %d with the target's SIGKILL\nstderr:\n%s", res.Code, exitCrashed, res.Stderr)
				}
				checkPartial(t, res, "target-crashed", 0)
			}
		})
	}
}

func stackHas(stack []frame, function string) bool {
	for _, f := range stack {
		if f.Function == function || strings.HasPrefix(f.Function, function+"(") {
			return true
		}
	}
	return false
}

// A stop whose actions hang (around_call's finish in a function that blocks
// forever) is abandoned after the plan's stop_timeout with a message naming
// the breakpoint; the snapshots taken before are kept and the run ends
// cleanly when --timeout expires, since the target never returns.
func TestStopHangs(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	plan := `stop_timeout: 2s
breakpoints:
  - name: request
    location: handle_request
  - name: stuck
    location: stuck
    around_call: true
`
	// --timeout leaves the stop_timeout time to act however slowly
	// valgrind starts on a loaded machine; the target never returns, so
	// the timeout is what ends the run. A run that timed out before the
	// stuck stop (valgrind took most of 20 s to start at load average
	// 40) is done again with twice the time, as TestRunTimeout does.
	// A stuck stop reached so late that --timeout came before its
	// stop_timeout (at load average 25) is done again the same way.
	timeout := 20 * time.Second
	var res *result
	abandonedStuck := func(e runEvent) bool { return e.Kind == "stop-abandoned" && strings.Contains(e.Message, "stuck") }
	for {
		res = runSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{"hang", "2"},
			Flags: []string{"--timeout", timeout.String()}, Limit: timeout + 2*time.Minute})
		abandoned := res.Run != nil && slices.ContainsFunc(res.Run.Events, abandonedStuck)
		if res.Code != exitTimeout || abandoned || timeout >= 80*time.Second {
			break
		}
		t.Logf("no stuck stop abandoned before --timeout %v; again with twice the time", timeout)
		timeout *= 2
	}
	if res.Code != exitTimeout {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitTimeout, res.Stderr)
	}
	if res.Elapsed > timeout+testenv.Scaled(40*time.Second) { // a hang guard
		t.Errorf("run took %v with --timeout %v", res.Elapsed, timeout)
	}
	checkPartial(t, res, "timeout", 3)
	if res.Run == nil {
		return
	}
	var phases []string
	for _, s := range res.Run.Stops {
		phases = append(phases, s.Breakpoint+"/"+s.Phase)
	}
	if diff := cmp.Diff([]string{"request/hit", "request/hit", "stuck/hit"}, phases); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	abandoned := false
	for _, e := range res.Run.Events {
		if e.Kind == "stop-abandoned" && strings.Contains(e.Message, "stuck") {
			abandoned = true
		}
	}
	if !abandoned {
		t.Errorf("no stop-abandoned event naming stuck in %+v", res.Run.Events)
	}
	if !strings.Contains(res.Stderr, "stuck") {
		t.Errorf("stderr does not name the abandoned stop:\n%s", res.Stderr)
	}
	t.Logf("stderr:\n%s", res.Stderr)
}

// A target that forks: the child runs on its own (valgrind's gdbserver does
// not follow it) and the parent's stops are the run's, with the parent's
// heap only.
func TestTargetForks(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"fork", "2"}, Limit: 3 * time.Minute}, exitOK)
	checkCompleted(t, res)
	var heaps []int64
	for _, s := range res.Run.stopsOf("request") {
		heaps = append(heaps, s.HeapBytes)
	}
	if diff := cmp.Diff([]int64{0, 24, 48}, heaps); diff != "" {
		t.Errorf("heap at the parent's stops (-want +got):\n%s", diff)
	}
}

// A plan full of errors is refused as a whole: exit code 3, one line per
// problem with its file:line:column, and nothing started.
func TestPlanFullOfErrors(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	plan := `valgrind:
  fair_sched: sometimes
breakpoints:
  - name: request
    location: handle_request
    skp: 5
  - name: request
    location: handle_request
  - name: other
    location: handle_request
    every: -1
    max_hits: many
report:
  fail_on:
    growth_per_hit: lots
`
	res := runSnapctl(t, session{Plan: plan, Bin: bin})
	if res.Code != exitPlan {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", res.Code, exitPlan, res.Stderr)
	}
	for _, pos := range []string{
		"plan.yaml:2:15", // fair_sched: sometimes
		"plan.yaml:6:5",  // skp
		"plan.yaml:7:",   // the duplicate name
		"plan.yaml:11:",  // every: -1
		"plan.yaml:12:",  // max_hits: many
		"plan.yaml:15:",  // growth_per_hit: lots
	} {
		if !strings.Contains(res.Stderr, pos) {
			t.Errorf("stderr does not point at %s:\n%s", pos, res.Stderr)
		}
	}
	if !strings.Contains(res.Stderr, `"skip"`) {
		t.Errorf("stderr does not suggest skip for skp:\n%s", res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(res.Out, "run.json")); err == nil {
		t.Error("run.json written for a plan that never ran")
	}
}

// Bad input on the command line or in the environment, each refused before
// anything starts with a clear message and its own exit code.
func TestBadInput(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	leak := testenv.Build(t, fixtures+"leak.c")
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	script := filepath.Join(dir, "script.sh")
	busy := filepath.Join(dir, "busy")
	for path, data := range map[string]string{
		notExec:                         "\x7fELF",
		script:                          "#!/bin/sh\necho hi\n",
		filepath.Join(busy, "keep.txt"): "not snapctl's",
	} {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(script, 0o755)
	// A valgrind that runs but has no vgdb beside it, neither where it
	// is nor where it leads (a wrapper script, not a symlink, which
	// FindVgdb would follow to /usr/bin), with no vgdb on PATH either.
	noVgdb := filepath.Join(dir, "no-vgdb")
	realValgrind, err := exec.LookPath("valgrind")
	if err != nil {
		t.Fatal(err)
	}
	gdb, err := exec.LookPath("gdb")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(noVgdb, 0o755)
	wrapper := filepath.Join(noVgdb, "valgrind")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nexec "+realValgrind+` "$@"`+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		s     session
		code  int
		words []string // the message holds each
	}{
		{"missing binary", session{Bin: filepath.Join(dir, "nope")}, exitInput, []string{"nope"}},
		{"not executable", session{Bin: notExec}, exitInput, []string{"not-executable", "executable"}},
		{"script", session{Bin: script}, exitInput, []string{"script.sh"}},
		{"output directory not empty", session{Bin: leak, Out: busy}, exitInput, []string{"busy", "--force"}},
		{"missing gdb", session{Bin: leak, Flags: []string{"--gdb", filepath.Join(dir, "no-gdb")}}, exitEnvironment, []string{"gdb"}},
		{"missing valgrind", session{Bin: leak, Flags: []string{"--valgrind", filepath.Join(dir, "no-valgrind")}}, exitEnvironment, []string{"valgrind"}},
		{"missing vgdb", session{Bin: leak, Flags: []string{"--valgrind", wrapper, "--gdb", gdb}, Env: []string{"PATH=" + noVgdb}},
			exitEnvironment, []string{"vgdb", "apt-get install valgrind"}},
		{"missing heaptrack", session{Bin: leak, Flags: []string{"--sites", "--heaptrack", filepath.Join(dir, "no-heaptrack")}}, exitEnvironment,
			[]string{"heaptrack is not installed", "no-heaptrack/libheaptrack_preload.so is missing", "apt-get install heaptrack"}},
		{"unresolvable location", session{Bin: leak, Plan: "breakpoints:\n  - name: x\n    location: no_such_function\n"}, exitPlan, []string{"plan.yaml:3:15", "no_such_function"}},
		{"sites under massif", session{Bin: leak, Flags: []string{"--backend", "massif"}, Plan: "native:\n  sites: true\n" + requestPlan}, exitPlan,
			[]string{"plan.yaml:2:10: native.sites", "--backend massif"}},
		{"empty plan", session{Bin: leak, Plan: "# nothing\n"}, exitPlan, []string{"breakpoints"}},
		{"malformed YAML", session{Bin: leak, Plan: "breakpoints: [\n"}, exitPlan, []string{"plan.yaml:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			if tt.s.Plan == "" {
				tt.s.Plan = requestPlan
			}
			res := runSnapctl(t, tt.s)
			if res.Code != tt.code {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, tt.code, res.Stderr)
			}
			msg := oneLine(t, res.Stderr)
			for _, w := range tt.words {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not contain %q", msg, w)
				}
			}
			if strings.Contains(res.Stderr, "panic") || strings.Contains(res.Stderr, "goroutine ") {
				t.Errorf("snapctl panicked:\n%s", res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(res.Out, "run.json")); err == nil && tt.s.Out != busy {
				t.Error("run.json written for a run that never started")
			}
			if tt.s.Out == busy {
				if names, _ := filepath.Glob(filepath.Join(busy, "*")); len(names) != 1 {
					t.Errorf("snapctl wrote into the non-empty output directory: %v", names)
				}
			}
		})
	}
}

// A binary without debug info still runs (function breakpoints resolve from
// the symbol table), with a warning that says what is lost.
func TestNoDebugInfoWarns(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c", "-g0")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"3"}}, exitOK)
	checkCompleted(t, res)
	if !strings.Contains(res.Stderr, "no debug info") {
		t.Errorf("stderr does not warn about the missing debug info:\n%s", res.Stderr)
	}
	var heaps []int64
	for _, s := range res.Run.stopsOf("request") {
		heaps = append(heaps, s.HeapBytes)
	}
	if diff := cmp.Diff([]int64{0, 24, 48}, heaps); diff != "" {
		t.Errorf("heap at the stops (-want +got):\n%s", diff)
	}
}

// A target that exits before any breakpoint hits: exit code 11 naming the
// breakpoint, and a run.json with no stops that says the run completed.
func TestTargetExitsBeforeAnyHit(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"0"}}, exitNeverHit)
	if msg := oneLine(t, res.Stderr); !strings.Contains(msg, `request`) {
		t.Errorf("message %q does not name the breakpoint", msg)
	}
	checkPartial(t, res, "completed", 0)
	if len(res.Run.Stops) != 0 {
		t.Errorf("%d stops, want none", len(res.Run.Stops))
	}
}

// Three runs at once on the same binary never cross: each has its own vgdb
// prefix and run directory, so each sees exactly its own target's hits.
func TestConcurrentRunsDoNotCross(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	counts := []int{3, 4, 5}
	var rs []*running
	for _, n := range counts {
		rs = append(rs, startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{fmt.Sprint(n)}, Limit: 2 * time.Minute}))
	}
	for i, r := range rs {
		res := r.wait()
		if res.Code != exitOK || res.Run == nil {
			t.Errorf("run %d: exit code %d\nstderr:\n%s", i, res.Code, res.Stderr)
			continue
		}
		var heaps, want []int64
		for _, s := range res.Run.stopsOf("request") {
			heaps = append(heaps, s.HeapBytes)
		}
		for k := 0; k < counts[i]; k++ {
			want = append(want, int64(24*k))
		}
		if diff := cmp.Diff(want, heaps); diff != "" {
			t.Errorf("run %d with %d requests: heap at its stops (-want +got):\n%s", i, counts[i], diff)
		}
	}
}

// The vgdb FIFOs live in a private directory (mode 0700, the user's own)
// that is removed at the end; gdb runs with --nx, so no .gdbinit is
// executed.
func TestPrivateFIFOsAndNoGdbinit(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	// A ~/.gdbinit, which gdb reads at startup unless given --nx, that
	// would leave a mark.
	home := t.TempDir()
	mark := filepath.Join(t.TempDir(), "gdbinit-ran")
	if err := os.WriteFile(filepath.Join(home, ".gdbinit"), []byte("shell touch "+mark+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := startSnapctl(t, session{Plan: faultPlan, Bin: bin, Args: []string{"exit", "1"}, Limit: 3 * time.Minute,
		Env: []string{"HOME=" + home}})
	waitDescendant(t, "sleep 2", reachWithin)

	vg := testenv.WaitFor(t, testenv.Valgrind, time.Second)
	m := regexp.MustCompile(`--vgdb-prefix=(\S+)`).FindStringSubmatch(vg.Cmdline)
	if m == nil {
		t.Fatalf("valgrind runs without --vgdb-prefix: %s", vg.Cmdline)
	}
	private := filepath.Dir(m[1])
	fi, err := os.Stat(private)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 || !fi.IsDir() {
		t.Errorf("vgdb prefix directory %s has mode %v, want drwx------", private, fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
		t.Errorf("vgdb prefix directory %s is not owned by uid %d", private, os.Getuid())
	}
	fifos, _ := filepath.Glob(m[1] + "*")
	if len(fifos) == 0 {
		t.Errorf("no vgdb FIFOs under %s*", m[1])
	}
	gdb := testenv.WaitFor(t, testenv.Gdb, time.Second)
	if !strings.Contains(" "+gdb.Cmdline+" ", " --nx ") {
		t.Errorf("gdb runs without --nx: %s", gdb.Cmdline)
	}

	res := r.wait()
	if res.Code != exitOK {
		t.Errorf("exit code %d, want 0\nstderr:\n%s", res.Code, res.Stderr)
	}
	if _, err := os.Stat(private); !os.IsNotExist(err) {
		t.Errorf("private directory %s still there after the run (%v)", private, err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("gdb executed ~/.gdbinit")
	}
}

// --force writes a run into an existing, non-empty directory and leaves
// the files that were there alone.
func TestForceWritesIntoBusyDir(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	out := filepath.Join(t.TempDir(), "busy")
	keep := filepath.Join(out, "keep.txt")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"2"}, Out: out, Flags: []string{"--force"}}, exitOK)
	checkCompleted(t, res)
	if data, err := os.ReadFile(keep); err != nil || string(data) != "mine" {
		t.Errorf("keep.txt after the run: %q, %v", data, err)
	}
}

// A run writes nothing to the temporary directory but its private one, and
// removes that: TMPDIR is empty afterwards, and valgrind made no vgdb FIFO
// under its default prefix in /tmp. Only this run's FIFOs are looked for
// (they carry its valgrind's pid): other valgrinds on the machine, of other
// tests or users, make their own.
func TestNothingLeftInTempDir(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	tmp := t.TempDir()
	res := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"3"}, Limit: time.Minute,
		Env: []string{"TMPDIR=" + tmp}}).wait()
	if res.Code != exitOK {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", res.Code, exitOK, res.Stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		t.Errorf("TMPDIR holds %v after the run, want nothing", names)
	}
	log, err := os.ReadFile(filepath.Join(res.Out, "valgrind.log"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^==(\d+)==`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("valgrind.log names no pid:\n%s", log)
	}
	if fifos, _ := filepath.Glob("/tmp/vgdb-pipe*-" + string(m[1]) + "-*"); len(fifos) > 0 {
		t.Errorf("vgdb FIFOs of this run's valgrind (pid %s) under /tmp: %v", m[1], fifos)
	}
}
