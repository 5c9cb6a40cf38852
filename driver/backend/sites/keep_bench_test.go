package sites

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/snapshots"
)

// bigHeapSnapshot writes what a stop of bench/bigheap gives at sites call
// sites depth frames deep: an xtmemory file (curB and curBk trees) with
// blocks, a detailed_snapshot file without. tick adds a block at site 0,
// so that every stop's file differs.
func bigHeapSnapshot(sites, depth, tick int, blocks bool) string {
	var b strings.Builder
	b.WriteString("desc: xtree.produce_report\ncmd: ./bigheap 1000 20 300\ntime_unit: ms\n")
	events := []string{"curB : currently allocated Bytes", "curBk : currently allocated Blocks"}
	if !blocks {
		events = []string{"(heap allocation functions) malloc/new/new[], --alloc-fns, etc."}
	}
	value := func(k, ev int) int64 {
		n, bk := int64(16+k%64), int64(1)
		if k == 0 {
			n, bk = n+32*int64(tick), bk+int64(tick)
		}
		if ev == 1 {
			return bk
		}
		return n
	}
	for ev, event := range events {
		var total int64
		for k := 0; k < sites; k++ {
			total += value(k, ev)
		}
		fmt.Fprintf(&b, "#-----------\nsnapshot=%d\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\nn%d: %d %s\n",
			ev, 1000+tick, total, sites, total, event)
		for k := 0; k < sites; k++ {
			v := value(k, ev)
			fmt.Fprintf(&b, " n1: %d 0x%X: site_%04d (bigheap.c:27)\n", v, 0x100000+16*k, k)
			for d := 1; d < depth; d++ {
				kids := 1
				if d == depth-1 {
					kids = 0
				}
				fmt.Fprintf(&b, "%sn%d: %d 0x183959: descend (bigheap.c:36)\n", strings.Repeat(" ", d+1), kids, v)
			}
		}
	}
	return b.String()
}

// BenchmarkKeepBigSnapshot is snapctl's own work for one stop of
// bench/bigheap at 1,000 call sites 20 frames deep, with and without
// valgrind.blocks: the tree's hash, the parse and the compression of the
// kept file in one pass, and the series' diff. Writing the raw file,
// valgrind's part, is not counted. Besides wall time it reports the
// process's CPU time (user+sys, from getrusage, garbage collection
// included) per stop and per MB of snapshot, which a loaded machine
// disturbs less.
func BenchmarkKeepBigSnapshot(b *testing.B) {
	for _, blocks := range []bool{true, false} {
		b.Run(fmt.Sprintf("blocks=%v", blocks), func(b *testing.B) {
			const stops = 8
			files := make([]string, stops)
			size := 0
			for i := range files {
				files[i] = bigHeapSnapshot(1000, 20, i, blocks)
				size += len(files[i])
			}
			dir := b.TempDir()
			raw, kept := filepath.Join(dir, "raw.ms"), filepath.Join(dir, "kept.ms.gz")
			frames := snapshots.NewFrameTable()
			series := snapshots.NewSeries("tick", snapshots.Options{})
			b.SetBytes(int64(size / stops))
			var cpu time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				text := files[n%stops]
				b.StopTimer()
				if err := os.WriteFile(raw, []byte(text), 0o644); err != nil {
					b.Fatal(err)
				}
				start := processCPU()
				b.StartTimer()
				f, err := openFile(raw, os.O_RDWR)
				if err != nil {
					b.Fatal(err)
				}
				sum := newTreeHash()
				if _, err := io.Copy(sum, f); err != nil {
					b.Fatal(err)
				}
				sum.sum()
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					b.Fatal(err)
				}
				var tree *snapshots.HeapTree
				err = keepSnapshot(f, raw, kept, func(r io.Reader) error {
					var err error
					tree, err = snapshots.ReadHeapTree(r, raw, frames)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := series.AddTree(n+1, n+1, tree); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += processCPU() - start
				b.StartTimer()
			}
			perStop := cpu.Seconds() * 1000 / float64(b.N)
			b.ReportMetric(perStop, "cpu-ms/stop")
			b.ReportMetric(perStop/(float64(size/stops)/1e6), "cpu-ms/MB")
		})
	}
}

// processCPU is the user and system time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err) // cannot fail with a valid pointer
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
