package main

// Fault-injection cases for runs that end in an unusual way: a target that
// exits inside a stop's actions or replaces itself with exec, and a
// breakpoint command that holds gdb past stop_timeout. Each case runs in
// parallel with the others and checks only its own processes
// (testenv.ScopeEnv, testenv.NoLeftovers).

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// parallelRun runs snapctl in parallel with the other tests of this kind,
// marking its processes so that the test fails if one of them outlives it.
func parallelRun(t *testing.T, s session) *result {
	t.Helper()
	t.Parallel()
	testenv.NoLeftovers(t) // startSnapctl marks the run's processes as the test's
	if s.Limit == 0 {
		// A hang guard: at load average 40 on 2 cores a run of a few
		// stops under massif took more than a minute.
		s.Limit = 3 * time.Minute
	}
	return runSnapctl(t, s)
}

// checkExit fails the test unless the run completed with the target's exit
// code code, snapctl exited 0 and the stops in run.json kept their files.
func checkExit(t *testing.T, res *result, code, minStops int) {
	t.Helper()
	if res.Code != exitOK {
		t.Errorf("snapctl exited with %d, want %d\nstderr:\n%s", res.Code, exitOK, res.Stderr)
	}
	checkPartial(t, res, "completed", minStops)
	if res.Run == nil {
		return
	}
	if got := res.Run.Target.ExitCode; got == nil || *got != code {
		t.Errorf("target.exit_code = %v, want %d", got, code)
	}
}

// A function that calls exit() under around_call: the finish never
// returns, the target's exit ends the run normally with its exit code, and
// the hit's snapshot is kept.
func TestExitInsideAroundCall(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	plan := `breakpoints:
  - name: leave
    location: leave
    around_call: true
`
	res := parallelRun(t, session{Plan: plan, Bin: bin, Args: []string{"exit", "7"}})
	checkExit(t, res, 7, 1)
	if res.Run != nil && len(res.Run.Stops) != 1 {
		t.Errorf("%d stops, want 1 (the hit; the call never returned)", len(res.Run.Stops))
	}
}

// A breakpoint command that runs the target to its end (the plan refuses
// `continue` itself, not Python that continues): the run ends normally
// with the target's exit code, not with gdb refusing to restore
// scheduler-locking on a target that is gone.
func TestExitInsideCommands(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	plan := `breakpoints:
  - name: leave
    location: leave
    commands: ["python gdb.execute('continue')"]
`
	res := parallelRun(t, session{Plan: plan, Bin: bin, Args: []string{"exit", "7"}})
	checkExit(t, res, 7, 1)
}

// stop_timeout bounds a breakpoint command that blocks gdb: the command is
// interrupted, the event names it, the run goes on and completes, and the
// command's child is gone.
func TestStopTimeoutBoundsCommand(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	plan := `stop_timeout: 2s
breakpoints:
  - name: request
    location: handle_request
    commands: ["shell sleep 300", "echo after"]
`
	res := parallelRun(t, session{Plan: plan, Bin: bin, Args: []string{"exit", "0"}, Limit: 4 * time.Minute})
	// Unbounded, each stop would take the command's 300 seconds; bounded,
	// the run took 45.8 s at load average 40, and about 10 s quiet.
	if res.Elapsed > testenv.Scaled(150*time.Second) {
		t.Errorf("two stops whose command blocks took %v with stop_timeout 2s", res.Elapsed)
	}
	checkExit(t, res, 0, 2)
	if res.Run == nil {
		return
	}
	var abandoned []string
	for _, e := range res.Run.Events {
		if e.Kind == "stop-abandoned" {
			abandoned = append(abandoned, e.Message)
		}
	}
	if len(abandoned) != 2 {
		t.Errorf("%d stop-abandoned events, want 2: %q", len(abandoned), abandoned)
	}
	for _, m := range abandoned {
		if !strings.Contains(m, `"shell sleep 300"`) || strings.Contains(m, "scheduler-locking") {
			t.Errorf("event %q does not blame the command", m)
		}
	}
	for _, s := range res.Run.Stops {
		if len(s.Commands) != 1 {
			t.Errorf("stop %d ran %d commands, want only the one that blocked", s.Seq, len(s.Commands))
		}
	}
	noneLike(t, "sleep 300")
}

// A target that replaces itself with exec: valgrind lets the new program
// run natively, and the message says so instead of blaming vgdb. The
// snapshots before the exec are kept, and the new program ends with the
// run.
func TestTargetExecs(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, fixtures+"ends.c")
	testenv.NoLeftovers(t)
	res := runSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"exec"}, Limit: time.Minute})
	if res.Code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
	}
	msg := oneLine(t, res.Stderr)
	if !regexp.MustCompile(`the target called exec and now runs (/usr)?/bin/sleep outside valgrind`).MatchString(msg) || !strings.Contains(msg, "--trace-children=yes") {
		t.Errorf("message %q does not say that the target called exec", msg)
	}
	checkPartial(t, res, "failed", 2)
	if left := testenv.Mine(t, func(p testenv.Proc) bool { return p.Cmdline == "sleep 2" }); len(left) > 0 {
		t.Errorf("the program the target exec'd outlives the run: %+v", left)
	}
}
