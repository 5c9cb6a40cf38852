package driver

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// A wrapper named in valgrind.alloc_fns passes its allocations through to
// its caller at every stop, though the xtmemory snapshots keep its frame:
// cachewrap.c's do_cache_alloc has a single caller, which snapctl would
// not find a wrapper by itself, and the site is that caller, with the
// exact bytes and blocks of each interval. Without alloc_fns the wrapper
// stays the site.
func TestRunAllocFns(t *testing.T) {
	t.Parallel()
	const src = "testdata/cachewrap.c"
	bin := testenv.Build(t, src)
	caller := "process_get_command (cachewrap.c:" + strconv.Itoa(testenv.LineOf(t, src, "leak: items")) + ")"
	wrapper := "do_cache_alloc (cachewrap.c:" + strconv.Itoa(testenv.LineOf(t, src, "malloc(c->size)")) + ")"
	const bps = "breakpoints:\n  - name: get\n    location: process_get_command\n"
	for _, tt := range []struct {
		name, plan, site, library string
	}{
		{"named", "valgrind:\n  alloc_fns: [do_cache_alloc]\n" + bps, caller, "do_cache_alloc"},
		{"not named", bps, wrapper, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := runPlan(t, tt.plan, bin, "5")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			want := []suspectFigures{{Site: tt.site, Pattern: "steady", PerHit: 100, PerInterval: 100, Total: 400,
				BlocksPerHit: 2, TotalBlocks: 8, BytesPerBlock: 50, Growing: 4, Intervals: 4, Hits: 4, Library: tt.library}}
			if diff := cmp.Diff(want, figuresOf(m.Suspects)); diff != "" {
				t.Errorf("suspects (-want +got):\n%s", diff)
			}
			if len(m.Diffs) != 4 {
				t.Fatalf("%d diffs, want 4", len(m.Diffs))
			}
			for i, d := range m.Diffs {
				type site struct {
					Site                 string
					Before, After, Delta int64
					Blocks               snapshots.SiteBlocks
				}
				var got []site
				for _, s := range d.Sites {
					x := site{Site: snapshots.FrameString(s.Frame), Before: s.Before, After: s.After, Delta: s.Delta}
					if s.SiteBlocks != nil {
						x.Blocks = *s.SiteBlocks
					}
					got = append(got, x)
				}
				n := int64(2 * i)
				wantSites := []site{{tt.site, 50 * n, 50 * (n + 2), 100, snapshots.SiteBlocks{BeforeBlocks: n, AfterBlocks: n + 2, DeltaBlocks: 2}}}
				if diff := cmp.Diff(wantSites, got); diff != "" {
					t.Errorf("diff %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}
