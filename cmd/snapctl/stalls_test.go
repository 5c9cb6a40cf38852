package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// A stall: gdb, vgdb or valgrind stopped with SIGSTOP while the target
// runs between two stops, on both stop paths. Nothing reports it (gdb
// waits for the next stop, which cannot come), so only the deadline ends
// the run: within stop_timeout snapctl records a stop-stalled event, ends
// with exit code 1 and a message naming the stopped process, keeps every
// snapshot taken, and leaves no process (a stopped one included).
func TestStallStoppedTool(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	const agentPlan = "stop_timeout: 2s\n" + requestPlan
	const miPlan = agentPlan + "    commands: [\"print 1\"]\n"
	tests := []struct {
		tool testenv.Tool
		path string // the stop path: "agent" or "mi"
		plan string
	}{
		{testenv.Vgdb, "agent", agentPlan},
		{testenv.Vgdb, "mi", miPlan},
		{testenv.Valgrind, "agent", agentPlan},
		{testenv.Gdb, "mi", miPlan},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.tool, tt.path), func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			r := startSnapctl(t, session{Plan: tt.plan, Bin: bin, Args: []string{"slow", "30"}, Limit: 2 * time.Minute})
			waitFile(t, r, filepath.Join(r.out, "snapshots"), time.Minute)
			victim := testenv.WaitFor(t, tt.tool, 30*time.Second)
			if err := syscall.Kill(victim.PID, syscall.SIGSTOP); err != nil {
				t.Fatalf("stopping %s: %v", tt.tool, err)
			}
			stopped := time.Now()
			res := r.wait()
			if d := time.Since(stopped); d > testenv.Scaled(45*time.Second) { // a hang guard
				t.Errorf("snapctl took %v to end after %s was stopped", d, tt.tool)
			}
			if res.Code != exitFailure {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
			}
			msg := oneLine(t, res.Stderr)
			if !regexp.MustCompile(`^snapctl: ` + string(tt.tool) + `: is stopped`).MatchString(msg) {
				t.Errorf("message %q does not say that %s is stopped", msg, tt.tool)
			}
			checkPartial(t, res, "failed", 1)
			checkStalled(t, res, string(tt.tool))
		})
	}
}

// stallPlan's condition calls a gdb function, defined by gdb.init, that
// sleeps for ten minutes at its third call: the agent's third stop never
// ends, with gdb, vgdb and valgrind all alive and waiting.
const stallPlan = `stop_timeout: 2s
gdb:
  init:
    - 'python exec("import time\nclass Stall(gdb.Function):\n    calls = 0\n    def __init__(self):\n        super().__init__(\"stall\")\n    def invoke(self):\n        Stall.calls += 1\n        if Stall.calls == 3:\n            time.sleep(600)\n        return 1\nStall()")'
breakpoints:
  - name: request
    location: handle_request
    condition: "$stall()"
`

// An agent stop that never ends (gdb busy in the stop) is ended by
// stop_timeout: the event and the message name gdb, the two stops before
// it are kept, and no process is left.
func TestStallInAgentStop(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	res := runSnapctl(t, session{Plan: stallPlan, Bin: bin, Args: []string{"exit", "5"}, Limit: 2 * time.Minute})
	if res.Code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
	}
	msg := oneLine(t, res.Stderr)
	if !strings.HasPrefix(msg, `snapctl: gdb: does not finish the stop; the stop at breakpoint "request" has not ended after `) {
		t.Errorf("message %q does not say that gdb holds up the stop at request", msg)
	}
	checkPartial(t, res, "failed", 2)
	if res.Run != nil && len(res.Run.Stops) != 2 {
		t.Errorf("%d stops, want the 2 before the stall", len(res.Run.Stops))
	}
	checkStalled(t, res, "gdb")
}

// checkStalled fails the test unless run.json holds one stop-stalled
// event naming tool.
func checkStalled(t *testing.T, res *result, tool string) {
	t.Helper()
	if res.Run == nil {
		return
	}
	var stalls []string
	for _, e := range res.Run.Events {
		if e.Kind == "stop-stalled" {
			stalls = append(stalls, e.Message)
		}
	}
	if len(stalls) != 1 || !regexp.MustCompile(`: `+tool+` (is|does)`).MatchString(stalls[0]) {
		t.Errorf("stop-stalled events %q, want one naming %s", stalls, tool)
	}
}
