package native_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/preflight"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// runNative runs plan (whose backend is native) on binary with args.
func runNative(t *testing.T, opts driver.Options, plan, binary string, args ...string) (*driver.Result, *runjson.Manifest, error) {
	t.Helper()
	testenv.MustHave(t, "gdb")
	res, err := runSession(t, opts, plan, binary, args...)
	if res == nil {
		t.Fatalf("no run: %v", err)
	}
	return res, readManifest(t, res.Dir), err
}

const roundPlan = "backend: native\nbreakpoints:\n  - name: round\n    location: round_done\n"

// TestNativeLeak: 100 blocks of 100 bytes per round are 100 chunks of 112
// bytes in glibc's in-use heap, and the free heap gives them up.
func TestNativeLeak(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, m, err := runNative(t, driver.Options{NoAgent: p.noAgent}, roundPlan, bin, "100")
			if err != nil {
				t.Fatal(err)
			}
			if m.Backend != native.Name || m.Native == nil || m.Native.TrimProbe || m.Valgrind != nil {
				t.Errorf("backend %q, native %+v, valgrind %v", m.Backend, m.Native, m.Valgrind)
			}
			if len(m.Stops) != 6 {
				t.Fatalf("%d stops, want 6", len(m.Stops))
			}
			for _, s := range m.Stops {
				mem := s.Memory
				if mem == nil || mem.HeapInUseBytes == nil || mem.HeapFreeBytes == nil || mem.MmapBytes == nil || mem.Arenas == nil {
					t.Fatalf("stop %d: memory %+v", s.Seq, mem)
				}
				if mem.RSSBytes <= 0 || mem.AnonRSSBytes <= 0 || mem.AnonRSSBytes > mem.RSSBytes || *mem.Arenas != 1 || *mem.MmapBytes != 0 {
					t.Errorf("stop %d: memory %+v", s.Seq, *mem)
				}
				if s.Snapshot != "" {
					t.Errorf("stop %d: snapshot %q", s.Seq, s.Snapshot)
				}
			}
			if len(m.Diffs) != 5 {
				t.Fatalf("%d diffs, want 5", len(m.Diffs))
			}
			diffs := nativeDiffs(t, res.Dir)
			for _, d := range diffs {
				if d.Kind != "between-hits" || *d.MemoryDelta.HeapInUseBytes != 100*112 || *d.MemoryDelta.HeapFreeBytes != -100*112 {
					t.Errorf("diff %d..%d: %s %+v; want in-use +11200, free -11200", d.FromSeq, d.ToSeq, d.Kind, d.MemoryDelta)
				}
			}
			if len(m.Verdicts) != 1 {
				t.Fatalf("verdicts %+v", m.Verdicts)
			}
			v := m.Verdicts[0]
			if v.Verdict != runjson.VerdictLeak || *v.Figures.InUseGrowth != 5*11200 || *v.Figures.InUsePerHit != 11200 || v.Figures.InUseIntervals != 5 {
				t.Errorf("verdict %+v, figures %+v", v, v.Figures)
			}
			if !strings.Contains(v.Sentence, "--backend massif") {
				t.Errorf("sentence %q does not say to rerun with massif", v.Sentence)
			}
			report, _ := os.ReadFile(filepath.Join(res.Dir, reportFile))
			if !strings.Contains(string(report), "**verdict: leak at breakpoint round") || !strings.Contains(string(report), native.MassifNote) {
				t.Errorf("report.md:\n%s", report)
			}
		})
	}
}

// nativeDiffs reads run.json's diffs as the native backend writes them.
func nativeDiffs(t *testing.T, dir string) []runjson.MemoryDiff {
	t.Helper()
	var m struct{ Diffs []runjson.MemoryDiff }
	readJSON(t, filepath.Join(dir, manifestFile), &m)
	return m.Diffs
}

// noTcache turns glibc's per-thread cache off in the target: mallinfo2
// counts the freed blocks it holds as in use, and on retain.c they add
// 288 bytes a round (docs/facts.md, fact 39), a trend the
// verdict would call a leak.
const noTcache = "target:\n  env:\n    GLIBC_TUNABLES: glibc.malloc.tcache_count=0\n"

// TestNativeRetention: freed small blocks below a live one stay with the
// allocator. With trim_probe, malloc_trim(0) gives most of them back.
func TestNativeRetention(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/retain.c")
	_, m, err := runNative(t, driver.Options{}, noTcache+roundPlan, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Verdicts) != 1 || m.Verdicts[0].Verdict != runjson.VerdictRetention {
		t.Fatalf("verdicts %+v", m.Verdicts)
	}
	f := m.Verdicts[0].Figures
	// One 256-byte block (a 272-byte chunk) kept per round; about 2 MiB
	// more resident and free per round.
	if *f.InUseGrowth > 5*272+4096 || f.RSSGrowth < 9<<20 || *f.FreeGrowth < 9<<20 {
		t.Errorf("figures %+v: in-use %d, free %d", f, *f.InUseGrowth, *f.FreeGrowth)
	}
	if !strings.Contains(m.Verdicts[0].Sentence, "MALLOC_ARENA_MAX") || !strings.Contains(m.Verdicts[0].Sentence, "native.trim_probe") {
		t.Errorf("sentence %q", m.Verdicts[0].Sentence)
	}

	res, m, err := runNative(t, driver.Options{}, noTcache+"native:\n  trim_probe: true\n"+roundPlan, bin)
	if err != nil {
		t.Fatal(err)
	}
	if m.Native == nil || !m.Native.TrimProbe {
		t.Errorf("native %+v: trim_probe not recorded", m.Native)
	}
	for _, s := range m.Stops {
		// The round's freed chunks: (r+1) * 8192 blocks of 256 bytes,
		// 272-byte chunks, and the array of their pointers, 8 bytes a
		// block; all but the pages that hold live chunks' edges go back.
		n := int64(s.Hit) * 8192
		want := n * (272 + 8)
		if got := s.Memory.TrimReleasedBytes; got == nil || *got > want || *got < want-64<<10 {
			t.Errorf("stop %d: trim_released_bytes %d, want %d less at most 64 KiB", s.Seq, derefInt(got), want)
		}
	}
	// What the trim released is in every report, and in the verdict.
	v := m.Verdicts[0]
	if v.Verdict != runjson.VerdictRetention || v.Figures.TrimReleased == nil || *v.Figures.TrimReleased != *m.Stops[len(m.Stops)-1].Memory.TrimReleasedBytes {
		t.Fatalf("verdict %+v, figures %+v", v, v.Figures)
	}
	released := "malloc_trim(0) released up to " + snapshots.FormatBytes(*v.Figures.TrimReleased) + " at a stop, " + snapshots.FormatBytes(*v.Figures.TrimReleasedTotal) + " in all"
	var text bytes.Buffer
	if err := driver.WriteText(&text, res, snapshots.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(res.Dir, reportFile))
	page, _ := os.ReadFile(filepath.Join(res.Dir, htmlFile))
	for name, report := range map[string]string{"text": text.String(), "report.html": string(page)} {
		if !strings.Contains(report, released) || !strings.Contains(report, "1 arena") {
			t.Errorf("%s does not say %q and 1 arena:\n%s", name, released, report)
		}
	}
	// Each stop's mark on the chart says what the trim released there.
	for _, st := range m.Stops {
		if want := "1 arena · malloc_trim(0) released " + snapshots.FormatBytes(*st.Memory.TrimReleasedBytes); !strings.Contains(string(page), want) {
			t.Errorf("report.html: no mark says %q", want)
		}
	}
	cell := "| " + snapshots.FormatBytes(*v.Figures.TrimReleased) + ", " + snapshots.FormatBytes(*v.Figures.TrimReleasedTotal) + " |"
	if !strings.Contains(string(md), cell) {
		t.Errorf("report.md has no %q:\n%s", cell, md)
	}
	if strings.Contains(string(page), "largest") || strings.Contains(string(page), "snapshot") {
		t.Errorf("report.html speaks of diffs it does not show or of snapshots:\n%s", page)
	}
}

// TestNativeOutsideHeap: memory mapped outside malloc.
func TestNativeOutsideHeap(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/mapped.c")
	_, m, err := runNative(t, driver.Options{}, roundPlan, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Verdicts) != 1 || m.Verdicts[0].Verdict != runjson.VerdictOutsideHeap {
		t.Fatalf("verdicts %+v", m.Verdicts)
	}
	f := m.Verdicts[0].Figures
	if *f.InUseGrowth != 0 || *f.FreeGrowth != 0 || f.RSSGrowth < 5<<20 || f.RSSGrowth > 5<<20+64<<10 {
		t.Errorf("figures %+v: in-use %d, free %d", f, *f.InUseGrowth, *f.FreeGrowth)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// TestNativeLockedCall: natively gdb honours scheduler-locking, so the
// within-call delta of keep_one is its own 4000-byte block (a 4016-byte
// chunk) while another thread allocates, and no other thread ran. The
// other thread allocated in an arena of its own before the first call:
// every stop counts two. A stop that finds the other thread inside malloc,
// its arena's lock held, records resident memory only (allocator-busy),
// and so does the call's other stop, that thread not having run: such a
// run has no figure to check, and is run again (it happens about once in
// a few hundred runs, more often on a loaded machine).
func TestNativeLockedCall(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/locked.c")
	var res *driver.Result
	var m *runjson.Manifest
	for try := 1; ; try++ {
		var err error
		res, m, err = runNative(t, driver.Options{}, "backend: native\nscheduler_locking: on\nbreakpoints:\n  - name: keep\n    location: keep_one\n    around_call: true\n", bin)
		if err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, s := range m.Stops {
			if !heapMeasured(t, s) {
				busy++
			}
		}
		if t.Failed() {
			t.FailNow() // a stop without figures for another reason
		}
		if busy == 0 {
			break
		}
		if try == 3 {
			t.Fatalf("%d runs, each with a stop inside the other thread's malloc", try)
		}
		t.Logf("run %d: %d stops allocator-busy; running again", try, busy)
	}
	var within []runjson.MemoryDiff
	for _, d := range nativeDiffs(t, res.Dir) {
		if d.Kind == "within-call" {
			within = append(within, d)
		}
	}
	if len(within) != 4 {
		t.Fatalf("%d within-call diffs, want 4", len(within))
	}
	for _, d := range within {
		if got := *d.MemoryDelta.HeapInUseBytes; got != 4016 {
			t.Errorf("call %d..%d: in-use delta %d, want 4016", d.FromSeq, d.ToSeq, got)
		}
	}
	for _, s := range m.Stops {
		if s.Memory == nil || s.Memory.Arenas == nil || *s.Memory.Arenas != 2 {
			t.Errorf("stop %d: memory %+v, want 2 arenas", s.Seq, s.Memory)
		}
		if s.Phase != runjson.PhaseReturn {
			continue
		}
		if s.OtherThreadsRan == nil || *s.OtherThreadsRan || s.SchedulerLocking != "on" {
			t.Errorf("return stop %d: other_threads_ran %v (%v), scheduler_locking %q", s.Seq, s.OtherThreadsRan, s.ThreadsChanged, s.SchedulerLocking)
		}
	}
}

// TestNativeLockReleased: a call that waits for another thread never
// returns while the lock keeps that thread stopped; at stop_timeout the
// lock is released, the call returns and the run goes on. (stop_timeout
// also bounds the hit's own measurement, which took more than the 1 s
// this test gave it at load average 40.)
func TestNativeLockReleased(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/locked.c")
	_, m, err := runNative(t, driver.Options{}, "backend: native\nstop_timeout: 5s\nbreakpoints:\n  - name: wait\n    location: wait_for_other\n    around_call: true\n", bin, "block")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runjson.StatusCompleted || len(m.Stops) != 2 {
		t.Fatalf("status %s, %d stops, events %+v", m.Status, len(m.Stops), m.Events)
	}
	ret := m.Stops[1]
	if ret.Phase != runjson.PhaseReturn || !ret.SchedulerLockReleased || ret.OtherThreadsRan == nil || !*ret.OtherThreadsRan {
		t.Errorf("return stop %+v", ret)
	}
	if !slices.ContainsFunc(m.Events, func(e runjson.Event) bool { return e.Kind == runjson.EventSchedulerLockReleased }) {
		t.Errorf("events %+v: no scheduler-lock-released", m.Events)
	}
}

// TestNativeLockReleasedAtFutexWait: a call that needs a mutex which
// another thread holds, that thread stopped by scheduler-locking, waits in
// futex(2): the lock is released as soon as that is seen, not at
// stop_timeout (10 minutes here, beyond the run's 2-minute timeout), and
// every call returns.
func TestNativeLockReleasedAtFutexWait(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/locked.c")
	_, m, err := runNative(t, driver.Options{Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}}, "backend: native\nstop_timeout: 10m\nbreakpoints:\n  - name: take\n    location: take_shared\n    around_call: true\n", bin, "mutex")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runjson.StatusCompleted || len(m.Stops) != 8 {
		t.Fatalf("status %s, %d stops, events %+v", m.Status, len(m.Stops), m.Events)
	}
	released := 0
	for _, s := range m.Stops {
		if s.Phase == runjson.PhaseReturn && s.SchedulerLockReleased {
			released++
		}
	}
	var said int
	for _, e := range m.Events {
		if e.Kind == runjson.EventSchedulerLockReleased && strings.Contains(e.Message, "futex") {
			said++
		}
	}
	if released == 0 || said != released {
		t.Errorf("%d of 4 calls released, %d events say why: %+v", released, said, m.Events)
	}
}

// TestNativeUnlockedCallSeesOtherThreads: without the lock the other
// thread runs during the call, and the return stop says so.
func TestNativeUnlockedCallSeesOtherThreads(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/locked.c")
	_, m, err := runNative(t, driver.Options{}, "backend: native\nscheduler_locking: off\nbreakpoints:\n  - name: keep\n    location: keep_one\n    around_call: true\n", bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Stops {
		if s.Phase == runjson.PhaseReturn && (s.OtherThreadsRan == nil || !*s.OtherThreadsRan) {
			t.Errorf("return stop %d: other_threads_ran %v with scheduler_locking off", s.Seq, s.OtherThreadsRan)
		}
	}
}

// startLoop starts the attach fixture, which runs until killed, and
// kills it at the end of the test.
func startLoop(t *testing.T) *exec.Cmd {
	t.Helper()
	return testenv.StartFixture(t, testenv.Build(t, "../../testdata/native/loop.c"))
}

// switches is the process's context switches: they grow while it runs.
func switches(t *testing.T, pid int) int64 {
	t.Helper()
	st, err := proc.Status(pid)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	fmt.Sscan(st["voluntary_ctxt_switches"], &n)
	return n
}

// TestNativeAttach attaches to a running process, takes max_hits stops,
// deletes the breakpoint and detaches: the process goes on running,
// untraced.
func TestNativeAttach(t *testing.T) {
	t.Parallel()
	loop := startLoop(t)
	pid := loop.Process.Pid
	res, m, err := runNative(t, driver.Options{Attach: driver.Attach{AttachPID: pid}}, "backend: native\nbreakpoints:\n  - name: tick\n    location: tick\n    max_hits: 5\n", "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runjson.StatusCompleted || len(m.Stops) != 5 || m.Native == nil || m.Native.AttachedPid != pid || !m.Native.Detached {
		t.Fatalf("status %s, %d stops, native %+v", m.Status, len(m.Stops), m.Native)
	}
	// 100 bytes leaked per tick: one 112-byte chunk between stops.
	for _, d := range nativeDiffs(t, res.Dir) {
		if *d.MemoryDelta.HeapInUseBytes != 112 {
			t.Errorf("diff %d..%d: in-use delta %d, want 112", d.FromSeq, d.ToSeq, *d.MemoryDelta.HeapInUseBytes)
		}
	}
	st, err := proc.Status(pid)
	if err != nil || st["TracerPid"] != "0" || strings.HasPrefix(st["State"], "t") || strings.HasPrefix(st["State"], "Z") {
		t.Fatalf("after the run: %v, state %q, tracer %q", err, st["State"], st["TracerPid"])
	}
	runsOn(t, pid)
}

// runsOn fails the test unless process pid runs: its count of context
// switches, voluntary or not, grows within a minute (a loaded machine
// may not run it for a while).
func runsOn(t *testing.T, pid int) {
	t.Helper()
	all := func() int64 {
		st, err := proc.Status(pid)
		if err != nil {
			t.Fatal(err)
		}
		var v, n int64
		fmt.Sscan(st["voluntary_ctxt_switches"], &v)
		fmt.Sscan(st["nonvoluntary_ctxt_switches"], &n)
		return v + n
	}
	before := all()
	for deadline := testenv.NewDeadline(time.Minute); all() <= before; time.Sleep(10 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatalf("the process does not run after the detach: %d context switches a minute later", before)
		}
	}
}

// TestNativeAttachRefused: no such process, and one already traced, each
// with its message and exit code; nothing is started.
func TestNativeAttachRefused(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - location: tick\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	attach := func(pid int) error {
		res, err := driver.Run(context.Background(), driver.Options{Attach: driver.Attach{AttachPID: pid}, PlanPath: plan, OutDir: filepath.Join(dir, "out")})
		if res != nil {
			t.Errorf("a run directory for a refused attach")
		}
		return err
	}
	// A process that has exited and been reaped.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	err := attach(gone.Process.Pid)
	if code, _ := driver.ExitStatus(err); code != driver.ExitNoProcess || !strings.Contains(fmt.Sprint(err), "no such process") {
		t.Errorf("gone process: %v (exit %d)", err, code)
	}

	loop := startLoop(t)
	// This test traces it: a process has one tracer.
	traced := make(chan error)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := syscall.PtraceAttach(loop.Process.Pid)
		traced <- err
		<-release
		if err == nil {
			syscall.PtraceDetach(loop.Process.Pid)
		}
	}()
	defer close(release)
	if err := <-traced; err != nil {
		t.Skipf("cannot trace the fixture: %v", err)
	}
	err = attach(loop.Process.Pid)
	if code, _ := driver.ExitStatus(err); code != driver.ExitTraced || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("already traced by process %d", os.Getpid())) {
		t.Errorf("traced process: %v (exit %d)", err, code)
	}
}

// TestNativeNoAllocator: a program without glibc has no allocator state
// to read: the run says so once and records resident memory only.
func TestNativeNoAllocator(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/nolibc.c", "-static", "-nostdlib")
	var warn testenv.Buffer
	_, m, err := runNative(t, driver.Options{Streams: driver.Streams{Warn: &warn}}, roundPlan, bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stops) != 3 {
		t.Fatalf("%d stops", len(m.Stops))
	}
	for _, s := range m.Stops {
		if s.Memory == nil || s.Memory.RSSBytes <= 0 || s.Memory.HeapInUseBytes != nil || s.Memory.HeapFreeBytes != nil {
			t.Errorf("stop %d: memory %+v", s.Seq, s.Memory)
		}
	}
	n := 0
	for _, e := range m.Events {
		if e.Kind == runjson.EventNoAllocatorState {
			n++
		}
	}
	if n != 1 || strings.Count(warn.String(), "allocator cannot be read") != 1 {
		t.Errorf("%d no-allocator-state events, warnings %q", n, warn.String())
	}
}

// TestNativeCorruptHeap: a corrupted fastbin link in a program of one
// thread. With libc's symbol table nothing is called: the reading stops
// at the misaligned link, the stop records allocator-call-failed and
// resident memory only, and the program runs to its end. Without it the
// stop calls mallinfo2(), in which glibc aborts on the heap it finds
// corrupted: the stop says why (not that the allocator cannot be read),
// and the program then dies of the SIGABRT at the stop, as after gdb's
// own call: a call that aborted may hold an arena's lock.
func TestNativeCorruptHeap(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	bin := testenv.Build(t, "../../testdata/native/corrupt.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas cannot be read")
	}
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			// Its only stop could not read the heap: a run that
			// measured nothing of it exits 1, saying why.
			_, m, err := runNative(t, driver.Options{NoAgent: p.noAgent}, roundPlan, bin)
			if err == nil || !strings.Contains(err.Error(), "could not be read at any of the 1 stops") {
				t.Fatalf("err %v, want the allocator unread at the only stop", err)
			}
			if m.Target.ExitCode == nil || *m.Target.ExitCode != 0 || len(m.Stops) != 1 || m.Stops[0].Memory.RSSBytes <= 0 || m.Stops[0].Memory.HeapInUseBytes != nil {
				t.Fatalf("target %+v, stops %+v", m.Target, m.Stops)
			}
			if m.Stops[0].Memory.HeapUnmeasured != runjson.EventAllocatorCallFailed {
				t.Errorf("heap_unmeasured %q, want allocator-call-failed", m.Stops[0].Memory.HeapUnmeasured)
			}
			if len(m.Events) != 1 || m.Events[0].Kind != runjson.EventAllocatorCallFailed || !strings.Contains(m.Events[0].Message, "glibc's arenas could not be read: arena 0x") || !strings.Contains(m.Events[0].Message, "is misaligned") {
				t.Errorf("events %+v", m.Events)
			}
		})
		t.Run(p.name+"-without-symbols", func(t *testing.T) {
			t.Parallel()
			var warn testenv.Buffer
			_, m, err := runNative(t, driver.Options{Streams: driver.Streams{Warn: &warn}, NoAgent: p.noAgent}, "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\n"+roundPlan, bin)
			var crash *driver.CrashError
			if !errors.As(err, &crash) || m.Target.Signal == nil || *m.Target.Signal != "SIGABRT" {
				t.Fatalf("error %v, target %+v; want a crash of SIGABRT", err, m.Target)
			}
			if len(m.Stops) != 1 || m.Stops[0].Memory == nil || m.Stops[0].Memory.RSSBytes <= 0 || m.Stops[0].Memory.HeapInUseBytes != nil {
				t.Fatalf("stops %+v, want one with resident memory only", m.Stops)
			}
			var kinds []runjson.EventKind
			for _, e := range m.Events {
				kinds = append(kinds, e.Kind)
				if e.Kind == runjson.EventAllocatorCallFailed && !strings.Contains(e.Message, `breakpoint "round" hit 1: mallinfo2() raised SIGABRT`) {
					t.Errorf("event message %q", e.Message)
				}
			}
			if !slices.Contains(kinds, runjson.EventAllocatorCallFailed) || slices.Contains(kinds, runjson.EventNoAllocatorState) || warn.String() != "" {
				t.Errorf("events %q, warnings %q; want allocator-call-failed and no claim that the allocator cannot be read", kinds, warn.String())
			}
		})
	}
}

// TestNativeBrokenPython: the native backend reads the allocator through
// gdb's Python; a Python that cannot read the agent (a json module that
// fails to import, first on its path) ends the run before the program
// starts, as a gdb error with Python's words.
func TestNativeBrokenPython(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/leak.c")
	pydir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pydir, "json.py"), []byte("raise ImportError('json is broken here')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, m, err := runNative(t, driver.Options{Env: []string{"PYTHONPATH=" + pydir}}, roundPlan, bin, "1")
	var te *driver.ToolError
	if !errors.As(err, &te) || te.Tool != "gdb" || !strings.Contains(te.Msg, "cannot load snapctl's agent") || !strings.Contains(te.Msg, "json is broken here") {
		t.Fatalf("error %v, want gdb's Python failing with its words", err)
	}
	if len(m.Stops) != 0 || m.Target.ExitCode != nil {
		t.Errorf("stops %d, target %+v: want the program never started", len(m.Stops), m.Target)
	}
}

// TestNativeWithoutLibcDebugInfo: without libc's debug info gdb does not
// know struct mallinfo2; the call through a cast reads the same figures,
// and the number of arenas is unknown.
func TestNativeWithoutLibcDebugInfo(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/leak.c")
	res, m, err := runNative(t, driver.Options{}, "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\n"+roundPlan, bin, "100")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range m.Stops {
		if s.Memory == nil || s.Memory.HeapInUseBytes == nil || s.Memory.Arenas != nil {
			t.Errorf("stop %d: memory %+v", s.Seq, s.Memory)
		}
	}
	for _, d := range nativeDiffs(t, res.Dir) {
		if *d.MemoryDelta.HeapInUseBytes != 100*112 {
			t.Errorf("diff %d..%d: in-use delta %d, want 11200", d.FromSeq, d.ToSeq, *d.MemoryDelta.HeapInUseBytes)
		}
	}
}

// TestNativeKeepsRegisters: the inferior calls of a stop (mallinfo2, and
// malloc_trim with trim_probe) give back every register the stopped code
// holds: the fixture checks its live vector and general registers after
// the stop and exits 3 when one changed.
func TestNativeKeepsRegisters(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture is x86-64 assembly")
	}
	bin := testenv.Build(t, "../../testdata/native/registers.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var out testenv.Buffer
			_, m, err := runNative(t, driver.Options{Streams: driver.Streams{Stdout: &out}, NoAgent: p.noAgent},
				"backend: native\nnative:\n  trim_probe: true\nbreakpoints:\n  - name: probe\n    location: \"*probe\"\n", bin)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Stops) != 1 || m.Stops[0].Memory == nil || m.Stops[0].Memory.HeapInUseBytes == nil {
				t.Fatalf("stops %+v", m.Stops)
			}
			// The check of the location before the run took no number.
			if m.Breakpoints[0].Number != "1" {
				t.Errorf("breakpoint number %q, want 1", m.Breakpoints[0].Number)
			}
			code := -1
			if m.Target.ExitCode != nil {
				code = *m.Target.ExitCode
			}
			if code != 0 || strings.TrimSpace(out.String()) != "intact" {
				t.Errorf("target exit code %d, output %q; want 0, intact", code, out.String())
			}
		})
	}
}

// TestAgentDirectCall: on a process with one thread the agent calls the
// allocator directly through ptrace rather than through gdb, and answers
// as gdb's call does. At one stop each:
//   - a signal gdb passes quietly (SIGALRM) that arrives during the call
//     reaches the program's handler, and the call returns;
//   - a signal gdb stops for (SIGINT), a fault inside the called function
//     and a signal the function raises end the call with the thread put
//     back (registers, vector registers, siginfo), and the signal reaches
//     gdb when the program resumes, then the program as gdb's table says.
//
// With a second thread gdb makes the call. The program runs on with its
// heap intact.
func TestAgentDirectCall(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "../../testdata/native/direct.c", "-pthread")
	dir := t.TempDir()
	script, output := nativeAgent(t, dir), filepath.Join(dir, "output")
	py := `python
import json, os, signal, struct
out = {"cases": [], "signals": []}
gdb.events.stop.connect(lambda ev: out["signals"].append(ev.stop_signal) if hasattr(ev, "stop_signal") else None)
gdb.execute("break probe")
gdb.execute("break probe2")
gdb.execute("run > " + ` + gdb.PyString(output) + `)
pid = gdb.selected_inferior().pid
def state():
    gdb.execute("maint flush register-cache", to_string=True)
    regs = [str(gdb.parse_and_eval("$" + r)) for r in ("pc", "sp", "rax", "rdi", "eflags", "xmm0", "xmm1", "xmm2")]
    return regs + [int(gdb.parse_and_eval("$_siginfo.si_signo")), int(gdb.parse_and_eval("$_siginfo.si_code"))]
def at(frame):
    while gdb.selected_frame().name() != frame or frame == "probe" and int(gdb.parse_and_eval("n")) != at.n:
        gdb.execute("continue")
at.n = 0
def case(name, arg=0, result=0, sig=None):
    before = state()
    if sig:
        os.kill(pid, sig)
    try:
        got = direct_call(name, arg, result)
        got = "returned %s" % ("bytes" if isinstance(got, bytes) else got)
    except CallFailed as e:
        got = str(e)
    out["cases"].append([got, state() == before])
data = direct_call("mallinfo2", result=80)
buf = (int(gdb.parse_and_eval("$sp")) - SCRATCH) & ~15
func("*(double (*)(void *))mallinfo2")(gdb.Value(buf).cast(gdb.lookup_type("void").pointer()))
out["same_as_gdb"] = data == gdb.selected_inferior().read_memory(buf, 80).tobytes()
case("mallinfo2", result=80, sig=signal.SIGALRM)
out["alrm"] = int(gdb.parse_and_eval("alrm"))
for n, args in ((1, dict(name="mallinfo2", result=80, sig=signal.SIGINT)), (2, dict(name="fault")), (3, dict(name="raiser", arg=signal.SIGUSR2))):
    at.n = n
    gdb.execute("continue")
    at("probe")
    case(**args)
gdb.execute("continue")
at("probe2")
out["second_thread"] = direct_call("mallinfo2", result=80) is None and len(gdb.selected_inferior().threads()) == 2
gdb.execute("continue")
print(json.dumps(out))
end
`
	cmds := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmds, []byte(py), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gdb", "-batch", "-nx", "-x", script, "-x", cmds, bin)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	var got struct {
		SameAsGdb    bool            `json:"same_as_gdb"`
		SecondThread bool            `json:"second_thread"`
		Alrm         int             `json:"alrm"`
		Cases        [][]interface{} `json:"cases"`
		Signals      []string        `json:"signals"`
	}
	dec := json.NewDecoder(strings.NewReader(gdb.LastLine(string(out))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("agent's answer %q: %v", out, err)
	}
	if !got.SameAsGdb {
		t.Errorf("the direct call's mallinfo2 differs from gdb's call's\n%s", out)
	}
	if got.Alrm != 1 {
		t.Errorf("SIGALRM handled %d times during the call, want 1", got.Alrm)
	}
	want := [][]interface{}{
		{"returned bytes", true},
		{"mallinfo2() was interrupted by SIGINT", true},
		{"fault() faulted: SIGSEGV", true},
		{"raiser() raised SIGUSR2", true},
	}
	if diff := cmp.Diff(want, got.Cases); diff != "" {
		t.Errorf("calls (-want +got; the bool: the thread put back):\n%s", diff)
	}
	// Each signal that ended a call reaches gdb as the program resumes.
	if want := []string{"SIGINT", "SIGSEGV", "SIGUSR2"}; !slices.Equal(got.Signals, want) {
		t.Errorf("gdb's signal stops %q, want %q", got.Signals, want)
	}
	if !got.SecondThread {
		t.Error("with a second thread the call was made directly, not by gdb")
	}
	if b, err := os.ReadFile(output); err != nil || string(b) != "alrm 1 usr2 1 segv 1 intact 1\n" {
		t.Errorf("program's output %q (%v), want alrm 1 usr2 1 segv 1 intact 1", b, err)
	}
}

// TestNativeLocationError: a location nothing defines, or a condition
// gdb cannot parse there, is a plan error before the run, as under massif,
// although the native backend's gdb started during the checks: no run
// directory, no gdb left, and its private directory goes. Not parallel:
// it sets TMPDIR, the test process's, to see what the run leaves there.
func TestNativeLocationError(t *testing.T) {
	testenv.MustHave(t, "gdb")
	bin := testenv.Build(t, "../../testdata/native/leak.c")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, c := range []struct{ bp, want string }{
		{"location: no_such_function", "no_such_function"},
		{"location: round_done\n    condition: \"r ===\"", "condition"},
	} {
		res, err := runSession(t, driver.Options{}, "backend: native\nbreakpoints:\n  - name: nowhere\n    "+c.bp+"\n", bin)
		if code, _ := driver.ExitStatus(err); res != nil || code != driver.ExitPlan || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("%s: result %v, error %v (exit %d); want a plan error that says %q, and no run", c.bp, res, err, code, c.want)
		}
	}
	left, _ := filepath.Glob(filepath.Join(tmp, "snapctl-*"))
	if len(left) != 0 {
		t.Errorf("left in TMPDIR: %v", left)
	}
}

// TestNativeAttachWorkload: attached, the run ends with its workload and
// the process is left running.
func TestNativeAttachWorkload(t *testing.T) {
	t.Parallel()
	loop := startLoop(t)
	pid := loop.Process.Pid
	_, m, err := runNative(t, driver.Options{Attach: driver.Attach{AttachPID: pid}}, "backend: native\nworkload: [sleep, \"0.5\"]\nbreakpoints:\n  - name: tick\n    location: tick\n", "")
	if err != nil {
		t.Fatal(err)
	}
	// How many ticks fit in the workload's half second depends on the
	// machine's load; one shows the breakpoint was in place.
	if m.Status != runjson.StatusCompleted || len(m.Stops) < 1 || !m.Native.Detached || m.Target.Signal != nil {
		t.Fatalf("status %s, %d stops, native %+v, signal %v", m.Status, len(m.Stops), m.Native, m.Target.Signal)
	}
	runsOn(t, pid)
}

// TestNativeLibraryDebugInfo: when nothing in the plan uses the libraries'
// separate debug information, gdb does not read it, and a crash in libc
// names libc's frames without their lines; a plan whose stops record
// backtraces (threads: current) has it read, lines and all. Without
// libc's debug file (Debian's libc6-dbg) the two cannot be told apart.
func TestNativeLibraryDebugInfo(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../../testdata/e2e/faults.c")
	const bp = "breakpoints:\n  - name: request\n    location: handle_request\n"
	// abortHasLine runs the program to its abort() and says whether the
	// crash's frame in libc's abort, the one abort_here called, has a
	// source file.
	abortHasLine := func(plan string) bool {
		_, m, _ := runNative(t, driver.Options{}, plan, bin, "abort", "2")
		if m.Target.Crash == nil {
			t.Fatalf("no crash recorded: target %+v", m.Target)
		}
		bt := m.Target.Crash.Backtrace
		for i := 1; i < len(bt); i++ {
			if bt[i].Function == "abort_here" {
				return bt[i-1].File != ""
			}
		}
		t.Fatalf("no abort_here frame in %v", bt)
		return false
	}
	if !libcDebugFile(t, bin) {
		t.Skip("libc has no separate debug file here (Debian: libc6-dbg)")
	}
	if !abortHasLine("backend: native\nthreads: current\n" + bp) {
		t.Errorf("gdb did not read libc's debug information for a plan that records backtraces")
	}
	if abortHasLine("backend: native\n" + bp) {
		t.Errorf("gdb read libc's debug information though the plan uses none of it")
	}
}

// libcDebugFile reports whether the separate debug file of the libc bin
// links is installed where gdb looks for it: by build id under
// /usr/lib/debug.
func libcDebugFile(t *testing.T, bin string) bool {
	t.Helper()
	for _, lib := range preflight.LinkedLibraries(context.Background(), bin, ".", os.Environ()) {
		if !strings.HasPrefix(filepath.Base(lib), "libc.so") {
			continue
		}
		id := testenv.BuildID(t, lib)
		if len(id) < 3 {
			return false
		}
		_, err := os.Stat(filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug"))
		return err == nil
	}
	return false
}

// fstPlan stops the OpenFST service after each round. Its native stops
// use around_call, whose stops go over GDB/MI with the other threads
// stopped: the agent's stop cannot yet measure a program with more than
// one thread.
const fstPlan = "backend: native\nbreakpoints:\n  - name: round\n    location: round_done\n"

// TestNativeFSTWorkload: a 4-thread service on OpenFST whose resident
// memory grows round after round with no leak is `retention`; with a
// small machine leaked per worker and round (fst.cpp's "leak" argument:
// one build of the fixture for both) it is `leak` (and still retention). glibc's per-thread caches stay on: their freed
// chunks, which mallinfo2 counts as in use and which creep up by about 3
// KiB a round on this workload, are taken out of in-use heap
// (tcache_test.go).
func TestNativeFSTWorkload(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/include/fst/fstlib.h"); err != nil {
		t.Skip("OpenFST is not installed (Debian: libfst-dev)")
	}
	flags := []string{"-std=c++17", "-Wl,--no-as-needed", "-lfst"}
	plan := fstPlan
	for _, tc := range []struct {
		name     string
		leak     bool
		findings []string
	}{
		{"retention", false, []string{runjson.VerdictRetention}},
		{"leak", true, []string{runjson.VerdictLeak, runjson.VerdictRetention}},
	} {
		// One after the other in the test's own turn, as
		// TestFSTServiceLeak's runs, for the same reason.
		t.Run(tc.name, func(t *testing.T) {
			bin := testenv.Build(t, "../../testdata/native/fst.cpp", flags...)
			var args []string
			if tc.leak {
				args = []string{"10", "800", "leak"}
			}
			_, m, err := runNative(t, driver.Options{}, plan, bin, args...)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Verdicts) != 1 {
				t.Fatalf("verdicts %+v", m.Verdicts)
			}
			v := m.Verdicts[0]
			if diff := cmp.Diff(tc.findings, v.Findings); diff != "" || v.Verdict != tc.findings[0] {
				t.Errorf("verdict %s, findings (-want +got):\n%s\n%s", v.Verdict, diff, v.Sentence)
			}
			// 4 workers and main: five arenas; ten rounds, ten stops.
			if f := v.Figures; f.Stops != 10 || f.Arenas == nil || *f.Arenas != 5 || f.RSSGrowth < 1<<20 {
				t.Errorf("figures %+v", f)
			}
		})
	}
}

func derefInt(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// A program that ignores the SIGTERM snapctl ends it with (end_run_after)
// dies of the SIGKILL that follows 5 s later, sent through a pidfd, and
// the run completes: the end is snapctl's.
func TestNativeEndIgnoresSIGTERM(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/termignored.c")
	plan := "backend: native\nbreakpoints:\n  - name: tick\n    location: tick\n    end_run_after: 2\n"
	// Without the SIGKILL the program would wait forever: --timeout
	// ends that run as a failure.
	res, m, err := runNative(t, driver.Options{Timeouts: driver.Timeouts{Timeout: testenv.Scaled(2 * time.Minute)}}, plan, bin)
	if err != nil || m.Status != runjson.StatusCompleted || len(m.Stops) != 2 {
		t.Fatalf("run: %v, status %s, %d stops (%s)", err, m.Status, len(m.Stops), res.Dir)
	}
	if m.Target.Signal == nil || *m.Target.Signal != "SIGKILL" {
		t.Errorf("the target's signal %v, want SIGKILL", m.Target.Signal)
	}
	var ended []string
	for _, e := range m.Events {
		if e.Kind == runjson.EventTargetEnded {
			ended = append(ended, e.Message)
		}
	}
	want := []string{`breakpoint "tick" took 2 snapshots (end_run_after): snapctl ends the target with SIGTERM (SIGKILL after 5s)`}
	if diff := cmp.Diff(want, ended); diff != "" {
		t.Errorf("target-ended events (-want +got):\n%s", diff)
	}
}
