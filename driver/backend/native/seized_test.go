package native_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// seizedEnv has snapctl take the stops itself where it can.
var seizedEnv = append([]string{"SNAPCTL_STOPS=snapctl"}, kernelEnv...)

// snapctl attach to the threaded server under load (4 workers, a helper
// thread started every 5 ms): gdb sets the run up and leaves, snapctl
// takes the measured stops as the server's tracer; the counts are exact,
// each stop is in the handler on one of the server's threads, its figures
// add up to glibc's own (where no worker was inside malloc: heapMeasured),
// and the server serves on untraced, with no probe left.
func TestSeizedAttach(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	res, err := runSession(t, driver.Options{Env: seizedEnv, Attach: driver.Attach{AttachPID: srv.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		requestPlan+"    every: 100\n    max_hits: 2001\n", "")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if m.Native.StopsBy != "snapctl" || !m.Native.Detached {
		t.Errorf("native %+v", m.Native)
	}
	bp := m.Breakpoints[0]
	if bp.Counted != "kernel" || bp.Hits != 2001 || !bp.Deleted || bp.Snapshots != 21 {
		t.Errorf("breakpoint %+v", bp)
	}
	var hits []int
	measured := 0
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
		tid, _ := strconv.Atoi(strings.TrimPrefix(s.Thread.TargetID, "LWP "))
		if s.Frame.Function != "handle_request" || s.Frame.Line == 0 || tid == 0 {
			t.Errorf("stop %d: thread %+v frame %+v", s.Seq, s.Thread, s.Frame)
		}
		if !heapMeasured(t, s) {
			continue
		}
		measured++
		mi := s.Memory.Mallinfo2
		if mi == nil {
			t.Errorf("stop %d: no mallinfo2 in %+v", s.Seq, s.Memory)
			continue
		}
		if *s.Memory.HeapInUseBytes+*s.Memory.TcacheBytes != int64(mi.Uordblks) || *s.Memory.HeapFreeBytes-*s.Memory.TcacheBytes != int64(mi.Fordblks) {
			t.Errorf("stop %d: figures %+v do not add up to mallinfo2 %+v", s.Seq, s.Memory, mi)
		}
	}
	if measured < len(m.Stops)/2 {
		t.Errorf("%d of %d stops measured the heap", measured, len(m.Stops))
	}
	var want []int
	for h := 1; h <= 2001; h += 100 {
		want = append(want, h)
	}
	if fmt.Sprint(hits) != fmt.Sprint(want) {
		t.Errorf("stops at hits %v, want %v", hits, want)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("probes or breakpoints left in the server: %s", strings.Join(ch, "; "))
	}
	if tr := tracer(srv.Pid); tr != 0 {
		t.Errorf("the server is still traced by %d", tr)
	}
	srv.MustServe(t)
	if answered() == 0 {
		t.Error("no request of the load was answered")
	}
}

// The stop snapctl takes measures what gdb's takes: a program whose heap
// is the same at every hit, attached to once each way, gives the same
// figures at every stop, field for field.
func TestSeizedMeasuresAsGdb(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	bin := testenv.Build(t, "../../testdata/native/steady.c")
	type figures struct {
		InUse, Free, Tcache, Mmap, Arena int64
		Arenas                           int64
		Mallinfo2                        runjson.Mallinfo2
	}
	measure := func(stops string) (by string, all []figures) {
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := testenv.StartFixture(t, bin, ready)
		testenv.WaitUntil(t, "the program to be ready", time.Minute, 5*time.Millisecond, func() bool { _, err := os.Stat(ready); return err == nil })
		res, err := runSession(t, driver.Options{Env: append([]string{"SNAPCTL_STOPS=" + stops}, kernelEnv...), Attach: driver.Attach{AttachPID: cmd.Process.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
			"backend: native\nbreakpoints:\n  - name: step\n    location: step\n    every: 50\n    max_hits: 151\n", "")
		if err != nil {
			t.Fatal(err)
		}
		m := readManifest(t, res.Dir)
		if len(m.Stops) != 4 {
			t.Fatalf("%d stops", len(m.Stops))
		}
		for _, s := range m.Stops {
			mem := s.Memory
			if mem == nil || mem.HeapInUseBytes == nil || mem.Mallinfo2 == nil || mem.Arenas == nil {
				t.Fatalf("stop %d: memory %+v", s.Seq, mem)
			}
			all = append(all, figures{*mem.HeapInUseBytes, *mem.HeapFreeBytes, *mem.TcacheBytes, *mem.MmapBytes, *mem.ArenaBytes, int64(*mem.Arenas), *mem.Mallinfo2})
		}
		if tr := tracer(cmd.Process.Pid); tr != 0 {
			t.Errorf("still traced by %d", tr)
		}
		return m.Native.StopsBy + " " + m.Native.StopsByWhy, all
	}
	byGdb, gdbFigures := measure("gdb")
	bySnapctl, snapctlFigures := measure("snapctl")
	if byGdb != "gdb SNAPCTL_STOPS=gdb: gdb takes the stops" || bySnapctl != "snapctl " {
		t.Errorf("stops taken by %q and %q", byGdb, bySnapctl)
	}
	for i := range snapctlFigures {
		if d := cmp.Diff(gdbFigures[0], snapctlFigures[i]); d != "" {
			t.Errorf("stop %d taken by snapctl differs from gdb's (-gdb +snapctl):\n%s", i+1, d)
		}
		if d := cmp.Diff(gdbFigures[0], gdbFigures[i]); d != "" {
			t.Errorf("gdb's stop %d differs from its first:\n%s", i+1, d)
		}
	}
}

// A plan that needs gdb at its stops keeps gdb's way, asked for snapctl's
// or not: the stops are gdb's, exact, and run.json says why.
func TestSeizedFallsBackToGdb(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	res, err := runSession(t, driver.Options{Env: seizedEnv, Attach: driver.Attach{AttachPID: srv.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		requestPlan+"    every: 100\n    max_hits: 201\n    threads: current\n", "")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if m.Native.StopsBy != "gdb" || m.Native.StopsByWhy != `breakpoint "request" records threads: current, which gdb reads` {
		t.Errorf("stops taken by %q (%s)", m.Native.StopsBy, m.Native.StopsByWhy)
	}
	var hits []int
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
		if len(s.Backtrace) == 0 || s.Backtrace[0].Function != "handle_request" {
			t.Errorf("stop %d: backtrace %+v", s.Seq, s.Backtrace)
		}
	}
	if fmt.Sprint(hits) != "[1 101 201]" || m.Breakpoints[0].Counted != "kernel" {
		t.Errorf("stops at hits %v, breakpoint %+v", hits, m.Breakpoints[0])
	}
	if tr := tracer(srv.Pid); tr != 0 {
		t.Errorf("the server is still traced by %d", tr)
	}
	srv.MustServe(t)
	if answered() == 0 {
		t.Error("no request of the load was answered")
	}
}

// By default (no SNAPCTL_STOPS), snapctl attach takes the stops itself,
// and end_run_after ends the run there as on gdb's path: the breakpoint's
// third measured hit is the last, the run completes, and the server, left
// running, serves on untraced with no probe in it.
func TestSeizedAttachEndRunAfter(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	srv.Load(stop)
	res, err := runSession(t, driver.Options{Env: kernelEnv, Attach: driver.Attach{AttachPID: srv.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		requestPlan+"    every: 100\n    end_run_after: 3\n", "")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if m.Status != runjson.StatusCompleted || m.Native.StopsBy != "snapctl" || !m.Native.Detached {
		t.Errorf("status %s, native %+v", m.Status, m.Native)
	}
	var hits []int
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
	}
	if fmt.Sprint(hits) != "[1 101 201]" {
		t.Errorf("stops at hits %v, want [1 101 201]", hits)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("probes or breakpoints left in the server: %s", strings.Join(ch, "; "))
	}
	if tr := tracer(srv.Pid); tr != 0 {
		t.Errorf("the server is still traced by %d", tr)
	}
	srv.MustServe(t)
}
