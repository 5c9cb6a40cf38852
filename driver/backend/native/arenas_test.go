package native_test

import (
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"testing"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// The native measurement of glibc's arenas against mallinfo2() itself, on
// fragmented heaps (testdata/native/frag.c), with one thread and many.

// fragRounds are frag.c's lines, what mallinfo2() returned in the
// program just before each stop.
var fragRounds = regexp.MustCompile(`round (\d+) arena (\d+) ordblks (\d+) smblks (\d+) hblks (\d+) hblkhd (\d+) usmblks (\d+) fsmblks (\d+) uordblks (\d+) fordblks (\d+) keepcost (\d+)`)

// checkMallinfo2 checks that each stop's mallinfo2 is, field for field,
// what the program's own call returned, and that the record's figures
// follow from it with the tcaches' chunks taken out of in-use heap.
func checkMallinfo2(t *testing.T, m *runjson.Manifest, out string, rounds int) {
	t.Helper()
	lines := fragRounds.FindAllStringSubmatch(out, -1)
	if len(lines) != rounds || len(m.Stops) != rounds || counted(t, out, "calls") != rounds {
		t.Fatalf("%d stops, %d rounds printed, want %d:\n%s", len(m.Stops), len(lines), rounds, out)
	}
	for i, l := range lines {
		mem := m.Stops[i].Memory
		if mem == nil || mem.Mallinfo2 == nil || mem.HeapInUseBytes == nil || mem.TcacheBytes == nil {
			t.Errorf("stop %d: memory %+v, want mallinfo2's figures and the tcaches'", i+1, mem)
			continue
		}
		mi := mem.Mallinfo2
		got := fmt.Sprintf("round %d arena %d ordblks %d smblks %d hblks %d hblkhd %d usmblks %d fsmblks %d uordblks %d fordblks %d keepcost %d",
			i, mi.Arena, mi.Ordblks, mi.Smblks, mi.Hblks, mi.Hblkhd, mi.Usmblks, mi.Fsmblks, mi.Uordblks, mi.Fordblks, mi.Keepcost)
		if got != l[0] {
			t.Errorf("stop %d:\n%s\nmallinfo2() in the program:\n%s", i+1, got, l[0])
		}
		if *mem.HeapInUseBytes+*mem.TcacheBytes != mi.Uordblks || *mem.HeapFreeBytes-*mem.TcacheBytes != mi.Fordblks ||
			*mem.ArenaBytes != mi.Arena || *mem.MmapBytes != mi.Hblkhd || mem.HeapUnmeasured != "" {
			t.Errorf("stop %d: memory %+v does not follow from mallinfo2 %+v", i+1, *mem, *mi)
		}
		// Every kind of place glibc keeps free chunks is in the figures.
		if *mem.TcacheBytes == 0 || mi.Smblks == 0 || mi.Ordblks < 10 || mi.Hblks == 0 {
			t.Errorf("stop %d: tcaches %d bytes, mallinfo2 %+v: want chunks in tcaches, fastbins and bins, and mmapped blocks", i+1, *mem.TcacheBytes, *mi)
		}
	}
	for _, e := range m.Events {
		// frag.c is sent no signal: one here is the agent's own, such as
		// its deadline's SIGSTOP left pending after the call (fact
		// 102).
		if e.Kind == runjson.EventAllocatorCallFailed || e.Kind == runjson.EventAllocatorBusy || e.Kind == runjson.EventSignal {
			t.Errorf("event %+v", e)
		}
	}
}

// TestNativeArenasEqualMallinfo2: on fragmented heaps, with one thread,
// with six (each in an arena of its own, and in every round a thread
// that starts, fragments its arena and exits), and on a heap of 400,000
// blocks whose 250,000 free chunks took the agent's own walk 0.7 s a
// stop, every stop's figures are mallinfo2()'s field for field, on both
// stop paths, and every thread allocates again after each stop.
func TestNativeArenasEqualMallinfo2(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/frag.c")
	if !libcDebugFile(t, bin) {
		t.Skip("no symbol table for libc (Debian's libc6-dbg): the arenas cannot be read")
	}
	for _, c := range []struct {
		blocks, threads int
	}{{30000, 1}, {60000, 6}, {400000, 2}} {
		for _, p := range nativePaths {
			t.Run(fmt.Sprintf("%d-blocks-%d-threads-%s", c.blocks, c.threads, p.name), func(t *testing.T) {
				t.Parallel()
				m, out, err := runNativeOut(t, driver.Options{}, "backend: native\nbreakpoints:\n"+p.bp("checkpoint", "checkpoint"),
					bin, strconv.Itoa(c.blocks), strconv.Itoa(c.threads), "3", "alloc")
				if err != nil {
					t.Fatal(err)
				}
				checkMallinfo2(t, m, out, 3)
			})
		}
	}
}

// TestNativeCallNeverLeftInLock: without libc's symbol table a stop of a
// program of one thread calls mallinfo2() itself. A call still at work
// past its deadline (here 0.1 ms, on a heap of 150,000 free chunks) may
// hold an arena's lock: given up there, it left the lock held, every
// later stop found the allocator busy and the program hung at its next
// malloc with a second thread (docs/facts.md, fact 87). It now runs
// to its end: every stop has mallinfo2()'s figures and the program,
// allocating from two threads after each stop, ends. The SIGSTOP that
// ends a call at its deadline never outlives the call: left pending, it
// reached the program and its report at the breakpoint was taken for a
// fifth hit (docs/facts.md, fact 102).
func TestNativeCallNeverLeftInLock(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	bin := testenv.Build(t, "../../testdata/native/frag.c")
	plan := "gdb:\n  init: [\"set debug-file-directory /nonexistent\"]\nbackend: native\nbreakpoints:\n" +
		"  - name: setup\n    location: main\n    max_hits: 1\n    commands: [\"python CALL_TIMEOUT['mallinfo2'] = 0.0001\"]\n" +
		nativePaths[0].bp("checkpoint", "checkpoint")
	m, out, err := runNativeOut(t, driver.Options{}, plan, bin, "300000", "1", "4", "alloc")
	if err != nil {
		t.Fatal(err)
	}
	lines := fragRounds.FindAllStringSubmatch(out, -1)
	var stops []runjson.Stop
	var names []string
	for _, st := range m.Stops {
		names = append(names, st.Breakpoint)
		if st.Breakpoint == "checkpoint" {
			stops = append(stops, st)
		}
	}
	if len(lines) != 4 || counted(t, out, "calls") != 4 || len(stops) != 4 {
		t.Fatalf("stops %q, events %+v, output:\n%s", names, m.Events, out)
	}
	for i, l := range lines {
		mem := stops[i].Memory
		if mem == nil || mem.Mallinfo2 == nil {
			t.Errorf("checkpoint stop %d: memory %+v, want mallinfo2's figures", i+1, mem)
			continue
		}
		mi := mem.Mallinfo2
		got := fmt.Sprintf("round %d arena %d ordblks %d smblks %d hblks %d hblkhd %d usmblks %d fsmblks %d uordblks %d fordblks %d keepcost %d",
			i, mi.Arena, mi.Ordblks, mi.Smblks, mi.Hblks, mi.Hblkhd, mi.Usmblks, mi.Fsmblks, mi.Uordblks, mi.Fordblks, mi.Keepcost)
		if got != l[0] {
			t.Errorf("checkpoint stop %d:\n%s\nmallinfo2() in the program:\n%s", i+1, got, l[0])
		}
	}
	for _, e := range m.Events {
		// frag.c is sent no signal: one here is the agent's own, such as
		// its deadline's SIGSTOP left pending after the call (fact
		// 102).
		if e.Kind == runjson.EventAllocatorCallFailed || e.Kind == runjson.EventAllocatorBusy || e.Kind == runjson.EventSignal {
			t.Errorf("event %+v", e)
		}
	}
}
