package main

// End-to-end tests of `snapctl run`: the real binary, valgrind 3.19, vgdb and
// gdb against fixtures in testdata/e2e compiled at test time. Each test
// asserts exact byte counts from run.json; the fixtures' comments say where
// the numbers come from.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/testenv"
)

const fixtures = "../../testdata/e2e/"

// requestPlan is the smallest plan: one breakpoint, every default.
const requestPlan = `breakpoints:
  - name: request
    location: handle_request
`

// checkCompleted fails the test unless the run completed and the target
// exited with status 0.
func checkCompleted(t *testing.T, res *result) {
	t.Helper()
	if res.Run.Schema != "snapctl.run/v2" {
		t.Errorf("schema = %q, want snapctl.run/v2", res.Run.Schema)
	}
	if res.Run.Status != "completed" {
		t.Errorf("status = %q, want completed\nstderr:\n%s", res.Run.Status, res.Stderr)
	}
	if c := res.Run.Target.ExitCode; c == nil || *c != 0 {
		t.Errorf("target exit_code = %v, want 0", c)
	}
	if s := res.Run.Target.signal(); s != "" {
		t.Errorf("target signal = %s, want null", s)
	}
	checkSnapshotsKept(t, res)
}

// A single-threaded program that leaks 24 bytes per request: every
// between-hits diff is exactly +24 at the malloc line, and that site is the
// only suspect, growing in every interval.
func TestLeakSingleThread(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "leak.c"
	bin := testenv.Build(t, src)
	leak := frame{"handle_request", "leak.c", testenv.LineOf(t, src, "the leak: 24")}
	caller := frame{"main", "leak.c", testenv.LineOf(t, src, "handle_request(i);")}
	const n = 5

	// threads: current, for the backtrace; the default (none) records
	// the stopped frame alone.
	res := mustRun(t, session{Plan: "threads: current\n" + requestPlan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
	checkCompleted(t, res)
	if !res.Run.GdbAgent {
		t.Errorf("gdb_agent = false, want the agent to take a plain breakpoint's stops")
	}

	var wantStops []runStop
	for k := 1; k <= n; k++ {
		wantStops = append(wantStops, runStop{Seq: k, Breakpoint: "request", Hit: k, Phase: "hit",
			Frame: leak, HeapBytes: int64(24 * (k - 1))})
	}
	if diff := cmp.Diff(wantStops, stopsSansVariable(res.Run.Stops)); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	for _, s := range res.Run.Stops {
		if s.Thread.ID != "1" || s.Thread.TargetID == "" {
			t.Errorf("stop %d: thread %+v, want gdb thread 1 with its target id", s.Seq, s.Thread)
		}
		// The caller comes right after the stopped frame: gdb unwinds
		// the breakpoint's frame from the registers valgrind reports.
		if len(s.Backtrace) < 2 || s.Backtrace[0] != leak || s.Backtrace[1] != caller {
			t.Errorf("stop %d: backtrace %v, want %v then %v", s.Seq, s.Backtrace, leak, caller)
		}
	}

	var wantDiffs []runDiff
	for k := 1; k < n; k++ {
		wantDiffs = append(wantDiffs, runDiff{Kind: "between-hits", Breakpoint: "request",
			FromSeq: k, ToSeq: k + 1, DeltaBytes: 24,
			Sites: []runSite{{Frame: leak, Stack: []frame{leak, caller},
				Before: int64(24 * (k - 1)), After: int64(24 * k), Delta: 24}}})
	}
	if diff := cmp.Diff(wantDiffs, changedDiffs(res.Run.Diffs)); diff != "" {
		t.Errorf("diffs (-want +got):\n%s", diff)
	}

	want := []runSuspect{{Frame: leak, Stack: []frame{leak, caller}, Breakpoint: "request",
		GrowthPerHit: 24, GrowingIntervals: n - 1, Intervals: n - 1, TotalGrowth: 24 * (n - 1)}}
	if diff := cmp.Diff(want, res.Run.Suspects); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
	for _, name := range []string{"plan.yaml", "report.md", "report.html", "valgrind.log"} {
		if _, err := os.Stat(filepath.Join(res.Out, name)); err != nil {
			t.Errorf("run directory: %v", err)
		}
	}
	if got := len(snapshotFiles(t, res.Out)); got != n {
		t.Errorf("%d files in snapshots/, want %d", got, n)
	}
}

// Two noise threads allocate and free 64-byte buffers while the request
// path leaks 40 bytes per request: the leak is the top suspect with exactly
// 40 bytes per hit, and the noise site is no suspect at all, whatever the
// noise threads held at each stop.
func TestLeakAmongNoiseThreads(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "threads.c"
	bin := testenv.Build(t, src)
	leak := frame{"open_session", "threads.c", testenv.LineOf(t, src, "the leak: 40")}
	noise := frame{"noise", "threads.c", testenv.LineOf(t, src, "noise: freed at once")}
	stack := []frame{leak,
		{"handle_request", "threads.c", testenv.LineOf(t, src, "= open_session(id)")},
		{"main", "threads.c", testenv.LineOf(t, src, "handle_request(i);")}}
	// Ten hits make nine intervals. The two noise threads hold at most
	// 128 bytes between them, so their site cannot grow in most intervals
	// and keep that growth, whatever valgrind's scheduler does.
	const n = 10

	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
	checkCompleted(t, res)
	if got := len(res.Run.stopsOf("request")); got != n {
		t.Fatalf("%d stops, want %d", got, n)
	}
	diffs := res.Run.diffsOf("between-hits", "request")
	if len(diffs) != n-1 {
		t.Fatalf("%d between-hits diffs, want %d", len(diffs), n-1)
	}
	for i, d := range diffs {
		var got []runSite
		for _, s := range d.changed() {
			if s.Frame == leak {
				got = append(got, s)
			}
		}
		want := []runSite{{Frame: leak, Stack: stack, Before: int64(40 * i), After: int64(40 * (i + 1)), Delta: 40}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("diff %d→%d, leak site (-want +got):\n%s", d.FromSeq, d.ToSeq, diff)
		}
	}
	if len(res.Run.Suspects) == 0 {
		t.Fatal("no suspects")
	}
	want := runSuspect{Frame: leak, Stack: stack, Breakpoint: "request",
		GrowthPerHit: 40, GrowingIntervals: n - 1, Intervals: n - 1, TotalGrowth: 40 * (n - 1)}
	if diff := cmp.Diff(want, res.Run.Suspects[0]); diff != "" {
		t.Errorf("top suspect (-want +got):\n%s", diff)
	}
	for _, s := range res.Run.Suspects {
		if s.Frame == noise {
			t.Errorf("the noise site is a suspect: %+v", s)
		}
	}
}

// A C++ leak through std::unordered_map: the site is the program's own
// Registry::add, not libstdc++'s allocator templates, and each request adds
// exactly one 16-byte hash node (the buckets are reserved up front).
func TestLeakThroughUnorderedMap(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "registry.cpp"
	bin := testenv.Build(t, src)
	add := frame{"Registry::add(int)", "registry.cpp", testenv.LineOf(t, src, "the leak: one 16-byte node")}
	stack := []frame{add,
		{"handle_request(int)", "registry.cpp", testenv.LineOf(t, src, "registry->add(id);")},
		{"main", "registry.cpp", testenv.LineOf(t, src, "handle_request(i);")}}
	const n = 5

	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
	checkCompleted(t, res)
	diffs := res.Run.diffsOf("between-hits", "request")
	if len(diffs) != n-1 {
		t.Fatalf("%d between-hits diffs, want %d", len(diffs), n-1)
	}
	for i, d := range diffs {
		want := []runSite{{Frame: add, Stack: stack, Before: int64(16 * i), After: int64(16 * (i + 1)), Delta: 16}}
		if diff := cmp.Diff(want, d.changed()); diff != "" {
			t.Errorf("diff %d→%d (-want +got):\n%s", d.FromSeq, d.ToSeq, diff)
		}
		if d.DeltaBytes != 16 {
			t.Errorf("diff %d→%d: delta_bytes = %d, want 16", d.FromSeq, d.ToSeq, d.DeltaBytes)
		}
	}
	want := []runSuspect{{Frame: add, Stack: stack, Breakpoint: "request",
		GrowthPerHit: 16, GrowingIntervals: n - 1, Intervals: n - 1, TotalGrowth: 16 * (n - 1)}}
	if diff := cmp.Diff(want, res.Run.Suspects); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
}

// A worker thread hits the breakpoint while main is blocked in read(2):
// every stop names the worker (gdb thread 2), and the run completes. The
// plan's threads says how much thread state each stop records: with all,
// main is listed blocked in read; with current only the worker, with
// valgrind's details of it and its backtrace; with none (the default), the
// worker's id and target id and the breakpoint's frame, nothing else.
// The stops are the agent's (driver's TestRunThreadsModes runs GDB/MI's).
func TestBreakpointInWorkerWhileMainBlocked(t *testing.T) {
	t.Parallel()
	src := fixtures + "blocked.c"
	bin := testenv.Build(t, src)
	const n = 4
	for _, mode := range []string{"all", "current", "none"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			plan := requestPlan
			if mode != "none" {
				plan = "threads: " + mode + "\n" + plan
			}
			res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
			checkCompleted(t, res)
			if !res.Run.GdbAgent {
				t.Errorf("gdb's agent did not take the stops")
			}
			stops := res.Run.stopsOf("request")
			if len(stops) != n {
				t.Fatalf("%d stops, want %d", len(stops), n)
			}
			for _, s := range stops {
				if s.Thread.ID != "2" {
					t.Errorf("stop %d: thread %q (%s), want the worker, gdb thread 2", s.Seq, s.Thread.ID, s.Thread.TargetID)
				}
				if s.Frame.Function != "handle_request" {
					t.Errorf("stop %d: frame %v, want handle_request", s.Seq, s.Frame)
				}
				switch mode {
				case "all":
					if main := threadOf(s, "1"); main == nil || main.Frame == nil || !strings.Contains(main.Frame.Function, "read") {
						t.Errorf("stop %d: main thread %+v, want it blocked in read", s.Seq, main)
					}
					if len(s.Threads) != 2 || s.Threads[1].ID != "2" {
						t.Errorf("stop %d: threads %+v, want main and the worker", s.Seq, s.Threads)
					}
				case "current":
					if len(s.Threads) != 1 || s.Threads[0].ID != "2" || !strings.Contains(s.Thread.Details, "VgTs_Runnable") {
						t.Errorf("stop %d: thread %+v, threads %+v, want the worker alone with valgrind's details", s.Seq, s.Thread, s.Threads)
					}
					if len(s.Backtrace) < 2 || s.Backtrace[1].Function != "worker" {
						t.Errorf("stop %d: backtrace %v, want handle_request <- worker", s.Seq, s.Backtrace)
					}
				case "none":
					if len(s.Threads) != 0 || len(s.Backtrace) != 0 || s.Thread.Details != "" || !strings.HasPrefix(s.Thread.TargetID, "Thread ") {
						t.Errorf("stop %d: thread %+v, threads %+v, backtrace %v, want the thread's target id and nothing more", s.Seq, s.Thread, s.Threads, s.Backtrace)
					}
				}
				// The heap at the first hit is the worker's thread-local storage
				// (glibc's dtv, allocated by pthread_create); the requests add
				// 32 bytes each to it.
				if got, want := s.HeapBytes-stops[0].HeapBytes, int64(32*(s.Hit-1)); got != want {
					t.Errorf("stop %d: heap grew by %d bytes since the first hit, want %d", s.Seq, got, want)
				}
			}
			if len(res.Run.Suspects) == 0 || res.Run.Suspects[0].GrowthPerHit != 32 {
				t.Errorf("suspects = %+v, want the 32-byte leak first", res.Run.Suspects)
			}
		})
	}
}

// around_call snapshots at the breakpoint and again when the call returns:
// the within-call diff is exactly what build_reply keeps (100 bytes), the
// 28 bytes of scratch it frees in between leave no trace.
func TestAroundCall(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "around.c"
	bin := testenv.Build(t, src)
	body := frame{"build_reply", "around.c", testenv.LineOf(t, src, "kept by the caller")}
	caller := frame{"main", "around.c", testenv.LineOf(t, src, "= build_reply(i);")}
	const n = 4
	plan := `breakpoints:
  - name: reply
    location: build_reply
    around_call: true
`
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{fmt.Sprint(n)}}, exitOK)
	checkCompleted(t, res)

	stops := res.Run.stopsOf("reply")
	if len(stops) != 2*n {
		t.Fatalf("%d stops, want %d (a hit and a return per call)", len(stops), 2*n)
	}
	for i, s := range stops {
		k := i/2 + 1
		phase, heap, fn := "hit", int64(100*(k-1)), "build_reply"
		if i%2 == 1 {
			phase, heap, fn = "return", int64(100*k), "main"
		}
		if s.Seq != i+1 || s.Hit != k || s.Phase != phase || s.HeapBytes != heap || s.Frame.Function != fn {
			t.Errorf("stop %d = seq %d hit %d phase %s heap %d in %s, want seq %d hit %d phase %s heap %d in %s",
				i, s.Seq, s.Hit, s.Phase, s.HeapBytes, s.Frame.Function, i+1, k, phase, heap, fn)
		}
	}

	var want []runDiff
	for k := 1; k <= n; k++ {
		want = append(want, runDiff{Kind: "within-call", Breakpoint: "reply",
			FromSeq: 2*k - 1, ToSeq: 2 * k, DeltaBytes: 100,
			Sites: []runSite{{Frame: body, Stack: []frame{body, caller},
				Before: int64(100 * (k - 1)), After: int64(100 * k), Delta: 100}}})
	}
	if diff := cmp.Diff(want, changedDiffs(res.Run.diffsOf("within-call", "reply"))); diff != "" {
		t.Errorf("within-call diffs (-want +got):\n%s", diff)
	}
	between := res.Run.diffsOf("between-hits", "reply")
	if len(between) != n-1 {
		t.Fatalf("%d between-hits diffs, want %d", len(between), n-1)
	}
	for i, d := range between {
		if d.FromSeq != 2*i+1 || d.ToSeq != 2*i+3 || d.DeltaBytes != 100 {
			t.Errorf("between-hits diff %d: %d→%d delta %d, want %d→%d delta 100",
				i, d.FromSeq, d.ToSeq, d.DeltaBytes, 2*i+1, 2*i+3)
		}
	}
}

// A breakpoint on a leaf function, which never moves the stack pointer
// after its prologue: gdb must still find its caller, both for the stop's
// backtrace and for around_call's finish, which would otherwise run on to
// the next hit. Valgrind keeps the frame pointer exact at breakpoints only
// with --px-file-backed=unwindregs-at-mem-access.
func TestAroundCallLeaf(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "around.c"
	bin := testenv.Build(t, src)
	leaf := frame{"note", "around.c", testenv.LineOf(t, src, "note's only line")}
	caller := frame{"main", "around.c", testenv.LineOf(t, src, "the leaf call")}
	const n = 3
	plan := `breakpoints:
  - name: note
    location: note
    around_call: true
`
	// The transcript explains a stop the run did not expect.
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{fmt.Sprint(n)}, Flags: []string{"--trace"}}, exitOK)
	checkCompleted(t, res)
	if len(res.Run.Events) != 0 {
		mi, _ := os.ReadFile(filepath.Join(res.Out, "gdb-mi.log"))
		t.Errorf("events %+v, want none; gdb's transcript:\n%s", res.Run.Events, mi)
	}
	stops := res.Run.stopsOf("note")
	if len(stops) != 2*n {
		t.Fatalf("%d stops, want %d (a hit and a return per call)", len(stops), 2*n)
	}
	for i, s := range stops {
		k := i/2 + 1
		if i%2 == 1 {
			// The call is the loop body's last statement: it returns
			// to the loop's increment, on the for line.
			if s.Phase != "return" || s.Hit != k || s.Frame.Function != "main" {
				t.Errorf("stop %d = %s of hit %d at %v, want the return of hit %d in main", i, s.Phase, s.Hit, s.Frame, k)
			}
			continue
		}
		if s.Phase != "hit" || s.Hit != k || len(s.Backtrace) < 2 || s.Backtrace[0] != leaf || s.Backtrace[1] != caller {
			t.Errorf("stop %d = %s of hit %d, backtrace %v; want hit %d at %v called from %v", i, s.Phase, s.Hit, s.Backtrace, k, leaf, caller)
		}
	}
	within := res.Run.diffsOf("within-call", "note")
	if len(within) != n {
		t.Fatalf("%d within-call diffs, want %d", len(within), n)
	}
	for _, d := range within {
		if d.DeltaBytes != 0 {
			t.Errorf("within-call diff %d→%d: delta %d, want 0 (note allocates nothing)", d.FromSeq, d.ToSeq, d.DeltaBytes)
		}
	}
}

// Conditions, skip counts, every and max_hits select exactly the hits the
// plan implies. tick(i) keeps i+1 bytes, so the heap at the entry of tick(i)
// is i*(i+1)/2 bytes and each stop's heap_bytes says which call it was.
func TestHitSelection(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"counts.c")
	const calls = 20
	tests := []struct {
		name string
		keys string // the breakpoint's keys besides name and location
		want []int  // i of the calls snapshotted
	}{
		{"condition", `condition: "i % 5 == 1"`, []int{1, 6, 11, 16}},
		{"skip", `skip: 16`, []int{16, 17, 18, 19}},
		{"every", `every: 6`, []int{0, 6, 12, 18}},
		{"max_hits", `max_hits: 3`, []int{0, 1, 2}},
		// The condition filters first (a false one is no hit); skip is
		// gdb's ignore count over the qualifying hits (0 and 2 here);
		// hits are numbered from 1 after it; every N snapshots hits 1,
		// 1+N, 1+2N, ... (i = 4, 8, 12, 16); max_hits ends it after hit 5.
		{"all", "condition: \"i % 2 == 0\"\n    skip: 2\n    every: 2\n    max_hits: 5", []int{4, 8, 12}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			plan := "breakpoints:\n  - name: tick\n    location: tick\n    " + tt.keys + "\n"
			res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{fmt.Sprint(calls)}}, exitOK)
			checkCompleted(t, res)
			var got []int
			for _, s := range res.Run.stopsOf("tick") {
				got = append(got, callOfHeap(s.HeapBytes))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls snapshotted (-want +got):\n%s\nplan:\n%s", diff, plan)
			}
		})
	}
}

// callOfHeap inverts counts.c's heap at the entry of tick(i), i*(i+1)/2;
// -1 when heap is no such number.
func callOfHeap(heap int64) int {
	for i := 0; i < 1024; i++ {
		if int64(i*(i+1)/2) == heap {
			return i
		}
	}
	return -1
}

// A plan with a misspelt key is refused before anything starts: exit code
// 3, the file, line and column of the key, and no run left behind.
func TestPlanErrorStartsNothing(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	plan := `breakpoints:
  - name: request
    locaton: handle_request
`
	res := runSnapctl(t, session{Plan: plan, Bin: bin})
	if res.Code != exitPlan {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", res.Code, exitPlan, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "plan.yaml:3:5") || !strings.Contains(res.Stderr, "locaton") {
		t.Errorf("stderr = %q, want the key and plan.yaml:3:5", res.Stderr)
	}
	if !strings.HasPrefix(res.Stderr, "snapctl: ") {
		t.Errorf("stderr = %q, want one line starting with snapctl:", res.Stderr)
	}
	for _, name := range []string{"run.json", "valgrind.log"} {
		if _, err := os.Stat(filepath.Join(res.Out, name)); err == nil {
			t.Errorf("%s written for a plan that never ran", name)
		}
	}
}

// A declared breakpoint that never hits: exit code 11 with its name, and a
// run.json holding the other breakpoint's stops all the same.
func TestNeverHitBreakpoint(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	plan := requestPlan + `  - name: flush
    location: flush_cache
`
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"3"}}, exitNeverHit)
	if !strings.Contains(res.Stderr, "flush") {
		t.Errorf("stderr = %q, want the breakpoint's name", res.Stderr)
	}
	if res.Run.Status != "completed" || res.Run.ExitReason != "breakpoint-never-hit" {
		t.Errorf("run.json status %q exit_reason %q, want completed, breakpoint-never-hit", res.Run.Status, res.Run.ExitReason)
	}
	if got := len(res.Run.stopsOf("request")); got != 3 {
		t.Errorf("%d stops of request, want 3", got)
	}
	if got := len(res.Run.stopsOf("flush")); got != 0 {
		t.Errorf("%d stops of flush, want 0", got)
	}
	checkSnapshotsKept(t, res)
}

// report.fail_on: a leak faster than the limit exits with code 10 (and
// still writes the full report); one under it exits 0.
func TestFailOn(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	for _, tt := range []struct {
		limit  string
		code   int
		reason string
	}{
		{"16", exitLeak, "fail-on-exceeded"},
		{"1KiB", exitOK, "ok"},
	} {
		t.Run(tt.limit, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			plan := requestPlan + "report:\n  fail_on:\n    growth_per_hit: " + tt.limit + "\n"
			res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"4"}}, tt.code)
			checkCompleted(t, res)
			if len(res.Run.Suspects) != 1 || res.Run.Suspects[0].GrowthPerHit != 24 {
				t.Errorf("suspects = %+v, want the 24-byte leak", res.Run.Suspects)
			}
			if res.Run.ExitReason != tt.reason {
				t.Errorf("run.json exit_reason %q, want %q", res.Run.ExitReason, tt.reason)
			}
			if tt.code == exitLeak && !strings.Contains(res.Stderr, "handle_request") {
				t.Errorf("stderr = %q, want the suspect that exceeded the limit", res.Stderr)
			}
		})
	}
}

// --format json prints run.json, and only it, on stdout.
func TestFormatJSON(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"3"}, Flags: []string{"--format", "json"}}, exitOK)
	var raw json.RawMessage
	dec := json.NewDecoder(strings.NewReader(res.Stdout))
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, res.Stdout)
	}
	printed, err := readRunFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Errorf("stdout holds more than one JSON value:\n%s", res.Stdout)
	}
	if diff := cmp.Diff(*res.Run, *printed); diff != "" {
		t.Errorf("printed JSON differs from run.json (-file +stdout):\n%s", diff)
	}
	file, err := os.ReadFile(filepath.Join(res.Out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(file), bytes.TrimSpace([]byte(res.Stdout))) {
		t.Errorf("stdout is not byte for byte run.json")
	}
}

// Arguments with spaces, quotes, shell metacharacters and an empty one reach
// the target intact, and an output path with spaces works.
func TestTargetArgsAndOutPathWithSpaces(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"argv.c")
	written := filepath.Join(t.TempDir(), "argv.out")
	args := []string{"two words", `it's "quoted"`, "$HOME", "a\\b", "", "--not-a-flag", "*", "tab\there"}
	plan := `breakpoints:
  - name: record
    location: record
`
	out := filepath.Join(t.TempDir(), "my runs", "run 1")
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: append([]string{written}, args...), Out: out}, exitOK)
	checkCompleted(t, res)
	data, err := os.ReadFile(written)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	if diff := cmp.Diff(args, got); diff != "" {
		t.Errorf("arguments the target saw (-want +got):\n%s", diff)
	}
	if argv := res.Run.Target.Argv; len(argv) < len(args) || !cmp.Equal(args, argv[len(argv)-len(args):]) {
		t.Errorf("run.json target.argv = %q, want it to end with %q", argv, args)
	}
	if got := len(res.Run.stopsOf("record")); got != len(args) {
		t.Errorf("%d stops, want %d", got, len(args))
	}
}

// stopsSansVariable keeps the fields of stops that do not depend on the
// machine: it drops the thread (checked separately) and the snapshot path.
func stopsSansVariable(stops []runStop) []runStop {
	out := make([]runStop, len(stops))
	for i, s := range stops {
		s.Thread = runThread{}
		s.Backtrace = nil
		s.Threads = nil
		s.Commands = nil
		s.Snapshot = ""
		out[i] = s
	}
	return out
}

// changedDiffs drops the unchanged sites from every diff.
func changedDiffs(diffs []runDiff) []runDiff {
	out := make([]runDiff, len(diffs))
	for i, d := range diffs {
		d.Sites = d.changed()
		out[i] = d
	}
	return out
}

// threadOf returns the thread with gdb number id at stop s, or nil.
func threadOf(s runStop, id string) *runThread {
	for i := range s.Threads {
		if s.Threads[i].ID == id {
			return &s.Threads[i]
		}
	}
	return nil
}

// Without --out a run goes to a new folder under ./snapctl-runs/; without
// --quiet but with stderr not a terminal, no status line is printed.
func TestDefaultOutAndNoStatusLine(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"2"}, NoOut: true, Loud: true}, exitOK)
	checkCompleted(t, res)
	if filepath.Base(filepath.Dir(res.Out)) != "snapctl-runs" {
		t.Errorf("run directory %s, want one under snapctl-runs/", res.Out)
	}
	if res.Stderr != "" {
		t.Errorf("stderr is not a terminal, yet snapctl printed on it:\n%q", res.Stderr)
	}
	if !strings.Contains(res.Stdout, res.Out) && !strings.Contains(res.Stdout, filepath.Base(res.Out)) {
		t.Errorf("stdout does not say where the run is:\n%s", res.Stdout)
	}
}

// A breakpoint's commands run at each of its stops and their output is
// recorded with the stop: here the argument of handle_request.
func TestBreakpointCommands(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	plan := requestPlan + `    commands: ["print id", "print id * 2"]
`
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"3"}}, exitOK)
	checkCompleted(t, res)
	stops := res.Run.stopsOf("request")
	if len(stops) != 3 {
		t.Fatalf("%d stops, want 3", len(stops))
	}
	for i, s := range stops {
		var got []string
		for _, c := range s.Commands {
			got = append(got, c.Command+" => "+strings.TrimSpace(c.Output))
		}
		want := []string{
			fmt.Sprintf("print id => $%d = %d", 2*i+1, i),
			fmt.Sprintf("print id * 2 => $%d = %d", 2*i+2, 2*i),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stop %d commands (-want +got):\n%s", s.Seq, diff)
		}
	}
}

// A breakpoint restricted to one gdb thread stops only there: in blocked.c
// the worker (thread 2) handles every request and main (thread 1) none.
func TestThreadRestriction(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"blocked.c")
	for _, tt := range []struct {
		thread, stops, code int
	}{
		{2, 3, exitOK},
		{1, 0, exitNeverHit},
	} {
		t.Run(fmt.Sprint("thread ", tt.thread), func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			plan := fmt.Sprintf("%s    thread: %d\n", requestPlan, tt.thread)
			res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"3"}}, tt.code)
			stops := res.Run.stopsOf("request")
			if len(stops) != tt.stops {
				t.Errorf("%d stops, want %d", len(stops), tt.stops)
			}
			for _, s := range stops {
				if s.Thread.ID != fmt.Sprint(tt.thread) {
					t.Errorf("stop %d in thread %s, want %d", s.Seq, s.Thread.ID, tt.thread)
				}
			}
		})
	}
}
