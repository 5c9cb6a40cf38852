package snapshots

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// heapRow is one line of a tree as a test compares it.
type heapRow struct {
	Depth         int
	Bytes, Blocks int64
	Frame         string // FrameString, address included
	Below         bool
}

func heapRows(t *HeapTree) []heapRow {
	var out []heapRow
	var walk func(i int32, depth int)
	walk = func(i int32, depth int) {
		f := t.frameOf(i)
		out = append(out, heapRow{depth, t.nodes[i].bytes, t.nodes[i].blocks, f.Addr + " " + FrameString(f), t.nodes[i].frame == belowFrame && i > 0})
		t.children(i, func(c int32) { walk(c, depth+1) })
	}
	if len(t.nodes) > 0 {
		walk(0, 0)
	}
	return out
}

// heapFiles are recorded files ReadHeap reads: xtmemory files (with block
// counts), detailed_snapshot files, and massif runs with many snapshots.
var heapFiles = []string{
	"massif/leak.monitor.ms", "massif/leak.monitor.ms.gz", "massif/leak.xt.ms", "massif/leak.detailed.massif",
	"massif/leak.massif", "massif/taskpool.massif", "massif/threshold.massif", "massif/threads.massif",
	"massif/inline.massif", "analysis/growth/hit-1.ms", "analysis/growth/hit-7.ms",
}

// ReadHeapTree reads, streaming, the tree ReadHeap builds, blocks merged.
func TestReadHeapTreeMatchesReadHeap(t *testing.T) {
	for _, name := range heapFiles {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("../testdata", name)
			want := readHeapFile(t, path)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := ReadHeapTree(f, name, NewFrameTable())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(heapRows(want), heapRows(got)); diff != "" {
				t.Errorf("tree (-ReadHeap +ReadHeapTree):\n%s", diff)
			}
			if got.HeapBytes != want.HeapBytes || got.HeapExtraBytes != want.HeapExtraBytes ||
				got.StacksBytes != want.StacksBytes || got.Blocks != want.Blocks {
				t.Errorf("totals %d/%d/%d blocks %v, want %d/%d/%d blocks %v", got.HeapBytes, got.HeapExtraBytes,
					got.StacksBytes, got.Blocks, want.HeapBytes, want.HeapExtraBytes, want.StacksBytes, want.Blocks)
			}
		})
	}
}

func readHeapFile(t *testing.T, path string) *HeapTree {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadHeap(f, filepath.Base(path))
	if err != nil {
		t.Fatal(err)
	}
	h, err := HeapTreeOf(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// ReadHeapTree fails where ReadHeap does, with the same error.
func TestReadHeapTreeErrors(t *testing.T) {
	for _, text := range []string{
		xtFile("24", "1", "g (s.c:2)"),
		"desc: x\ncmd: ./s\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=5\nmem_heap_B=0\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=empty\n",
		xtFile("24", "1", "f (s.c:1)")[:200],
	} {
		_, want := ReadHeap(strings.NewReader(text), "x.ms")
		_, got := ReadHeapTree(strings.NewReader(text), "x.ms", NewFrameTable())
		var fe *FormatError
		if want == nil || got == nil || !errors.As(got, &fe) || got.Error() != want.Error() {
			t.Errorf("ReadHeapTree: %v\nReadHeap:     %v", got, want)
		}
	}
}

// The growth graph made from two HeapTrees is the one GrowthFlame makes of
// their DiffTree, for every pair of detailed snapshots of recorded runs
// (threshold.massif has below-threshold buckets; taskpool.massif library
// frames).
func TestGrowthFlameTreesMatchesDiffTree(t *testing.T) {
	for _, name := range []string{"leak.massif", "taskpool.massif", "threshold.massif", "threads.massif"} {
		f, err := ParseFile(filepath.Join("../testdata/massif", name))
		if err != nil {
			t.Fatal(err)
		}
		var detailed []*Snapshot
		for _, s := range f.Snapshots {
			if s.Tree != nil {
				detailed = append(detailed, s)
			}
		}
		frames := NewFrameTable()
		pairs := 0
		for i, a := range detailed {
			for _, b := range detailed[i:] {
				ta, _ := HeapTreeOf(a, frames)
				tb, _ := HeapTreeOf(b, frames)
				want := GrowthFlame(DiffTree(a.Tree, b.Tree), Options{})
				got := GrowthFlameTrees(ta, tb, Options{})
				// reflect.DeepEqual first: cmp.Diff walks every pair by
				// reflection, seconds of the race detector's time, and
				// is needed only to say where two graphs differ.
				if reflect.DeepEqual(want, got) {
					pairs++
					continue
				}
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(FlameNode{})); diff != "" {
					t.Fatalf("%s, snapshots %d..%d (-GrowthFlame +GrowthFlameTrees):\n%s", name, a.Index, b.Index, diff)
				}
				pairs++
			}
		}
		if pairs < 3 {
			t.Errorf("%s: %d pairs compared", name, pairs)
		}
	}
	if got := GrowthFlameTrees(nil, nil, Options{}); got.Name != "all" || len(got.Children) != 0 {
		t.Errorf("GrowthFlameTrees(nil, nil) = %+v", got)
	}
}

// A series fed ReadHeapTree's trees gives the diffs and suspects of one
// fed ReadHeap's snapshots, on a big heap with wrappers found late.
func TestSeriesAddTreeMatchesAdd(t *testing.T) {
	const sites, depth, stops = 300, 6, 8
	frames := NewFrameTable()
	byTree, bySnap := NewSeries("tick", Options{}), NewSeries("tick", Options{})
	for i := 0; i < stops; i++ {
		text := bigHeapFile(sites, depth, i, i >= stops/2)
		tree, err := ReadHeapTree(strings.NewReader(text), "big.ms", frames)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := ReadHeap(strings.NewReader(text), "big.ms")
		if err != nil {
			t.Fatal(err)
		}
		got, err := byTree.AddTree(i+1, i+1, tree)
		if err != nil {
			t.Fatal(err)
		}
		want, err := bySnap.Add(i+1, i+1, snap)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("diff %d (-Add +AddTree):\n%s", i, diff)
		}
	}
	want, got := bySnap.Suspects(), byTree.Suspects()
	if len(want) == 0 {
		t.Fatal("no suspects")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suspects (-Add +AddTree):\n%s", diff)
	}
}

// bigHeapFile writes the xtmemory file a stop of bench/bigheap gives:
// sites call sites, each reached depth frames deep, site k holding one
// block of 16+k%64 bytes; site 0 also holds the tick 32-byte blocks that
// the ticks so far added. With
// wrapped, half the sites allocate through xmalloc (xt.c:3), called from
// two lines, which makes it a wrapper.
func bigHeapFile(sites, depth, tick int, wrapped bool) string {
	var b strings.Builder
	b.WriteString("desc: xtree.produce_report\ncmd: ./bigheap\ntime_unit: ms\n")
	bytesOf := func(k int) (int64, int64) {
		n, blocks := int64(16+k%64), int64(1)
		if k == 0 {
			n, blocks = n+32*int64(tick), blocks+int64(tick)
		}
		return n, blocks
	}
	for ev, event := range []string{"curB : currently allocated Bytes", "curBk : currently allocated Blocks"} {
		var total int64
		for k := 0; k < sites; k++ {
			n, blocks := bytesOf(k)
			if ev == 1 {
				n = blocks
			}
			total += n
		}
		var wrappedTotal int64
		var plain, under []int
		for k := 0; k < sites; k++ {
			if wrapped && k%2 == 0 {
				n, blocks := bytesOf(k)
				if ev == 1 {
					n = blocks
				}
				wrappedTotal += n
				under = append(under, k)
			} else {
				plain = append(plain, k)
			}
		}
		kids := len(plain)
		if len(under) > 0 {
			kids++
		}
		fmt.Fprintf(&b, "#-----------\nsnapshot=%d\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\nn%d: %d %s\n",
			ev, 1000+tick, total, kids, total, event)
		site := func(k, d int) {
			n, blocks := bytesOf(k)
			if ev == 1 {
				n = blocks
			}
			fmt.Fprintf(&b, "%*sn1: %d 0x%X: site_%04d (bigheap.c:%d)\n", d, "", n, 0x10000+k*16, k, 27+k%2)
			for j := 1; j < depth; j++ {
				fmt.Fprintf(&b, "%*sn1: %d 0x183959: descend (bigheap.c:36)\n", d+j, "", n)
			}
			fmt.Fprintf(&b, "%*sn0: %d 0x183AF5: main (bigheap.c:59)\n", d+depth, "", n)
		}
		for _, k := range plain {
			site(k, 1)
		}
		if len(under) > 0 {
			fmt.Fprintf(&b, " n%d: %d 0x4000: xmalloc (xt.c:3)\n", len(under), wrappedTotal)
			for _, k := range under {
				site(k, 2)
			}
		}
	}
	return b.String()
}

// BenchmarkSeriesBigHeap follows a breakpoint over stops of bench/bigheap
// at 10,000 call sites 20 frames deep, each read with ReadHeapTree into
// one FrameTable and added to a Series, as snapctl run does. It reports the heap live after a collection
// at the worst point of a stop (live-peak-MiB: the series, the tree just
// read and the frame table) and what the series and the frame table keep
// between stops (retained-MiB). Generating the files is outside the timed
// part; snapctl's own peak is measured by bench/bigheap.sh.
func BenchmarkSeriesBigHeap(b *testing.B) {
	const sites, depth, stops = 10000, 20, 4
	files := make([]string, stops)
	for i := range files {
		files[i] = bigHeapFile(sites, depth, i, false)
	}
	var base, peak, retained uint64
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc - base
	}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		base = 0
		base = live()
		b.StartTimer()
		frames := NewFrameTable()
		s := NewSeries("tick", Options{})
		for i, text := range files {
			t, err := ReadHeapTree(strings.NewReader(text), "big.ms", frames)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			peak = max(peak, live())
			b.StartTimer()
			if _, err := s.AddTree(i+1, i+1, t); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		retained = live()
		runtime.KeepAlive(s)
		b.StartTimer()
	}
	b.ReportMetric(float64(peak)/(1<<20), "live-peak-MiB")
	b.ReportMetric(float64(retained)/(1<<20), "retained-MiB")
}
