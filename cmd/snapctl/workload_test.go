package main

// Runs that end on snapctl's account: a server ended once its workload
// has finished, a run ended after a number of snapshots, and the hits
// counted as gdb counts them however the run ended.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/testenv"
)

// workloadPlan runs tcpclient against tcpserver: the server writes its port
// to port, the client sends requests and exits with code.
func workloadPlan(t *testing.T, requests, code int) (plan string, server string) {
	t.Helper()
	server = testenv.Build(t, fixtures+"tcpserver.c")
	client := testenv.Build(t, fixtures+"tcpclient.c")
	port := filepath.Join(t.TempDir(), "port")
	plan = fmt.Sprintf("target:\n  args: [%q]\nworkload: [%q, %q, %q, %q]\nbreakpoints:\n  - name: request\n    location: handle_request\n",
		port, client, port, fmt.Sprint(requests), fmt.Sprint(code))
	return plan, server
}

// heapDeltas returns the between-hits deltas of breakpoint bp.
func heapDeltas(r *runFile, bp string) []int64 {
	var out []int64
	for _, d := range r.diffsOf("between-hits", bp) {
		out = append(out, d.DeltaBytes)
	}
	return out
}

// A server has no end of its own: once the workload has sent its five
// requests and exited, snapctl ends the server with SIGTERM and the run
// completes, with every request's 48 bytes.
func TestWorkloadEndsServer(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	plan, server := workloadPlan(t, 5, 0)
	res := mustRun(t, session{Plan: plan, Bin: server}, exitOK)
	if res.Run.Status != "completed" || res.Run.Target.signal() != "SIGTERM" {
		t.Errorf("status %q, target %+v; want completed, ended by SIGTERM", res.Run.Status, res.Run.Target)
	}
	if len(res.Run.Breakpoints) != 1 || res.Run.Breakpoints[0].Hits != 5 {
		t.Errorf("breakpoints %+v, want request hit 5 times", res.Run.Breakpoints)
	}
	if diff := cmp.Diff([]int64{48, 48, 48, 48}, heapDeltas(res.Run, "request")); diff != "" {
		t.Errorf("heap deltas (-want +got):\n%s", diff)
	}
	if len(res.Run.Suspects) == 0 || res.Run.Suspects[0].Frame.Function != "handle_request" {
		t.Errorf("suspects %+v, want handle_request first", res.Run.Suspects)
	}
	ended := false
	for _, e := range res.Run.Events {
		ended = ended || e.Kind == "target-ended" && strings.Contains(e.Message, "the workload finished")
	}
	if !ended {
		t.Errorf("no target-ended event for the workload in %+v", res.Run.Events)
	}
}

// A workload that fails, or cannot start, fails the run with a message
// that names it; the server's snapshots up to then are kept.
func TestWorkloadFails(t *testing.T) {
	t.Parallel()
	t.Run("exit status", func(t *testing.T) {
		t.Parallel()
		testenv.NoLeftovers(t)
		plan, server := workloadPlan(t, 2, 3)
		res := runSnapctl(t, session{Plan: plan, Bin: server, Limit: 2 * time.Minute})
		if res.Code != exitFailure {
			t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
		}
		if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "workload") || !strings.Contains(msg, "tcpclient") || !strings.Contains(msg, "exited with status 3") {
			t.Errorf("message %q does not name the workload and its exit status", msg)
		}
		checkPartial(t, res, "failed", 2)
		checkSnapshotsKept(t, res)
	})
	t.Run("cannot start", func(t *testing.T) {
		t.Parallel()
		testenv.NoLeftovers(t)
		server := testenv.Build(t, fixtures+"tcpserver.c")
		missing := filepath.Join(t.TempDir(), "no-such-client")
		plan := fmt.Sprintf("workload: [%q]\nbreakpoints:\n  - name: request\n    location: handle_request\n", missing)
		res := runSnapctl(t, session{Plan: plan, Bin: server, Limit: 2 * time.Minute})
		if res.Code != exitFailure {
			t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
		}
		if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "no-such-client") {
			t.Errorf("message %q does not name the workload", msg)
		}
		checkPartial(t, res, "failed", 0)
	})
}

// end_run_after ends a program that would block forever once the
// breakpoint has taken its snapshots: every: 10 and three snapshots are
// hits 1, 11 and 21, then the breakpoint is gone and the run completes.
func TestEndRunAfter(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"ticks.c")
	plan := "breakpoints:\n  - name: tick\n    location: tick\n    every: 10\n    end_run_after: 3\n"
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"50"}}, exitOK)
	if res.Run.Status != "completed" {
		t.Errorf("status %q, want completed", res.Run.Status)
	}
	var hits []int
	for _, s := range res.Run.stopsOf("tick") {
		hits = append(hits, s.Hit)
	}
	if diff := cmp.Diff([]int{1, 11, 21}, hits); diff != "" {
		t.Errorf("hits of the stops (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{160, 160}, heapDeltas(res.Run, "tick")); diff != "" {
		t.Errorf("heap deltas (-want +got):\n%s", diff)
	}
}

// A program that hits tick 50 times and then blocks, with every: 10, run
// until --timeout: the run reports the 50 hits gdb counted, not the hit of
// its last snapshot (41), on both stop paths (breakpoint commands take the
// GDB/MI one).
func TestHitsCountedWhenTheRunIsStopped(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, fixtures+"ticks.c")
	for _, tc := range []struct{ name, extra string }{
		{"agent", ""},
		{"mi", "    commands: [\"print i\"]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			plan := "breakpoints:\n  - name: tick\n    location: tick\n    every: 10\n" + tc.extra
			res := runSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{"50"}, Flags: []string{"--timeout", "15s"}, Limit: 2 * time.Minute})
			if res.Code != exitTimeout {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitTimeout, res.Stderr)
			}
			checkPartial(t, res, "timeout", 5)
			if len(res.Run.Breakpoints) != 1 || res.Run.Breakpoints[0].Hits != 50 || res.Run.Breakpoints[0].Snapshots != 5 {
				t.Errorf("breakpoints %+v, want tick with 50 hits and 5 snapshots", res.Run.Breakpoints)
			}
		})
	}
}

// around_call with every: 5 in two threads whose calls overlap: a hit of
// the other thread while a call runs cuts that call short, and the stops
// still carry gdb's own hit numbers, 1, 6, ... 96, for the 100 hits.
func TestAroundCallHitsInThreads(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"aroundmt.c")
	plan := "breakpoints:\n  - name: work\n    location: work\n    around_call: true\n    every: 5\n"
	res := mustRun(t, session{Plan: plan, Bin: bin}, exitOK)
	checkCompleted(t, res)
	var want, got []int
	for h := 1; h <= 100; h += 5 {
		want = append(want, h)
	}
	for _, s := range res.Run.stopsOf("work") {
		if s.Phase == "hit" {
			got = append(got, s.Hit)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hits of the hit stops (-want +got):\n%s", diff)
	}
	if len(res.Run.Breakpoints) != 1 || res.Run.Breakpoints[0].Hits != 100 {
		t.Errorf("breakpoints %+v, want work hit 100 times", res.Run.Breakpoints)
	}
}

// end_run_after with a workload: after its third snapshot snapctl ends
// the server, and the workload, which had more requests to send, ends
// with it. The server takes 1.5 s to shut down after SIGTERM and refuses
// connections meanwhile, as memcached does, so the workload's connect
// fails before the server is gone: that is snapctl's doing, not a failure,
// and the run completes.
func TestEndRunAfterEndsWorkload(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	plan, server := workloadPlan(t, 1000, 0)
	plan = strings.Replace(plan, "]\nworkload:", ", \"1500\"]\nworkload:", 1)
	plan += "    end_run_after: 3\n"
	res := mustRun(t, session{Plan: plan, Bin: server}, exitOK)
	if res.Run.Status != "completed" || res.Run.Target.ExitCode == nil || *res.Run.Target.ExitCode != 0 {
		t.Errorf("status %q, target %+v; want completed, exit code 0", res.Run.Status, res.Run.Target)
	}
	if got := len(res.Run.stopsOf("request")); got != 3 {
		t.Errorf("%d stops, want 3", got)
	}
	if diff := cmp.Diff([]int64{48, 48}, heapDeltas(res.Run, "request")); diff != "" {
		t.Errorf("heap deltas (-want +got):\n%s", diff)
	}
	ended := false
	for _, e := range res.Run.Events {
		ended = ended || e.Kind == "target-ended" && strings.Contains(e.Message, "end_run_after") && strings.Contains(e.Message, "workload")
	}
	if !ended {
		t.Errorf("no target-ended event for end_run_after that names the workload in %+v", res.Run.Events)
	}
}
