package snapshots

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"weak"

	"github.com/google/go-cmp/cmp"
)

// recorded is the folder of massif files recorded from real valgrind runs
// (see testdata/massif/record.sh for the commands).
const recorded = "../testdata/massif"

func parseRecorded(t *testing.T, name string) *File {
	t.Helper()
	f, err := ParseFile(filepath.Join(recorded, name))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func selectRecorded(t *testing.T, name, sel string) *Snapshot {
	t.Helper()
	s, err := parseRecorded(t, name).Select(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// child finds the direct child of n whose frame is fn (file:line), or the
// below-threshold bucket for fn "below".
func childNamed(t *testing.T, n *Node, fn string) *Node {
	t.Helper()
	for _, c := range n.Children {
		if fn == "below" && c.Below {
			return c
		}
		if !c.Below && frameString(c.Frame) == fn {
			return c
		}
	}
	var have []string
	for _, c := range n.Children {
		have = append(have, frameString(c.Frame))
	}
	t.Fatalf("no child %q under %q; have %q", fn, frameString(n.Frame), have)
	return nil
}

// path follows a chain of frames down from n.
func descend(t *testing.T, n *Node, fns ...string) *Node {
	t.Helper()
	for _, fn := range fns {
		n = childNamed(t, n, fn)
	}
	return n
}

func frameString(f Frame) string {
	switch {
	case f.File != "":
		return f.Function + " (" + f.File + ":" + lineString(f.Line) + ")"
	case f.Object != "":
		return f.Function + " (in " + f.Object + ")"
	}
	return f.Function
}

func lineString(n int) string { return strconv.Itoa(n) }

func TestParseLeakRun(t *testing.T) {
	f := parseRecorded(t, "leak.massif")
	if f.Cmd != "./leak" || f.TimeUnit != "i" || !strings.Contains(f.Desc, "--detailed-freq=1") {
		t.Errorf("header = %q %q %q", f.Desc, f.Cmd, f.TimeUnit)
	}
	if len(f.Snapshots) < 12 {
		t.Fatalf("%d snapshots, want at least 12 (one per malloc)", len(f.Snapshots))
	}
	for i, s := range f.Snapshots {
		if s.Index != i {
			t.Errorf("snapshot %d has Index %d", i, s.Index)
		}
		if s.Tree == nil || s.Tree.Bytes != s.HeapBytes {
			t.Errorf("snapshot %d: tree root does not carry mem_heap_B=%d", i, s.HeapBytes)
		}
	}
	last, err := f.Select("")
	if err != nil {
		t.Fatal(err)
	}
	if last != f.Snapshots[len(f.Snapshots)-1] {
		t.Errorf("Select(\"\") = snapshot %d, want the last one", last.Index)
	}
	// Ten requests of malloc(100) each, and malloc(16) at leak.c:29.
	if n := descend(t, last.Tree, "make_payload (leak.c:12)", "handle_request (leak.c:19)", "main (leak.c:27)"); n.Bytes != 1000 {
		t.Errorf("make_payload bytes = %d, want 1000", n.Bytes)
	}
	if n := childNamed(t, last.Tree, "main (leak.c:29)"); n.Bytes != 16 || n.Frame.Addr == "" {
		t.Errorf("main (leak.c:29) = %d bytes, addr %q; want 16 and an address", n.Bytes, n.Frame.Addr)
	}
	if last.HeapBytes != 1016 {
		t.Errorf("mem_heap_B = %d, want 1016", last.HeapBytes)
	}
	peak, err := f.Select("peak")
	if err != nil {
		t.Fatal(err)
	}
	if peak.Kind != TreePeak || peak.HeapBytes != 1016 {
		t.Errorf("peak = %v with %d bytes", peak.Kind, peak.HeapBytes)
	}
	s3, err := f.Select("3")
	if err != nil || s3.Index != 3 || s3.HeapBytes != 216 {
		t.Errorf("Select(3) = %+v, %v; want snapshot 3 with 216 bytes", s3, err)
	}
}

func TestParseMonitorFiles(t *testing.T) {
	f := parseRecorded(t, "leak.detailed.massif")
	if len(f.Snapshots) != 1 || f.Snapshots[0].Index != 0 || f.Snapshots[0].Kind != TreeDetailed {
		t.Fatalf("detailed_snapshot file: %d snapshots", len(f.Snapshots))
	}
	s, err := f.Select("")
	if err != nil {
		t.Fatal(err)
	}
	// At leak.c:28 the ten payloads are live and the 16-byte buffer not yet freed.
	want := map[string]int64{"make_payload (leak.c:12)": 1000, "main (leak.c:24)": 16}
	got := map[string]int64{}
	for _, c := range s.Tree.Children {
		got[frameString(c.Frame)] = c.Bytes
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("sites (-want +got):\n%s", d)
	}

	all := parseRecorded(t, "leak.all_snapshots.massif")
	if len(all.Snapshots) < 2 {
		t.Fatalf("all_snapshots file has %d snapshots", len(all.Snapshots))
	}
	for i, s := range all.Snapshots {
		if s.Index != i {
			t.Errorf("all_snapshots: snapshot %d has Index %d", i, s.Index)
		}
	}
}

func TestParseDefaultRun(t *testing.T) {
	f := parseRecorded(t, "leak.default.massif")
	var empty, detailed, peak int
	for _, s := range f.Snapshots {
		switch s.Kind {
		case TreeEmpty:
			empty++
			if s.Tree != nil {
				t.Errorf("empty snapshot %d has a tree", s.Index)
			}
		case TreeDetailed:
			detailed++
		case TreePeak:
			peak++
		}
	}
	if empty == 0 || detailed == 0 || peak != 1 {
		t.Errorf("kinds: %d empty, %d detailed, %d peak; want some, some and 1", empty, detailed, peak)
	}
	p, err := f.Select("peak")
	if err != nil {
		t.Fatal(err)
	}
	if n := childNamed(t, p.Tree, "make_payload (leak.c:12)"); n.Bytes != 1000 {
		t.Errorf("peak make_payload = %d, want 1000", n.Bytes)
	}
}

func TestParsePagesAsHeap(t *testing.T) {
	s := selectRecorded(t, "leak.pages.massif", "")
	if !s.PagesAsHeap() {
		t.Errorf("root %q not recognised as --pages-as-heap", s.Tree.Frame.Function)
	}
	if s.Tree.Frame.Function != "(page allocation syscalls) mmap/mremap/brk, --alloc-fns, etc." {
		t.Errorf("root = %q", s.Tree.Frame.Function)
	}
	if s.Tree.Bytes%4096 != 0 || s.Tree.Bytes == 0 {
		t.Errorf("pages-as-heap total %d is not a whole number of pages", s.Tree.Bytes)
	}
	if selectRecorded(t, "leak.massif", "").PagesAsHeap() {
		t.Error("a heap run reported as --pages-as-heap")
	}
}

func TestParseXtmemory(t *testing.T) {
	f := parseRecorded(t, "leak.xt.ms")
	var events []string
	for _, s := range f.Snapshots {
		events = append(events, s.Event)
	}
	if d := cmp.Diff([]string{"curB", "curBk", "totB", "totBk", "totFdB", "totFdBk"}, events); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	for _, tc := range []struct {
		event, site string
		want        int64
	}{
		{"curB", "make_payload (leak.c:12)", 1000},
		{"curBk", "make_payload (leak.c:12)", 10},
		{"totB", "main (leak.c:24)", 16},
		{"totBk", "make_payload (leak.c:12)", 10},
		{"totFdB", "main (leak.c:28)", 16}, // freed bytes are keyed by the free() call
		{"totFdBk", "main (leak.c:28)", 1},
	} {
		s, err := f.Select(tc.event)
		if err != nil {
			t.Fatal(err)
		}
		if n := childNamed(t, s.Tree, tc.site); n.Bytes != tc.want {
			t.Errorf("%s %s = %d, want %d", tc.event, tc.site, n.Bytes, tc.want)
		}
	}
	if s, err := f.Select(""); err != nil || s.Event != "curB" {
		t.Errorf("Select(\"\") on an xtmemory file = %v, %v; want the curB event", s, err)
	}
	if _, err := f.Select("nope"); err == nil || !strings.Contains(err.Error(), "curB, curBk") {
		t.Errorf("Select(nope) error = %v, want the events listed", err)
	}

	m := parseRecorded(t, "leak.monitor.ms")
	if len(m.Snapshots) != 2 || m.Snapshots[0].Event != "curB" || m.Snapshots[1].Event != "curBk" {
		t.Fatalf("monitor xtmemory with --xtree-memory=allocs: %d snapshots", len(m.Snapshots))
	}
	if n := childNamed(t, m.Snapshots[0].Tree, "make_payload (leak.c:12)"); n.Bytes != 1000 {
		t.Errorf("monitor xtmemory curB make_payload = %d, want 1000", n.Bytes)
	}
}

func TestParseThreads(t *testing.T) {
	s := selectRecorded(t, "threads.massif", "")
	// 4 threads x 5 jobs x malloc(1000).
	if n := descend(t, s.Tree, "worker_alloc (threads.c:15)", "worker (threads.c:24)", "start_thread (pthread_create.c:442)"); n.Bytes != 20000 {
		t.Errorf("worker_alloc = %d, want 20000", n.Bytes)
	}
}

func TestParseCxx(t *testing.T) {
	s := selectRecorded(t, "taskpool.massif", "peak")
	vec := descend(t, s.Tree,
		"std::__new_allocator<char>::allocate(unsigned long, void const*) (new_allocator.h:137)",
		"std::allocator_traits<std::allocator<char> >::allocate(std::allocator<char>&, unsigned long) (alloc_traits.h:464)",
		"std::_Vector_base<char, std::allocator<char> >::_M_allocate(unsigned long) (stl_vector.h:378)",
		"std::vector<char, std::allocator<char> >::reserve(unsigned long) (vector.tcc:79)",
		"Scheduler::log_payload(unsigned long) (taskpool.cpp:25)",
		"main (taskpool.cpp:44)")
	if vec.Bytes != 4000 {
		t.Errorf("vector reserve = %d, want 4000", vec.Bytes)
	}
	if n := descend(t, s.Tree, "Pool<int, 2>::make(unsigned long) (taskpool.cpp:36)"); n.Bytes != 400 {
		t.Errorf("Pool<int, 2>::make = %d, want 400", n.Bytes)
	}
	// Eight 32-byte hash nodes; the frame names hold spaces, commas,
	// parentheses and templates.
	var nodes *Node
	for _, c := range s.Tree.Children {
		if strings.HasPrefix(c.Frame.Function, "std::__new_allocator<std::__detail::_Hash_node<") {
			nodes = c
		}
	}
	if nodes == nil {
		t.Fatal("no hash node allocation site")
	}
	if nodes.Bytes != 256 || nodes.Frame.File != "new_allocator.h" || nodes.Frame.Line != 137 {
		t.Errorf("hash nodes = %d bytes at %s:%d, want 256 at new_allocator.h:137", nodes.Bytes, nodes.Frame.File, nodes.Frame.Line)
	}
	for n := nodes; ; n = n.Children[0] {
		if n.Frame.Function == "Scheduler::submit(int)" {
			if n.Frame.File != "taskpool.cpp" || n.Frame.Line != 21 {
				t.Errorf("submit at %s:%d", n.Frame.File, n.Frame.Line)
			}
			break
		}
		if len(n.Children) == 0 {
			t.Fatal("Scheduler::submit(int) not in the hash node stack")
		}
	}
	lib := childNamed(t, s.Tree, "??? (in /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30)")
	if lib.Frame.Function != "???" || lib.Frame.Object != "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30" {
		t.Errorf("library frame = %+v", lib.Frame)
	}
}

func TestParseInlined(t *testing.T) {
	s := selectRecorded(t, "inline.massif", "")
	if len(s.Tree.Children) != 3 {
		t.Fatalf("%d sites, want 3 (one per inlined malloc)", len(s.Tree.Children))
	}
	for _, c := range s.Tree.Children {
		caller := childNamed(t, c, "load_slots (inline.c:16)")
		if c.Bytes != 64 || frameString(c.Frame) != "fill_slot (inline.c:10)" || caller.Frame.Addr != c.Frame.Addr {
			t.Errorf("site %+v (%d bytes), caller %+v: want 64 bytes in fill_slot with load_slots at the same address", c.Frame, c.Bytes, caller.Frame)
		}
	}
}

func TestParseBelowThreshold(t *testing.T) {
	s := selectRecorded(t, "threshold.massif", "")
	all := childNamed(t, s.Tree, "below")
	if all.Bytes != 600 || all.Places != 3 || len(all.Children) != 0 {
		t.Errorf("all-below bucket = %d bytes in %d places, want 600 in 3", all.Bytes, all.Places)
	}
	one := descend(t, s.Tree, "sized (threshold.c:15)", "below")
	if one.Bytes != 100 || one.Places != 1 {
		t.Errorf("one-place bucket = %d bytes in %d places, want 100 in 1", one.Bytes, one.Places)
	}
	if n := descend(t, s.Tree, "sized (threshold.c:15)", "main (threshold.c:30)"); n.Bytes != 5000 {
		t.Errorf("sized from main = %d, want 5000", n.Bytes)
	}
}

func TestParseHeaptrack(t *testing.T) {
	f := parseRecorded(t, "ticker.heaptrack.massif")
	// heaptrack writes the header after the snapshots.
	if f.Desc != "heaptrack" || f.Cmd != "./ticker" || f.TimeUnit != "s" {
		t.Errorf("header = %q %q %q", f.Desc, f.Cmd, f.TimeUnit)
	}
	s := f.Snapshots[0]
	if s.TimeText == "" || !strings.HasPrefix(s.TimeText, "0.") {
		t.Errorf("time text = %q, want heaptrack's fractional seconds", s.TimeText)
	}
	d, err := f.Select("")
	if err != nil {
		t.Fatal(err)
	}
	below := childNamed(t, d.Tree, "below")
	if !below.Below || below.Places == 0 {
		t.Errorf("heaptrack's below line (no %%) not recognised: %+v", below)
	}
	// ticker.c allocates ten blocks of 2000 bytes 20 ms apart: heaptrack's
	// snapshots see the heap grow in steps of 2000 and, once libstdc++'s
	// pool is gone at exit, exactly the 20000 bytes ticker keeps.
	n := len(f.Snapshots)
	for i := 1; i < n-2; i++ {
		if d := f.Snapshots[i].HeapBytes - f.Snapshots[i-1].HeapBytes; d%2000 != 0 {
			t.Errorf("snapshot %d grew by %d bytes, not a multiple of 2000", i, d)
		}
	}
	if got := f.Snapshots[n-1].HeapBytes; got != 20000 {
		t.Errorf("last snapshot = %d bytes, want 20000", got)
	}
}

func TestParseFrame(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Frame
	}{
		{"0x1091E0: make_payload (leak.c:12)", Frame{Addr: "0x1091E0", Function: "make_payload", File: "leak.c", Line: 12}},
		{"0x48F1D4A: ??? (in /usr/lib/libstdc++.so.6)", Frame{Addr: "0x48F1D4A", Function: "???", Object: "/usr/lib/libstdc++.so.6"}},
		{"0x0: ??? (in ???)", Frame{Addr: "0x0", Function: "???", Object: "???"}},
		{"???", Frame{Function: "???"}},
		{"0x1: ???", Frame{Addr: "0x1", Function: "???"}},
		{"0x2: std::map<int, std::pair<int, int> >::operator[](int const&) (stl_map.h:511)",
			Frame{Addr: "0x2", Function: "std::map<int, std::pair<int, int> >::operator[](int const&)", File: "stl_map.h", Line: 511}},
		{"0x3: (anonymous namespace)::f(void (*)(int)) (a b.cc:7)",
			Frame{Addr: "0x3", Function: "(anonymous namespace)::f(void (*)(int))", File: "a b.cc", Line: 7}},
		{"0x4: std::function<void (int)>::operator()(int) const (std_function.h:590)",
			Frame{Addr: "0x4", Function: "std::function<void (int)>::operator()(int) const", File: "std_function.h", Line: 590}},
		{"0x5: f (weird)", Frame{Addr: "0x5", Function: "f (weird)"}},
		{"0x6: f (x.c:)", Frame{Addr: "0x6", Function: "f (x.c:)"}},
		{"0x8: f (x.c:007)", Frame{Addr: "0x8", Function: "f (x.c:007)"}},
		{"0x9: f (x.c:0)", Frame{Addr: "0x9", Function: "f", File: "x.c"}},
		{"0x7: g (C:\\x.c:3)", Frame{Addr: "0x7", Function: "g", File: "C:\\x.c", Line: 3}},
	} {
		if d := cmp.Diff(tc.want, ParseFrame(tc.in)); d != "" {
			t.Errorf("ParseFrame(%q) (-want +got):\n%s", tc.in, d)
		}
	}
}

const goodFile = `desc: --threshold=0
cmd: ./leak
time_unit: i
#-----------
snapshot=0
#-----------
time=10
mem_heap_B=116
mem_heap_extra_B=8
mem_stacks_B=0
heap_tree=detailed
n2: 116 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.
 n1: 100 0x10916D: make_payload (leak.c:12)
  n0: 100 0x1091FD: main (leak.c:27)
 n0: 16 0x1091D0: main (leak.c:24)
#-----------
snapshot=1
#-----------
time=20
mem_heap_B=0
mem_heap_extra_B=0
mem_stacks_B=0
heap_tree=empty
`

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", `x.out:1: expected "snapshot=", got end of file`},
		{"garbage", "hello\n", `x.out:1: expected "#-----------" or a "desc:", "cmd:" or "time_unit:" line, got "hello"`},
		{"header only", "desc: x\ncmd: y\n", `x.out:3: expected "snapshot=", got end of file`},
		{"bad key", strings.Replace(goodFile, "mem_heap_B=116", "mem_heap=4", 1), `x.out:8: expected "mem_heap_B=", got "mem_heap=4"`},
		{"bad number", strings.Replace(goodFile, "mem_heap_B=116", "mem_heap_B=1x", 1), `x.out:8: expected a byte count after "mem_heap_B=", got "1x"`},
		{"bad kind", strings.Replace(goodFile, "heap_tree=detailed", "heap_tree=full", 1), `x.out:11: expected "detailed", "peak" or "empty" after "heap_tree=", got "full"`},
		{"truncated in totals", goodFile[:strings.Index(goodFile, "mem_stacks_B")], `x.out:10: expected "mem_stacks_B=", got end of file`},
		{"truncated in tree", goodFile[:strings.Index(goodFile, "  n0: 100")], `x.out:14: expected 1 more children of the n1 node at line 13, got end of file`},
		{"fewer children", strings.Replace(goodFile, "n2: 116", "n3: 116", 1), `x.out:16: expected 1 more children of the n3 node at line 12, got "#-----------"`},
		{"more children", strings.Replace(goodFile, "n2: 116", "n1: 116", 1), `x.out:15: expected "#-----------", got " n0: 16 0x1091D0: main (leak.c:24)" (more tree lines than the "nK:" counts announce)`},
		{"wrong depth", strings.Replace(goodFile, "  n0: 100", "   n0: 100", 1), `x.out:14: expected a tree line indented by 2, got "   n0: 100 0x1091FD: main (leak.c:27)"`},
		{"no count", strings.Replace(goodFile, " n0: 16", " nx: 16", 1), `x.out:15: expected 1 more children of the n2 node at line 12, got " nx: 16 0x1091D0: main (leak.c:24)"`},
		{"no bytes", strings.Replace(goodFile, " n0: 16 ", " n0: ", 1), `x.out:15: expected a byte count and a space after " n0: ", got " n0: 0x1091D0: main (leak.c:24)"`},
		{"below with children", strings.Replace(goodFile, " n0: 16 0x1091D0: main (leak.c:24)", " n1: 16 in 2 places, all below massif's threshold (1.00%)", 1), `x.out:15: expected n0 for a below-threshold line, got n1`},
		{"huge count", strings.Replace(goodFile, "n2: 116", "n999999999: 116", 1), `x.out:16: expected 999999997 more children of the n999999999 node at line 12`},
		{"bad separator", strings.Replace(goodFile, "snapshot=1\n#-----------", "snapshot=1\n#--", 1), `x.out:18: expected "#-----------", got "#--"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.in), "x.out")
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error = %v, want a *FormatError", err)
			}
			if got := err.Error(); !strings.HasPrefix(got, "massif file "+tc.want) {
				t.Errorf("error:\n got %s\nwant massif file %s", got, tc.want)
			}
		})
	}
}

func TestReaderTotalsOnly(t *testing.T) {
	fh, err := os.Open(filepath.Join(recorded, "leak.massif"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	full := parseRecorded(t, "leak.massif")
	r := NewReader(fh, "leak.massif", ReadOptions{TotalsOnly: true})
	i := 0
	for ; ; i++ {
		s, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		want := *full.Snapshots[i]
		want.Tree = nil
		if d := cmp.Diff(want, *s); d != "" {
			t.Errorf("snapshot %d (-want +got):\n%s", i, d)
		}
	}
	if i != len(full.Snapshots) {
		t.Errorf("totals-only read %d snapshots, want %d", i, len(full.Snapshots))
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after the end = %v, want io.EOF", err)
	}
	if r.Header().Cmd != "./leak" {
		t.Errorf("header cmd = %q", r.Header().Cmd)
	}
}

func TestParseFuncStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	_, err := ParseFunc(strings.NewReader(goodFile), "x.out", ReadOptions{}, func(s *Snapshot) error {
		n++
		return stop
	})
	if err != stop || n != 1 {
		t.Errorf("ParseFunc = %v after %d calls, want the callback's error after 1", err, n)
	}
}

func TestSelect(t *testing.T) {
	f, err := Parse(strings.NewReader(goodFile), "x.out")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sel, wantErr string
		want         int
	}{
		{"", "", 0},
		{"1", "", 1},
		{"7", "massif file x.out has no snapshot 7 (it has snapshots 0 to 1)", 0},
		{"peak", "massif file x.out has no peak snapshot", 0},
		{"last", `massif file x.out: bad snapshot selector "last"`, 0},
	} {
		s, err := f.Select(tc.sel)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("Select(%q) error = %v, want %s", tc.sel, err, tc.wantErr)
			}
			continue
		}
		if err != nil || s.Index != tc.want {
			t.Errorf("Select(%q) = %v, %v; want snapshot %d", tc.sel, s, err, tc.want)
		}
	}
	f.Snapshots[0].Kind, f.Snapshots[0].Tree = TreeEmpty, nil
	if _, err := f.Select(""); err == nil || !strings.Contains(err.Error(), "x.out has no detailed snapshot") {
		t.Errorf("Select(\"\") on totals only = %v, want an error naming the file", err)
	}
}

func TestSplitSpec(t *testing.T) {
	for _, tc := range []struct{ spec, path, sel string }{
		{"x.out", "x.out", ""},
		{"x.out#3", "x.out", "3"},
		{"dir/massif.out.42#peak", "dir/massif.out.42", "peak"},
		{"a#b/x.out", "a#b/x.out", ""},
		{"a#b/x.out#2", "a#b/x.out", "2"},
		{"x.ms#curB", "x.ms", "curB"},
	} {
		if p, s := SplitSpec(tc.spec); p != tc.path || s != tc.sel {
			t.Errorf("SplitSpec(%q) = %q, %q; want %q, %q", tc.spec, p, s, tc.path, tc.sel)
		}
	}
}

func TestParseSelectMatchesSelect(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(recorded, "*.m*"))
	if err != nil || len(files) == 0 {
		t.Fatal("no recorded files", err)
	}
	for _, path := range files {
		full, err := ParseFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range []string{"", "peak", "0", "3", "12", "99", "curB", "curBk", "totFdB", "nope"} {
			want, wantErr := full.Select(sel)
			fh, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			f, got, err := ParseSelect(fh, path, sel)
			fh.Close()
			if (err != nil) != (wantErr != nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Errorf("%s#%s: error %v, want %v", path, sel, err, wantErr)
				continue
			}
			if err != nil {
				continue
			}
			if !reflect.DeepEqual(want, got) {
				t.Errorf("%s#%s (-want +got):\n%s", path, sel, cmp.Diff(want, got))
			}
			if len(f.Snapshots) != len(full.Snapshots) || f.Cmd != full.Cmd {
				t.Errorf("%s#%s: file has %d snapshots, cmd %q", path, sel, len(f.Snapshots), f.Cmd)
			}
		}
	}
}

// TestReaderReleasesSnapshots checks that the streaming Reader keeps nothing
// of a snapshot once the caller drops it, so reading a huge file needs the
// memory of one snapshot: while the caller holds a later snapshot, an
// earlier one must be collectable. (Node slabs shared between two trees
// once chained every snapshot to the one before.)
func TestReaderReleasesSnapshots(t *testing.T) {
	r := NewReader(bytes.NewReader(benchFile()), "bench", ReadOptions{})
	var first weak.Pointer[Node]
	detailed := 0
	for {
		s, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if s.Tree == nil {
			continue
		}
		detailed++
		switch detailed {
		case 1:
			first = weak.Make(s.Tree.Children[len(s.Tree.Children)-1])
		case 4:
			runtime.GC()
			if first.Value() != nil {
				t.Error("the first snapshot's tree is still reachable while the fourth is held")
			}
			runtime.KeepAlive(s)
		}
	}
	if detailed < 4 {
		t.Fatalf("only %d detailed snapshots", detailed)
	}
}

// A file without newlines (/dev/zero through a pipe) is refused at
// MaxLineLength, with the line it is on, instead of filling memory.
func TestParseLineTooLong(t *testing.T) {
	in := io.LimitReader(zeros{}, 64<<20)
	_, err := Parse(in, "zero")
	var fe *FormatError
	if !errors.As(err, &fe) || fe.Line != 1 || !strings.Contains(err.Error(), "a line longer than 4 MiB: not a massif file") {
		t.Fatalf("Parse(zeros) = %v, want a line too long at line 1", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestParseCmdWithNewlines: valgrind writes the command as it was given,
// so a newline in the program's path or an argument (blank lines too)
// continues the cmd: line: it is read back whole, and the snapshots
// after it as ever. A blank line between sections is still no part of
// the command.
func TestParseCmdWithNewlines(t *testing.T) {
	for _, tt := range []struct{ header, cmd, desc string }{
		{"desc: --massif-out-file=x\ncmd: /tmp/new\nline/the prog 3\ntime_unit: i\n", "/tmp/new\nline/the prog 3", "--massif-out-file=x"},
		{"desc: (none)\ncmd: /a\n\nb/prog\n\ntime_unit: i\n", "/a\n\nb/prog", "(none)"},
		{"desc: two\nlines\ncmd: ./p\n\ntime_unit: i\n\n", "./p", "two\nlines"},
	} {
		data := tt.header + "#-----------\nsnapshot=0\n#-----------\ntime=0\nmem_heap_B=0\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=empty\n"
		f, err := Parse(strings.NewReader(data), "x.massif")
		if err != nil {
			t.Fatalf("%q: %v", tt.header, err)
		}
		if f.Cmd != tt.cmd || f.Desc != tt.desc || len(f.Snapshots) != 1 {
			t.Errorf("%q: cmd %q, desc %q, %d snapshots; want cmd %q, desc %q, 1 snapshot", tt.header, f.Cmd, f.Desc, len(f.Snapshots), tt.cmd, tt.desc)
		}
	}
}
