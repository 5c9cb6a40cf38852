package driver

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// valgrind.blocks chooses what a stop's snapshot records. On waves.c,
// whose four threads per wave start, leak 12 records of 24 bytes and
// exit before each checkpoint, both choices give the same bytes, exactly;
// the default also counts the live blocks (12 per hit), and blocks: false
// takes massif's detailed snapshot instead, which has no blocks but has
// massif's heap extra bytes. Neither runs valgrind with --xtree-memory.
func TestRunBlocks(t *testing.T) {
	t.Parallel()
	const src = "testdata/waves.c"
	bin := testenv.Build(t, src)
	leak := "new_record (waves.c:" + strconv.Itoa(testenv.LineOf(t, src, "leak: 24 bytes")) + ")"
	for _, tc := range []struct {
		name, plan string
		blocks     bool
	}{
		{"default", "", true},
		{"false", "valgrind:\n  blocks: false\n", false},
	} {
		for _, p := range stopPaths {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				plan := tc.plan + "breakpoints:\n  - name: wave\n    location: checkpoint\n"
				res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, plan, bin, "5")
				if err != nil {
					t.Fatal(err)
				}
				m := readManifest(t, res.Dir)
				// xtmemory counts the blocks when asked: valgrind needs no
				// --xtree-memory for it.
				for _, a := range m.Valgrind {
					if strings.HasPrefix(a, "--xtree-memory") {
						t.Errorf("valgrind runs with %s", a)
					}
				}
				want := []suspectFigures{{Site: leak, Pattern: "steady", PerHit: 288, PerInterval: 288, Total: 4 * 288,
					Growing: 4, Intervals: 4, Hits: 4}}
				if tc.blocks {
					want[0].BlocksPerHit, want[0].TotalBlocks, want[0].BytesPerBlock = 12, 48, 24
				}
				if diff := cmp.Diff(want, figuresOf(m.Suspects)); diff != "" {
					t.Errorf("suspects (-want +got):\n%s", diff)
				}
				if len(m.Stops) != 5 {
					t.Fatalf("%d stops, want 5", len(m.Stops))
				}
				// Every interval: +288 B at new_record, in 12 blocks
				// when they are counted; scratch's freed buffers never
				// show as a change.
				for i, d := range m.Diffs {
					var got []string
					for _, s := range d.Sites {
						got = append(got, snapshots.FrameString(s.Frame))
						if s.Delta == 0 {
							t.Errorf("diff %d lists %s, which did not change", i, snapshots.FrameString(s.Frame))
						}
						if (s.SiteBlocks != nil) != tc.blocks {
							t.Errorf("diff %d, %s: blocks %+v, want them: %v", i, snapshots.FrameString(s.Frame), s.SiteBlocks, tc.blocks)
						}
						if snapshots.FrameString(s.Frame) == leak {
							if s.Delta != 288 || s.After != 288*int64(i+2) {
								t.Errorf("diff %d, %s: %+d B to %d B, want +288 B to %d B", i, leak, s.Delta, s.After, 288*(i+2))
							}
							if tc.blocks && s.DeltaBlocks != 12 {
								t.Errorf("diff %d, %s: %+d blocks, want +12", i, leak, s.DeltaBlocks)
							}
						}
					}
					if !slices.Contains(got, leak) {
						t.Errorf("diff %d: sites %q, want %s among them", i, got, leak)
					}
				}
				// The kept snapshot is what valgrind wrote: xtmemory's
				// two trees, or one detailed snapshot with massif's
				// extra bytes, which run.json then records.
				root := "curB : currently allocated Bytes"
				if !tc.blocks {
					root = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."
				}
				text := testenv.Gunzip(t, filepath.Join(res.Dir, m.Stops[4].Snapshot))
				if !strings.Contains(text, " "+root+"\n") || strings.Contains(text, "curBk") == !tc.blocks {
					t.Errorf("kept snapshot of stop 5 is not the expected kind (root %q):\n%.600s", root, text)
				}
				for _, s := range m.Stops {
					if (s.HeapExtraBytes > 0) == tc.blocks {
						t.Errorf("stop %d: heap_extra_bytes %d, want them: %v", s.Seq, s.HeapExtraBytes, !tc.blocks)
					}
				}
			})
		}
	}
}
