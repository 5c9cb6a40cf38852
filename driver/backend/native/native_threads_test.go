package native_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// Native stops in programs with many threads, on both stop paths: the
// agent's (a breakpoint with nothing but the measurement) and GDB/MI's
// (commands or around_call, or no agent). Every run must complete, with
// as many hits as the program counted calls, and figures that add up.

// runNativeOut is runNative with the target's standard output, which the
// fixtures use to say what they counted.
func runNativeOut(t *testing.T, opts driver.Options, plan, binary string, args ...string) (*runjson.Manifest, string, error) {
	t.Helper()
	var out testenv.Buffer
	opts.Stdout = &out
	_, m, err := runNative(t, opts, plan, binary, args...)
	return m, out.String(), err
}

// counted is the number after word in the fixture's output ("calls 80").
func counted(t *testing.T, out, word string) int {
	t.Helper()
	m := regexp.MustCompile(`\b` + word + ` (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the program printed no %q count:\n%s", word, out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// nativePaths are the two stop paths of a native breakpoint at location:
// the agent's, and GDB/MI's, taken here by a breakpoint with commands.
var nativePaths = []struct {
	name string
	bp   func(name, location string) string
}{
	{"agent", func(name, location string) string {
		return fmt.Sprintf("  - name: %s\n    location: %s\n", name, location)
	}},
	{"mi", func(name, location string) string {
		return fmt.Sprintf("  - name: %s\n    location: %s\n    commands: [\"print 1\"]\n", name, location)
	}},
}

// checkFigures checks that every stop has the allocator's figures and
// that they add up: in use and free make the arenas' bytes. A stop at
// which another thread was inside the allocator (allocator-busy, which
// busy allows) has resident memory only.
func checkFigures(t *testing.T, m *runjson.Manifest, busy bool) {
	t.Helper()
	events := 0
	for _, e := range m.Events {
		if e.Kind == runjson.EventAllocatorBusy {
			events++
		}
	}
	without := 0
	for _, s := range m.Stops {
		mem := s.Memory
		if mem == nil || mem.RSSBytes <= 0 {
			t.Errorf("stop %d: memory %+v", s.Seq, mem)
			continue
		}
		if busy && mem.HeapInUseBytes == nil && mem.ArenaBytes == nil {
			without++
			continue
		}
		if mem.HeapInUseBytes == nil || mem.HeapFreeBytes == nil || mem.ArenaBytes == nil || mem.MmapBytes == nil || mem.Arenas == nil {
			t.Errorf("stop %d: memory %+v, want the allocator's figures", s.Seq, mem)
			continue
		}
		if *mem.HeapInUseBytes <= 0 || *mem.HeapFreeBytes <= 0 || *mem.HeapInUseBytes+*mem.HeapFreeBytes != *mem.ArenaBytes || *mem.Arenas < 1 {
			t.Errorf("stop %d: memory %+v", s.Seq, *mem)
		}
	}
	if busy && without != events {
		t.Errorf("%d stops without the allocator's figures, %d allocator-busy events", without, events)
	}
	if without > len(m.Stops)/2 {
		t.Errorf("%d of %d stops without the allocator's figures", without, len(m.Stops))
	}
}

// TestNativeDemo: the demo server (examples/server.c, two workers and a
// stats thread) with the demo's plan runs natively to its end on both
// paths, finds the cache's leak and counts the requests the plan says.
func TestNativeDemo(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../../examples/server.c")
	plan, err := os.ReadFile("../../../examples/plan.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			// gdb counts the hits, every one a stop, as the demo's
			// figures were made: counted in the kernel, the other
			// worker runs at full speed and its request in flight
			// is in the heap at some of the 5 stops, which then do
			// not make a significant trend (docs/native.md, "Hits
			// counted in the kernel").
			m, out, err := runNativeOut(t, driver.Options{NoAgent: p.noAgent, Env: []string{"SNAPCTL_HITS=gdb"}}, "backend: native\n"+string(plan), bin)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "served 60 requests") || m.Status != runjson.StatusCompleted {
				t.Fatalf("status %s, output %q", m.Status, out)
			}
			// 60 requests: 10 skipped, then one measurement every 10th.
			if len(m.Breakpoints) != 1 || m.Breakpoints[0].Hits != 50 || len(m.Stops) != 5 {
				t.Fatalf("breakpoints %+v, %d stops; want 50 hits, 5 stops", m.Breakpoints, len(m.Stops))
			}
			checkFigures(t, m, true)
			if len(m.Verdicts) != 1 || m.Verdicts[0].Verdict != runjson.VerdictLeak {
				t.Errorf("verdicts %+v, want a leak", m.Verdicts)
			}
		})
	}
}

// checkArenasRounds checks a run of driver/testdata/native/arenas.c
// (eight workers, nine arenas) that stopped once for each of its rounds:
// every stop's figures are what mallinfo2() returned in the program just
// before it (which counts the tcaches' chunks as in use).
func checkArenasRounds(t *testing.T, m *runjson.Manifest, out string, rounds int) {
	t.Helper()
	if counted(t, out, "calls") != rounds || len(m.Stops) != rounds {
		t.Fatalf("%d stops, output:\n%s", len(m.Stops), out)
	}
	seen := regexp.MustCompile(`round (\d+) uordblks (\d+) fordblks (\d+) hblkhd (\d+) arena (\d+)`).FindAllStringSubmatch(out, -1)
	if len(seen) != rounds {
		t.Fatalf("output:\n%s", out)
	}
	for i, r := range seen {
		mem := m.Stops[i].Memory
		if mem == nil || mem.HeapInUseBytes == nil || mem.Arenas == nil || mem.TcacheBytes == nil {
			t.Fatalf("stop %d: memory %+v", i+1, mem)
		}
		want := fmt.Sprintf("in use %s free %s mmap %s arena %s arenas 9", r[2], r[3], r[4], r[5])
		got := fmt.Sprintf("in use %d free %d mmap %d arena %d arenas %d", *mem.HeapInUseBytes+*mem.TcacheBytes, *mem.HeapFreeBytes-*mem.TcacheBytes, *mem.MmapBytes, *mem.ArenaBytes, *mem.Arenas)
		if got != want {
			t.Errorf("stop %d: %s; mallinfo2() in the program: %s", i+1, got, want)
		}
	}
}

// TestNativeArenasExact: with every worker parked, the figures a stop
// reads from glibc's arenas (eight threads, nine arenas, chunks in
// fastbins, bins and tcaches, mmapped blocks) are exactly what
// mallinfo2() returned in the program just before the stop.
func TestNativeArenasExact(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/arenas.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas cannot be read")
	}
	for _, p := range nativePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("checkpoint", "checkpoint"), bin, "8", "3")
			if err != nil {
				t.Fatal(err)
			}
			checkArenasRounds(t, m, out, 3)
		})
	}
}

// TestNativeThreads: 2, 8 and 64 threads that hit the breakpoint, and
// threads that start and exit while main waits in pthread_join: every
// call is a hit and a measurement, on both paths.
func TestNativeThreads(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/threads.c")
	for _, c := range []struct{ args []string }{
		{[]string{"1", "100", "exit"}}, // one worker, main waiting in pthread_join
		{[]string{"2", "20"}},
		{[]string{"8", "10"}},
		{[]string{"8", "10", "exit"}},
		{[]string{"64", "2"}},
	} {
		for _, p := range nativePaths {
			t.Run(p.name+"/"+strings.Join(c.args, "-"), func(t *testing.T) {
				t.Parallel()
				m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("work", "work"), bin, c.args...)
				if err != nil {
					t.Fatal(err)
				}
				calls := counted(t, out, "calls")
				threads, _ := strconv.Atoi(c.args[0])
				per, _ := strconv.Atoi(c.args[1])
				if calls != threads*per || m.Breakpoints[0].Hits != calls || len(m.Stops) != calls || m.Status != runjson.StatusCompleted {
					t.Fatalf("status %s, %d calls, %d hits, %d stops, events %+v", m.Status, calls, m.Breakpoints[0].Hits, len(m.Stops), m.Events)
				}
				checkFigures(t, m, true)
			})
		}
	}
}

// TestNativeThreadsAroundCall: around_call in 8 threads over MI, with
// scheduler-locking on (only the stopped thread runs to the return) and
// off (other threads hit the breakpoint during the call, which cuts the
// call's return short): every call is counted once, and the run ends.
func TestNativeThreadsAroundCall(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/threads.c")
	for _, lock := range []string{"on", "off"} {
		t.Run(lock, func(t *testing.T) {
			t.Parallel()
			plan := "backend: native\nscheduler_locking: " + lock + "\nbreakpoints:\n  - name: work\n    location: work\n    around_call: true\n"
			m, out, err := runNativeOut(t, driver.Options{}, plan, bin, "8", "5")
			if err != nil {
				t.Fatal(err)
			}
			calls := counted(t, out, "calls")
			if calls != 40 || m.Breakpoints[0].Hits != calls || m.Status != runjson.StatusCompleted {
				t.Fatalf("status %s, %d calls, %d hits, events %+v", m.Status, calls, m.Breakpoints[0].Hits, m.Events)
			}
			hits := 0
			for _, s := range m.Stops {
				if s.Phase == runjson.PhaseHit {
					hits++
				}
			}
			if hits != calls {
				t.Errorf("%d hit stops, want %d", hits, calls)
			}
			checkFigures(t, m, true)
		})
	}
}

// TestNativeLockHeld: while another thread holds the main arena's lock
// (blocked writing inside malloc_stats()), a stop reads neither the
// allocator nor waits for it: an allocator-busy event per stop, resident
// memory only; once the lock is free the figures come back.
func TestNativeLockHeld(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/lockheld.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas' locks cannot be read")
	}
	for _, p := range nativePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("work", "work"), bin, "4", "3")
			if err != nil {
				t.Fatal(err)
			}
			if counted(t, out, "calls") != 7 || m.Breakpoints[0].Hits != 7 || len(m.Stops) != 7 {
				t.Fatalf("%d hits, %d stops, output:\n%s", m.Breakpoints[0].Hits, len(m.Stops), out)
			}
			busy := 0
			for _, e := range m.Events {
				if e.Kind == runjson.EventAllocatorBusy && strings.Contains(e.Message, "holds the lock of 1 of glibc's") {
					busy++
				}
			}
			if busy != 4 {
				t.Errorf("%d allocator-busy events, want 4: %+v", busy, m.Events)
			}
			for i, s := range m.Stops {
				if held := i < 4; (s.Memory.HeapInUseBytes == nil) != held || s.Memory.RSSBytes <= 0 {
					t.Errorf("stop %d (lock held: %v): memory %+v", s.Seq, held, s.Memory)
				}
			}
			checkFigures(t, &runjson.Manifest{Stops: m.Stops[4:]}, false)
		})
	}
}

// TestNativeSignalHandler: a breakpoint in a signal handler that
// interrupted the allocator, whose lock the stopped thread itself holds
// (one thread: the stop would otherwise call mallinfo2() directly, which
// waits for that lock forever).
func TestNativeSignalHandler(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/handler.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas' locks cannot be read")
	}
	for _, p := range nativePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			plan := "backend: native\nbreakpoints:\n" + p.bp("handler", "in_handler") + p.bp("after", "after")
			m, out, err := runNativeOut(t, driver.Options{}, plan, bin, "3", "2")
			if err != nil {
				t.Fatal(err)
			}
			if counted(t, out, "handled") != 3 || counted(t, out, "after") != 2 || m.Breakpoints[0].Hits != 3 || m.Breakpoints[1].Hits != 2 || len(m.Stops) != 5 {
				t.Fatalf("breakpoints %+v, %d stops, output:\n%s", m.Breakpoints, len(m.Stops), out)
			}
			busy := 0
			for _, e := range m.Events {
				if e.Kind == runjson.EventAllocatorBusy {
					busy++
				}
			}
			if busy != 3 {
				t.Errorf("%d allocator-busy events, want 3: %+v", busy, m.Events)
			}
			checkFigures(t, &runjson.Manifest{Stops: m.Stops[3:]}, false)
		})
	}
}

// TestNativeFastTimer: SIGALRM every millisecond, faster than gdb steps
// a thread over the breakpoint on a busy machine, so that signals come
// during the step and gdb checks the breakpoint again where the handler
// returns (fact 42): without repeated_hit these runs count a few more
// hits than calls. The hits are the program's calls, one thread or four.
// (A 200 us timer held gdb in that loop until agent.py held the thread's
// signals for the step: TestNativeSignalTimer, timer_test.go.)
func TestNativeFastTimer(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/alarm.c")
	for _, threads := range []string{"1", "4"} {
		for _, p := range nativePaths {
			t.Run(p.name+"/"+threads, func(t *testing.T) {
				t.Parallel()
				m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("work", "work"), bin, "5", "1000", threads)
				if err != nil {
					t.Fatal(err)
				}
				calls := counted(t, out, "calls")
				n, _ := strconv.Atoi(threads)
				if calls != 5*n || counted(t, out, "ticks") == 0 || m.Breakpoints[0].Hits != calls || len(m.Stops) != calls {
					t.Fatalf("%d calls, %d hits, %d stops; output %q", calls, m.Breakpoints[0].Hits, len(m.Stops), out)
				}
				checkFigures(t, m, true)
			})
		}
	}
}

// TestNativeFullTmpdir: a native run whose TMPDIR (the private
// directory, where the agent's records and the GDB/MI path's
// measurements go) fills up in the middle ends with the error that says
// so, on both paths, and run.json keeps the stops taken before. The full
// file system is a small tmpfs (the test skips where it cannot mount
// one). Not parallel: TMPDIR, which it points at the tmpfs, is the test
// process's.
func TestNativeFullTmpdir(t *testing.T) {
	bin := testenv.Build(t, "../../testdata/native/threads.c")
	for _, p := range nativePaths {
		t.Run(p.name, func(t *testing.T) {
			tmp := testenv.SmallFS(t, "1m")
			t.Setenv("TMPDIR", tmp)
			type outcome struct {
				res *driver.Result
				err error
			}
			// The run is the test's only user of t until it ends.
			done := make(chan outcome, 1)
			// Over MI, snapctl measures a stop itself once the agent has
			// said where to read, and writes nothing to TMPDIR for it:
			// with native.trim_probe every stop is the agent's, a file
			// there.
			plan := "backend: native\nbreakpoints:\n" + p.bp("work", "work")
			if p.name == "mi" {
				plan = "backend: native\nnative:\n  trim_probe: true\nbreakpoints:\n" + p.bp("work", "work")
			}
			go func() {
				// run.json lists stops within 100 ms rather than the 10 s
				// that leave a loaded machine minutes of stops to go through.
				res, err := runSession(t, driver.Options{Timeouts: driver.Timeouts{Timeout: 4 * time.Minute, ManifestEvery: 100 * time.Millisecond}}, plan, bin, "2", "20000")
				done <- outcome{res, err}
			}()
			// Stops are in run.json (the run directory is not on the
			// tmpfs; the program runs for seconds); then TMPDIR fills up.
			for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
				paths, _ := filepath.Glob(filepath.Join(filepath.Dir(tmp), "*", "run dir", manifestFile))
				var sofar runjson.Manifest
				if len(paths) == 1 {
					if data, err := os.ReadFile(paths[0]); err == nil && json.Unmarshal(data, &sofar) == nil && len(sofar.Stops) > 0 {
						break
					}
				}
				if time.Since(start) > 3*time.Minute {
					break // the run ends, and says why below
				}
			}
			fill(t, tmp)
			res := <-done
			if res.res == nil {
				t.Fatalf("no run: %v", res.err)
			}
			m := readManifest(t, res.res.Dir)
			if !errors.Is(res.err, syscall.ENOSPC) || !strings.HasPrefix(res.err.Error(), "no space left on device in "+tmp+": ") {
				t.Fatalf("error %v, want one that says %s is full", res.err, tmp)
			}
			if m.Status != runjson.StatusFailed || len(m.Stops) == 0 || !strings.HasPrefix(m.Error, "no space left on device") {
				t.Errorf("status %s, %d stops, error %q", m.Status, len(m.Stops), m.Error)
			}
		})
	}
}

// fill fills the file system of dir and keeps it full until the test
// ends. A stop over GDB/MI writes its measurement into TMPDIR and snapctl
// deletes it once read: filled while one was there, the file system had
// its page free again for every later stop, and the run went on to its
// timeout. What is freed is taken back within a millisecond.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	up := func() {
		for {
			if _, err := f.Write(block); err != nil {
				break
			}
		}
		for {
			if _, err := f.Write(block[:64]); err != nil {
				return
			}
		}
	}
	up()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				up()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-stopped
		f.Close()
	})
}

// TestNativeThreadsWithoutLibcSymbols: without libc's symbol table the
// arenas of a threaded program cannot be found, and nothing is called
// into it: its stops record resident memory only, and one
// no-allocator-state event says what to install. The hits are still the
// calls.
func TestNativeThreadsWithoutLibcSymbols(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/threads.c")
	var warn testenv.Buffer
	m, out, err := runNativeOut(t, driver.Options{Streams: driver.Streams{Warn: &warn}}, "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\nbackend: native\nbreakpoints:\n  - name: work\n    location: work\n", bin, "4", "5")
	if err != nil {
		t.Fatal(err)
	}
	if counted(t, out, "calls") != 20 || m.Breakpoints[0].Hits != 20 || len(m.Stops) != 20 {
		t.Fatalf("%d hits, %d stops, output %q", m.Breakpoints[0].Hits, len(m.Stops), out)
	}
	for _, s := range m.Stops {
		if s.Memory == nil || s.Memory.RSSBytes <= 0 || s.Memory.HeapInUseBytes != nil {
			t.Errorf("stop %d: memory %+v, want resident memory only", s.Seq, s.Memory)
		}
	}
	var events []string
	for _, e := range m.Events {
		events = append(events, string(e.Kind)+": "+e.Message)
	}
	if len(events) != 1 || !strings.HasPrefix(events[0], "no-allocator-state: glibc's allocator cannot be read (glibc's arenas cannot be found: no symbol table for libc (install Debian's libc6-dbg") {
		t.Errorf("events %q", events)
	}
	if !strings.Contains(warn.String(), "libc6-dbg") {
		t.Errorf("warning %q does not say what to install", warn.String())
	}
}

// TestNativeThreadsTrim: trim_probe's malloc_trim(0) in a threaded
// program is gdb's call with only the stopped thread running, made once
// every thread is stopped and no arena's lock is held: every stop
// records what it released, or says the allocator was busy.
func TestNativeThreadsTrim(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/threads.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas' locks cannot be read")
	}
	m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nnative:\n  trim_probe: true\nbreakpoints:\n  - name: work\n    location: work\n", bin, "4", "5")
	if err != nil {
		t.Fatal(err)
	}
	if counted(t, out, "calls") != 20 || m.Breakpoints[0].Hits != 20 || len(m.Stops) != 20 {
		t.Fatalf("%d hits, %d stops, output %q", m.Breakpoints[0].Hits, len(m.Stops), out)
	}
	checkFigures(t, m, true)
	for _, s := range m.Stops {
		if s.Memory.HeapInUseBytes != nil && s.Memory.TrimReleasedBytes == nil {
			t.Errorf("stop %d: memory %+v, want what malloc_trim released", s.Seq, *s.Memory)
		}
	}
	for _, e := range m.Events {
		if e.Kind == runjson.EventAllocatorCallFailed {
			t.Errorf("event %+v", e)
		}
	}
}

// TestNativeSignalHandlerWithoutLibcSymbols: without libc's symbol table
// the held lock cannot be seen, and the single-threaded stop in the
// handler calls mallinfo2() directly, which waits for the lock its own
// thread holds: the call is given up after 2 s, the thread put back, and
// the stop records allocator-call-failed; the run goes on.
func TestNativeSignalHandlerWithoutLibcSymbols(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	bin := testenv.Build(t, "../../testdata/native/handler.c")
	plan := "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\nbackend: native\nbreakpoints:\n" +
		nativePaths[0].bp("handler", "in_handler") + nativePaths[0].bp("after", "after")
	m, out, err := runNativeOut(t, driver.Options{}, plan, bin, "2", "2")
	if err != nil {
		t.Fatal(err)
	}
	if counted(t, out, "handled") != 2 || counted(t, out, "after") != 2 || len(m.Stops) != 4 {
		t.Fatalf("breakpoints %+v, %d stops, output:\n%s", m.Breakpoints, len(m.Stops), out)
	}
	failed := 0
	for _, e := range m.Events {
		if e.Kind == runjson.EventAllocatorCallFailed && strings.Contains(e.Message, "mallinfo2() did not return within 2 s") {
			failed++
		}
	}
	if failed != 2 {
		t.Errorf("%d allocator-call-failed events, want 2: %+v", failed, m.Events)
	}
	for i, s := range m.Stops {
		if (s.Memory.HeapInUseBytes == nil) != (i < 2) {
			t.Errorf("stop %d: memory %+v", s.Seq, *s.Memory)
		}
	}
}

// TestNativeThreadsCorruptHeap: in a threaded program nothing is called,
// so a corrupted fastbin link does not abort the program as glibc's own
// walk does (TestNativeCorruptHeap): the reading stops at the misaligned
// link, the stop records allocator-call-failed and resident memory, and
// the program runs to its end.
func TestNativeThreadsCorruptHeap(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/corrupt.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas cannot be read")
	}
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			_, m, err := runNative(t, driver.Options{NoAgent: p.noAgent}, roundPlan, bin, "thread")
			// Its only stop could not read the heap: nothing of it was
			// measured, and the run does not pass.
			if code, _ := driver.ExitStatus(err); code != driver.ExitFailure || !strings.Contains(fmt.Sprint(err), "gdb: glibc's allocator could not be read at any of the 1 stops") {
				t.Fatalf("run: %v (exit %d), want exit 1", err, code)
			}
			if m.Target.ExitCode == nil || *m.Target.ExitCode != 0 || len(m.Stops) != 1 || m.Stops[0].Memory.RSSBytes <= 0 || m.Stops[0].Memory.HeapInUseBytes != nil {
				t.Fatalf("target %+v, stops %+v", m.Target, m.Stops)
			}
			if len(m.Events) != 1 || m.Events[0].Kind != runjson.EventAllocatorCallFailed || !strings.Contains(m.Events[0].Message, "glibc's arenas could not be read: arena 0x") || !strings.Contains(m.Events[0].Message, "is misaligned") {
				t.Errorf("events %+v", m.Events)
			}
		})
	}
}
