package native_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// kernelEnv has the kernel count a run's hits, as it does unless
// SNAPCTL_HITS=gdb is set: said, so that a test means it.
var kernelEnv = []string{"SNAPCTL_HITS=kernel"}

// kernelCounts skips a test when the kernel refuses to count hits here
// (not root, no CAP_BPF and CAP_PERFMON, no uprobes), saying why.
func kernelCounts(t *testing.T) {
	t.Helper()
	var refused *uprobes.Refused
	if err := uprobes.Available(); errors.As(err, &refused) {
		t.Skipf("the kernel does not count hits here: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
}

func hotPlan(extra string) string {
	return "backend: native\nbreakpoints:\n  - name: hot\n    location: hot\n" + extra
}

// heapMeasured says whether stop s of a server's run has the allocator's
// figures, and fails the test unless it has them or says the one reason
// a server may not: another of its threads was inside malloc at the stop,
// its arena's lock held (allocator-busy: rare, more often on a
// loaded machine).
func heapMeasured(t *testing.T, s runjson.Stop) bool {
	t.Helper()
	switch {
	case s.Memory == nil:
		t.Errorf("stop %d: no memory", s.Seq)
	case s.Memory.HeapInUseBytes != nil:
		return true
	case s.Memory.HeapUnmeasured != runjson.EventAllocatorBusy:
		t.Errorf("stop %d: no heap figures (%s: %s)", s.Seq, s.Memory.HeapUnmeasured, s.Memory.HeapUnmeasuredWhy)
	}
	return false
}

// checkCounted checks that breakpoint 0 was counted by who, with hits
// hits and stops at the given hits, each inside hot() on a thread of the
// program's.
func checkCounted(t *testing.T, m *runjson.Manifest, who string, hits int, stops []int) {
	t.Helper()
	bp := m.Breakpoints[0]
	if bp.Counted != who || bp.Hits != hits {
		t.Errorf("breakpoint counted by %q (%s), %d hits; want %s, %d", bp.Counted, bp.CountedWhy, bp.Hits, who, hits)
	}
	var got []int
	for _, s := range m.Stops {
		got = append(got, s.Hit)
		if s.Frame.Function != "hot" || s.Thread.ID == "" || s.Thread.TargetID == "" {
			t.Errorf("stop %d (hit %d): frame %+v, thread %+v", s.Seq, s.Hit, s.Frame, s.Thread)
		}
		// A thread of the program's may be inside malloc at a stop,
		// its arena's lock held: that stop is allocator-busy.
		if s.Memory == nil || s.Memory.HeapInUseBytes == nil && s.Memory.HeapUnmeasured != runjson.EventAllocatorBusy {
			t.Errorf("stop %d: memory %+v", s.Seq, s.Memory)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(stops) {
		t.Errorf("stops at hits %v, want %v", got, stops)
	}
	for _, e := range m.Events {
		if e.Frame == nil {
			e.Frame = &runjson.Frame{}
		}
		if e.Kind == runjson.EventSignal || e.Kind == runjson.EventUnexpectedStop || e.Kind == runjson.EventHitsNotStopped {
			t.Errorf("event %+v at %s", e, e.Frame.Addr)
		}
	}
}

// every: 100,000 of 4 threads x 500,000 calls: 20 stops, each in hot(),
// and every hit counted.
func TestKernelCountsExactly(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, out, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    every: 100000\n"), bin, "4", "500000")
	if err != nil {
		t.Fatal(err)
	}
	if n := counted(t, out, "calls"); n != 2_000_000 {
		t.Fatalf("the program made %d calls", n)
	}
	var want []int
	for h := 1; h <= 2_000_000; h += 100_000 {
		want = append(want, h)
	}
	checkCounted(t, m, "kernel", 2_000_000, want)
}

// A measured hit holds the other threads at their next hit until gdb has
// stopped them all: at the stop of hit H, the calls that got past hot()'s
// first statement are H-1, give or take one per other thread (a call
// under way at the hit, or one that passed its probe as the hit set the
// halt). Threads running freely until gdb stops them make hundreds of
// calls more, and the stop would read the heap of a later hit.
func TestKernelStopHoldsOtherThreads(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, _, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    every: 50000\n    commands: [\"print started\"]\n"), bin, "4", "100000")
	if err != nil {
		t.Fatal(err)
	}
	checkCounted(t, m, "kernel", 400_000, []int{1, 50_001, 100_001, 150_001, 200_001, 250_001, 300_001, 350_001})
	for _, s := range m.Stops[1:] {
		// The first stop is gdb's breakpoint's; the kernel probes the
		// function's entry, and each measured stop is run on to the
		// same address.
		if s.Frame.Addr != m.Stops[0].Frame.Addr {
			t.Errorf("stop at hit %d at %s, gdb's breakpoint at %s", s.Hit, s.Frame.Addr, m.Stops[0].Frame.Addr)
		}
		var started int
		if len(s.Commands) != 1 {
			t.Fatalf("stop %d: commands %+v", s.Seq, s.Commands)
		}
		_, v, _ := strings.Cut(s.Commands[0].Output, "= ")
		if _, err := fmt.Sscanf(v, "%d", &started); err != nil {
			t.Fatalf("stop %d: %q", s.Seq, s.Commands[0].Output)
		}
		if d := started - (s.Hit - 1); d < -3 || d > 3 {
			t.Errorf("stop at hit %d: %d calls under way or done, %+d from the hit", s.Hit, started, d)
		}
	}
}

// skip, every, max_hits and end_run_after, applied by the kernel: only
// the measured hits stop, and the counts are exact.
func TestKernelAppliesThePlan(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	t.Run("skip every max_hits", func(t *testing.T) {
		t.Parallel()
		m, out, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    skip: 10\n    every: 50000\n    max_hits: 150001\n"), bin, "4", "100000")
		if err != nil {
			t.Fatal(err)
		}
		if n := counted(t, out, "calls"); n != 400_000 {
			t.Fatalf("the program made %d calls", n)
		}
		// The breakpoint is deleted at its last measured hit, whose
		// number it keeps.
		checkCounted(t, m, "kernel", 150_001, []int{1, 50_001, 100_001, 150_001})
		if !m.Breakpoints[0].Deleted {
			t.Errorf("breakpoint %+v not deleted after max_hits", m.Breakpoints[0])
		}
	})
	t.Run("end_run_after", func(t *testing.T) {
		t.Parallel()
		m, _, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    every: 20000\n    end_run_after: 3\n"), bin, "4", "5000000")
		if err != nil {
			t.Fatal(err)
		}
		bp := m.Breakpoints[0]
		if bp.Counted != "kernel" || bp.Snapshots != 3 || bp.Hits < 40_001 || bp.Hits > 20_000_000 {
			t.Errorf("breakpoint %+v", bp)
		}
		if len(m.Stops) != 3 || m.Stops[2].Hit != 40_001 {
			t.Errorf("stops %+v", m.Stops)
		}
	})
}

// SNAPCTL_HITS=gdb in the run's environment keeps the breakpoint with
// gdb: the same stops and counts, each hit a stop.
func TestKernelFallbackForced(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, out, err := runNativeOut(t, driver.Options{Env: []string{"SNAPCTL_HITS=gdb"}}, hotPlan("    skip: 3\n    every: 500\n"), bin, "4", "500")
	if err != nil {
		t.Fatal(err)
	}
	if n := counted(t, out, "calls"); n != 2000 {
		t.Fatalf("the program made %d calls", n)
	}
	checkCounted(t, m, "gdb", 1997, []int{1, 501, 1001, 1501})
	if why := m.Breakpoints[0].CountedWhy; why != "gdb counts hits: SNAPCTL_HITS=gdb is set" {
		t.Errorf("counted_why %q", why)
	}
}

// skip: 1, then every hit measured up to max_hits, 4 threads: several
// measured hits are on their way at once, and gdb reports their stops in
// no fixed order, the last one's too; each is taken, at gdb's breakpoint
// address. Threads stopped in the prologue when the kernel takes over (the
// probe is at the function's entry) have their measured hits signalled by
// snapctl.
func TestKernelMeasuredStopsOutOfOrder(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, _, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    skip: 1\n    max_hits: 20\n"), bin, "4", "1000")
	if err != nil {
		t.Fatal(err)
	}
	bp := m.Breakpoints[0]
	if bp.Counted != "kernel" || bp.Hits != 20 || !bp.Deleted {
		t.Errorf("breakpoint %+v", bp)
	}
	var hits []int
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
		if s.Frame.Function != "hot" || s.Frame.Addr != m.Stops[0].Frame.Addr {
			t.Errorf("stop at hit %d: frame %+v, the first at %s", s.Hit, s.Frame, m.Stops[0].Frame.Addr)
		}
	}
	slices.Sort(hits)
	var want []int
	for h := 1; h <= 20; h++ {
		want = append(want, h)
	}
	if !slices.Equal(hits, want) {
		t.Errorf("stops at hits %v, want 1 to 20", hits)
	}
	for _, e := range m.Events {
		t.Errorf("event %s: %s", e.Kind, e.Message)
	}
}

// A breakpoint whose every hit is measured stays gdb's (the kernel would
// save no stop), and the run says why.
func TestKernelLeavesEveryHitToGDB(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, _, err := runNativeOut(t, driver.Options{}, hotPlan("    max_hits: 20\n"), bin, "4", "50")
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for h := 1; h <= 20; h++ {
		want = append(want, h)
	}
	checkCounted(t, m, "gdb", 20, want)
	if why := m.Breakpoints[0].CountedWhy; why != "every hit is measured: each stops the program either way" {
		t.Errorf("counted_why %q", why)
	}
}

// A breakpoint with a gdb condition stays gdb's, and the run says why.
func TestKernelLeavesConditionsToGDB(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, _, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    condition: i == 7\n"), bin, "2", "100")
	if err != nil {
		t.Fatal(err)
	}
	checkCounted(t, m, "gdb", 2, []int{1, 2})
	if why := m.Breakpoints[0].CountedWhy; !strings.Contains(why, "condition") {
		t.Errorf("counted_why %q", why)
	}
}

// A program whose threads block every signal: the thread of the first hit
// blocks both stop signals, so gdb keeps the breakpoint, and every
// measured hit stops where it should.
func TestKernelProgramBlocksSignals(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, out, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    every: 300\n"), bin, "4", "300", "block")
	if err != nil {
		t.Fatal(err)
	}
	if n := counted(t, out, "calls"); n != 1200 {
		t.Fatalf("the program made %d calls", n)
	}
	checkCounted(t, m, "gdb", 1200, []int{1, 301, 601, 901})
	if why := m.Breakpoints[0].CountedWhy; !strings.Contains(why, "blocks SIGWINCH and SIGURG") {
		t.Errorf("counted_why %q", why)
	}
}

// A program that catches SIGWINCH and raises it itself: the stops use
// SIGURG, and the program's own signals reach it.
func TestKernelProgramOwnSignal(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, out, err := runNativeOut(t, driver.Options{Env: kernelEnv}, hotPlan("    every: 25000\n"), bin, "4", "25000", "winch")
	if err != nil {
		t.Fatal(err)
	}
	if n, w := counted(t, out, "calls"), counted(t, out, "winch"); n != 100_000 || w != 4 {
		t.Fatalf("the program made %d calls and caught %d SIGWINCH, want 100000 and 4", n, w)
	}
	checkCounted(t, m, "kernel", 100_000, []int{1, 25_001, 50_001, 75_001})
}

// A pending breakpoint in a plugin loaded with dlopen and one in a library
// the program links: both counted in the kernel from their first hit.
func TestKernelLibraries(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	lib := testenv.Build(t, "../../../testdata/e2e/libkeep.c", "-shared", "-fPIC")
	plugin := testenv.Build(t, "../../../testdata/e2e/plugin.c", "-shared", "-fPIC")
	bin := testenv.Build(t, "../../../testdata/e2e/libmain.c", "-Wl,--no-as-needed", lib, "-ldl")
	plan := "backend: native\nbreakpoints:\n  - name: plugin\n    location: plugin_keep\n    pending: true\n    every: 1000\n" +
		"  - name: lib\n    location: lib_keep\n    every: 2500\n"
	_, m, err := runNative(t, driver.Options{Env: kernelEnv}, plan, bin, plugin, "10000")
	if err != nil {
		t.Fatal(err)
	}
	var plugins, libs []int
	for _, s := range m.Stops {
		if s.Breakpoint == "plugin" {
			plugins = append(plugins, s.Hit)
		} else {
			libs = append(libs, s.Hit)
		}
	}
	for i, want := range []struct {
		fn   string
		hits []int
	}{{"plugin_keep", []int{1, 1001, 2001, 3001, 4001, 5001, 6001, 7001, 8001, 9001}}, {"lib_keep", []int{1, 2501, 5001, 7501}}} {
		bp := m.Breakpoints[i]
		if bp.Counted != "kernel" || bp.Hits != 10_000 {
			t.Errorf("breakpoint %+v", bp)
		}
		got := plugins
		if i == 1 {
			got = libs
		}
		if fmt.Sprint(got) != fmt.Sprint(want.hits) {
			t.Errorf("%s stopped at hits %v, want %v", bp.Name, got, want.hits)
		}
	}
	for _, s := range m.Stops {
		if want := map[string]string{"plugin": "plugin_keep", "lib": "lib_keep"}[s.Breakpoint]; s.Frame.Function != want {
			t.Errorf("stop %d of %s in %+v", s.Seq, s.Breakpoint, s.Frame)
		}
	}
}

// bpfLinks counts the eBPF links this test process holds: the probes of
// the runs it makes in-process.
func bpfLinks() int {
	n := 0
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); l == "anon_inode:bpf_link" {
			n++
		}
	}
	return n
}

const requestPlan = "backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n"

// snapctl attach to a threaded server under load, through gdbserver: the
// kernel counts the requests, only the measured ones stop, and the server
// serves on untraced with its code the files' again.
func TestKernelAttach(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	res, err := runSession(t, driver.Options{Env: kernelEnv, Attach: driver.Attach{AttachPID: srv.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		requestPlan+"    every: 300\n    max_hits: 901\n", "")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	bp := m.Breakpoints[0]
	if bp.Counted != "kernel" || bp.Hits != 901 || !bp.Deleted || !m.Native.Detached {
		t.Errorf("breakpoint %+v, detached %v", bp, m.Native.Detached)
	}
	var hits []int
	measured := 0
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
		if s.Frame.Function != "handle_request" {
			t.Errorf("stop %d: frame %+v", s.Seq, s.Frame)
		}
		if heapMeasured(t, s) {
			measured++
		}
	}
	if measured < len(m.Stops)/2 {
		t.Errorf("%d of %d stops measured the heap", measured, len(m.Stops))
	}
	if fmt.Sprint(hits) != "[1 301 601 901]" {
		t.Errorf("stops at hits %v", hits)
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

// gdb or gdbserver killed with SIGKILL while the kernel counts a busy
// server's requests: the probes go, the server serves on untraced, its
// code the files' again, and no stop signal reached it. Not parallel:
// the eBPF links this process holds are the run's alone.
func TestKernelAttachToolKilled(t *testing.T) {
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	for _, victim := range []string{"gdb", "gdbserver"} {
		t.Run(victim, func(t *testing.T) {
			srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
			stop := make(chan struct{})
			answered := srv.Load(stop)
			// Every 50th request stops: the kill comes while hits
			// are counted and stops are taken.
			// gdb and gdbserver trace the server only where gdb
			// takes the stops.
			done := attachInBackground(t, srv.Pid, requestPlan+"    every: 50\n", driver.Options{Env: append([]string{"SNAPCTL_STOPS=gdb"}, kernelEnv...), Attach: driver.Attach{Guard: true}})
			for deadline := testenv.NewDeadline(time.Minute); bpfLinks() == 0; time.Sleep(5 * time.Millisecond) {
				if deadline.Passed() {
					t.Fatal("the kernel never took the counting over")
				}
			}
			before := served(t, srv)
			for served(t, srv)-before < 200 {
				time.Sleep(10 * time.Millisecond)
			}
			st, _ := proc.Status(srv.Pid)
			gdbserver := mustAtoi(st["TracerPid"])
			pid := map[string]int{"gdb": tracer(srv.Pid), "gdbserver": gdbserver}[victim]
			if pid == 0 || proc.Name(gdbserver) != "gdbserver" {
				t.Fatalf("no %s to kill (tracer %d %s)", victim, gdbserver, proc.Name(gdbserver))
			}
			syscall.Kill(pid, syscall.SIGKILL)
			err := <-done
			if err == nil {
				t.Errorf("the run did not fail when %s was killed", victim)
			}
			t.Logf("%s killed: %v", victim, err)
			time.Sleep(200 * time.Millisecond)
			if g := srv.Gone(); g != "" {
				t.Fatal(g)
			}
			if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
				t.Fatalf("probes or breakpoints left in the server: %s", strings.Join(ch, "; "))
			}
			if n := bpfLinks(); n != 0 {
				t.Errorf("%d eBPF links left after the run", n)
			}
			if tr := tracer(srv.Pid); tr != 0 {
				t.Errorf("the server is still traced by %d", tr)
			}
			got, _ := srv.Ask("count")
			if !strings.HasPrefix(got, "ok ") {
				t.Fatalf("the server answers %q", got)
			}
			srv.MustServe(t)
			close(stop)
			if answered() == 0 {
				t.Error("no request of the load was answered")
			}
		})
	}
}

// --sites: the kernel counts, and each measured stop cuts heaptrack's
// stream: every stop has its per-site snapshot, with hot()'s leak.
func TestKernelSites(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "heaptrack")
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, out, err := runNativeOut(t, driver.Options{Env: kernelEnv, Measure: driver.Measure{Sites: true}}, hotPlan("    every: 200000\n"), bin, "4", "200000")
	if err != nil {
		t.Fatal(err)
	}
	if n := counted(t, out, "calls"); n != 800_000 {
		t.Fatalf("the program made %d calls", n)
	}
	checkCounted(t, m, "kernel", 800_000, []int{1, 200_001, 400_001, 600_001})
	for _, s := range m.Stops {
		if s.Snapshot == "" {
			t.Errorf("stop %d has no per-site snapshot", s.Seq)
		}
	}
	if len(m.Suspects) == 0 {
		t.Errorf("no suspect: hot() leaks 64 bytes a 1,000 calls")
	}
}

// snapctl attach to a program that calls hot() as fast as it can, in 4
// threads: 100,001 hits counted in the kernel, three stops, then the
// program runs on, untraced, its code the file's again.
func TestKernelAttachHotProgram(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	cmd := testenv.StartFixture(t, bin, "4", "1000000000000")
	pid := cmd.Process.Pid
	res, err := runSession(t, driver.Options{Env: kernelEnv, Attach: driver.Attach{AttachPID: pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		hotPlan("    every: 50000\n    max_hits: 100001\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	checkCounted(t, m, "kernel", 100_001, []int{1, 50_001, 100_001})
	if !m.Native.Detached {
		t.Error("not detached")
	}
	if ch := testenv.TextChanges(t, pid); len(ch) > 0 {
		t.Fatalf("probes or breakpoints left in the program: %s", strings.Join(ch, "; "))
	}
	before := proc.Stat(pid)
	time.Sleep(300 * time.Millisecond)
	after := proc.Stat(pid)
	if tr := tracer(pid); tr != 0 || after.State == 'T' || after.State == 't' || after.State == 'Z' {
		t.Errorf("after the run: tracer %d, state %c", tr, after.State)
	}
	t.Logf("state %c then %c", before.State, after.State)
}

// snapctl attach (gdbserver traces the program) to 4 threads calling hot()
// without pause: at each measured stop the other threads are held at
// their next hit, the calls begun between two stops are the hits between
// them give or take one per other thread at each end, and the held hits
// stop with a signal that gdbserver passes on to the program without a
// stop: the only signal stops gdb reports are the measured hits'.
func TestKernelAttachHoldsOtherThreads(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "gdbserver")
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	cmd := testenv.StartFixture(t, bin, "4", "1000000000000")
	pid := cmd.Process.Pid
	res, err := runSession(t, driver.Options{Env: kernelEnv, Trace: true, Attach: driver.Attach{AttachPID: pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		hotPlan("    every: 50000\n    max_hits: 300001\n    commands: [\"print started\"]\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	checkCounted(t, m, "kernel", 300_001, []int{1, 50_001, 100_001, 150_001, 200_001, 250_001, 300_001})
	prev, prevHit := 0, 0
	for i, s := range m.Stops {
		var started int
		if len(s.Commands) != 1 {
			t.Fatalf("stop %d: commands %+v", s.Seq, s.Commands)
		}
		_, v, _ := strings.Cut(s.Commands[0].Output, "= ")
		if _, err := fmt.Sscanf(v, "%d", &started); err != nil {
			t.Fatalf("stop %d: %q", s.Seq, s.Commands[0].Output)
		}
		// The calls begun at a stop are the hits, give or take one
		// per other thread: between two stops, twice that.
		if d := (started - prev) - (s.Hit - prevHit); i > 0 && (d < -6 || d > 6) {
			t.Errorf("stops at hits %d and %d: %d calls begun between them, %+d from the hits", prevHit, s.Hit, started-prev, d)
		} else if i > 0 {
			t.Logf("stops at hits %d and %d: %+d", prevHit, s.Hit, d)
		}
		prev, prevHit = started, s.Hit
	}
	mi, err := os.ReadFile(filepath.Join(res.Dir, traceFile))
	if err != nil {
		t.Fatal(err)
	}
	// The first stop is gdb's breakpoint's; each measured one after it
	// is its thread's SIGWINCH, run on to the breakpoint's address.
	// Held hits stop with SIGURG, which gdb never reports; a thread
	// that gdbserver let go with it before it stopped every thread
	// stops with SIGWINCH at its next hit, at most once per other
	// thread and measured stop.
	winch := strings.Count(string(mi), `*stopped,reason="signal-received",signal-name="SIGWINCH"`)
	urg := strings.Count(string(mi), `*stopped,reason="signal-received",signal-name="SIGURG"`)
	measured := len(m.Stops) - 1
	if winch < measured || winch > 4*measured || urg != 0 {
		t.Errorf("gdb reported %d SIGWINCH and %d SIGURG stops for %d measured hits counted in the kernel", winch, urg, measured)
	}
	t.Logf("%d held hits stopped with SIGWINCH", winch-measured)
	if ch := testenv.TextChanges(t, pid); len(ch) > 0 {
		t.Fatalf("probes or breakpoints left in the program: %s", strings.Join(ch, "; "))
	}
}

// around_call on a breakpoint counted in the kernel: each measured hit
// stops in hot() and runs to its return, which takes the return phase,
// the other threads held by scheduler-locking.
func TestKernelAroundCall(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	bin := testenv.Build(t, "../../testdata/native/hot.c")
	m, _, err := runNativeOut(t, driver.Options{Env: kernelEnv}, "scheduler_locking: \"on\"\n"+hotPlan("    every: 100000\n    around_call: true\n"), bin, "4", "100000")
	if err != nil {
		t.Fatal(err)
	}
	bp := m.Breakpoints[0]
	if bp.Counted != "kernel" || bp.Hits != 400_000 || bp.Snapshots != 8 {
		t.Fatalf("breakpoint %+v", bp)
	}
	var got []string
	for _, s := range m.Stops {
		got = append(got, fmt.Sprintf("%d/%s", s.Hit, s.Phase))
		if s.Phase == "return" && (s.OtherThreadsRan == nil || *s.OtherThreadsRan) {
			t.Errorf("stop %d: other threads ran %v under scheduler-locking", s.Seq, s.OtherThreadsRan)
		}
	}
	if want := "[1/hit 1/return 100001/hit 100001/return 200001/hit 200001/return 300001/hit 300001/return]"; fmt.Sprint(got) != want {
		t.Errorf("stops %v, want %s", got, want)
	}
}

// snapctl attach --sites to a threaded server under load: gdb traces the
// process and heaptrack records in it, and the kernel counts the
// requests (run.json says so); only the measured ones stop, each with its
// per-site snapshot, the hit counts exact. The server then serves on
// untraced, with no probe or breakpoint left in its code and no eBPF link
// left.
func TestKernelAttachSites(t *testing.T) {
	t.Parallel()
	kernelCounts(t)
	testenv.MustHave(t, "gdb", "heaptrack")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	res, err := runSession(t, driver.Options{Env: kernelEnv, Measure: driver.Measure{Sites: true}, Attach: driver.Attach{AttachPID: srv.Pid, Guard: true}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}},
		requestPlan+"    every: 300\n    max_hits: 901\n", "")
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	bp := m.Breakpoints[0]
	if bp.Counted != "kernel" || bp.Hits != 901 || !bp.Deleted || !m.Native.Detached {
		t.Errorf("breakpoint %+v, detached %v", bp, m.Native.Detached)
	}
	var hits []int
	for _, s := range m.Stops {
		hits = append(hits, s.Hit)
		if s.Frame.Function != "handle_request" || s.Snapshot == "" {
			t.Errorf("stop %d: frame %+v, snapshot %q", s.Seq, s.Frame, s.Snapshot)
		}
	}
	if fmt.Sprint(hits) != "[1 301 601 901]" {
		t.Errorf("stops at hits %v", hits)
	}
	// heaptrack's descriptors moved out of the server's way, though the
	// server, running during gdb's calls, takes every number freed at
	// once for a connection of the load.
	for _, e := range m.Events {
		if e.Kind == "sites-descriptors" {
			t.Errorf("event %s: %s", e.Kind, e.Message)
		}
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
