package snapshots

import (
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// row is the part of a SiteDelta the tests compare.
type row struct {
	Site                 string
	Before, After, Delta int64
	Change               Change
}

func rows(d *Diff) []row {
	out := []row{}
	for _, s := range d.Sites {
		out = append(out, row{FrameString(s.Frame), s.Before, s.After, s.Delta, s.Change})
	}
	return out
}

func frameStrings(fs []Frame) []string {
	out := []string{}
	for _, f := range fs {
		out = append(out, FrameString(f))
	}
	return out
}

func mustDiff(t *testing.T, a, b *Snapshot, opts Options) *Diff {
	t.Helper()
	d, err := DiffSnapshots(a, b, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The C++ fixture inserts 10 tasks into an std::unordered_map. Every
// allocation goes through libstdc++; the site must be the user's line.
func TestDiffCppSiteIsUserLine(t *testing.T) {
	d := mustDiff(t, loadSnapshot(t, "taskpool/before.ms"), loadSnapshot(t, "taskpool/after.ms"), Options{})
	want := []row{
		// 10 hash nodes of 56 bytes (next pointer + pair<const int, Task>
		// of 44 bytes, rounded up) and a 13-bucket array of 8-byte pointers.
		{"Scheduler::submit(int) (taskpool.cpp:34)", 0, 10*56 + 13*8, 664, ChangeNew},
		{"main (taskpool.cpp:45)", 0, 16 * 4, 64, ChangeNew},
	}
	if diff := cmp.Diff(want, rows(d)); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
	if d.DeltaBytes != 728 || d.SitesDeltaBytes != 728 || d.UnchangedSites != 1 {
		t.Errorf("delta %d, sites delta %d, unchanged %d; want 728, 728, 1", d.DeltaBytes, d.SitesDeltaBytes, d.UnchangedSites)
	}
	submit := d.Sites[0]
	if diff := cmp.Diff([]string{"Scheduler::submit(int) (taskpool.cpp:34)", "main (taskpool.cpp:44)"}, frameStrings(submit.Stack)); diff != "" {
		t.Errorf("stack (-want +got):\n%s", diff)
	}
	// The library frames of the heavier call path (the nodes), allocator side first.
	lib := frameStrings(submit.Library)
	if len(lib) != 7 || lib[0] != "std::__new_allocator<std::__detail::_Hash_node<std::pair<int const, Task>, false> >::allocate(unsigned long, void const*) (new_allocator.h:137)" ||
		lib[6] != "std::pair<std::__detail::_Node_iterator<std::pair<int const, Task>, false, false>, bool> std::unordered_map<int, Task, std::hash<int>, std::equal_to<int>, std::allocator<std::pair<int const, Task> > >::emplace<int&, Task>(int&, Task&&) (unordered_map.h:389)" {
		t.Errorf("library frames:\n%q", lib)
	}

	// Without the default library patterns the site is libstdc++'s.
	bare := mustDiff(t, loadSnapshot(t, "taskpool/before.ms"), loadSnapshot(t, "taskpool/after.ms"), Options{NoDefaultLibrary: true})
	if got := bare.Sites[0].Frame.Function; got != "std::__new_allocator<std::__detail::_Hash_node<std::pair<int const, Task>, false> >::allocate(unsigned long, void const*)" || bare.Sites[0].Delta != 560 {
		t.Errorf("without library patterns, first site is %s %+d, want the node allocator +560", got, bare.Sites[0].Delta)
	}
}

func TestDiffGrowthFixture(t *testing.T) {
	// Hits 1 and 7 of growth.c: 6 requests, each leaking 24 bytes; the
	// scratch buffer grew to 256 bytes; the temporary is freed.
	d := mustDiff(t, loadSnapshot(t, "growth/hit-1.ms"), loadSnapshot(t, "growth/hit-7.ms"), Options{})
	want := []row{
		{"grow_scratch (growth.c:39)", 0, 256, 256, ChangeNew},
		{"leak_record (growth.c:29)", 0, 6 * 24, 144, ChangeNew},
	}
	if diff := cmp.Diff(want, rows(d)); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
	if d.BeforeBytes != 56 || d.AfterBytes != 56+256+144 || d.DeltaBytes != 400 || d.SitesDeltaBytes != 400 {
		t.Errorf("totals %d → %d (%+d, sites %+d), want 56 → 456 (+400, +400)", d.BeforeBytes, d.AfterBytes, d.DeltaBytes, d.SitesDeltaBytes)
	}
	// Between two later hits only the leak moves.
	d = mustDiff(t, loadSnapshot(t, "growth/hit-5.ms"), loadSnapshot(t, "growth/hit-6.ms"), Options{})
	if diff := cmp.Diff([]row{{"leak_record (growth.c:29)", 96, 120, 24, ChangeGrown}}, rows(d)); diff != "" {
		t.Errorf("hit 5 → 6 (-want +got):\n%s", diff)
	}
}

// A site that massif folds into its below-threshold bucket is hidden, not
// vanished; coming back out it is revealed, not new.
func TestDiffThresholdHidden(t *testing.T) {
	// big_site is an allocation wrapper called from two lines of main;
	// this test is about the bucket, so the site stays big_site.
	before, after := loadSnapshot(t, "threshold/before.ms"), loadSnapshot(t, "threshold/after.ms")
	d := mustDiff(t, before, after, Options{NoWrappers: true})
	want := []row{
		{"big_site (threshold.c:22)", 2000, 200000, 198000, ChangeGrown},
		{"small_site (threshold.c:20)", 200, 0, -200, ChangeHidden},
	}
	if diff := cmp.Diff(want, rows(d)); diff != "" {
		t.Errorf("before → after (-want +got):\n%s", diff)
	}
	if d.BelowThresholdDeltaBytes != 200 || d.SitesDeltaBytes+d.BelowThresholdDeltaBytes != d.DeltaBytes {
		t.Errorf("below threshold %+d, sites %+d, total %+d: want +200 and sites+below = total", d.BelowThresholdDeltaBytes, d.SitesDeltaBytes, d.DeltaBytes)
	}
	back := mustDiff(t, after, before, Options{NoWrappers: true})
	want = []row{
		{"big_site (threshold.c:22)", 200000, 2000, -198000, ChangeShrunk},
		{"small_site (threshold.c:20)", 0, 200, 200, ChangeRevealed},
	}
	if diff := cmp.Diff(want, rows(back)); diff != "" {
		t.Errorf("after → before (-want +got):\n%s", diff)
	}
}

func TestDiffVanishedAndBucketElsewhere(t *testing.T) {
	a := buildSnap(t,
		"150 "+heapRoot,
		" 100 cache_put (cache.c:10)",
		"  100 main (main.c:5)",
		" 50 parse (parse.c:3)",
		"  50 main (main.c:6)",
	)
	// parse's allocation is freed; a bucket appears, but under cache_put,
	// not where parse was: parse vanished.
	b := buildSnap(t,
		"100 "+heapRoot,
		" 100 cache_put (cache.c:10)",
		"  99 main (main.c:5)",
		"  1 below",
	)
	d := mustDiff(t, a, b, Options{})
	want := []row{{"parse (parse.c:3)", 50, 0, -50, ChangeVanished}}
	if diff := cmp.Diff(want, rows(d)); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
	// The byte folded into the bucket of cache_put's callers stays with
	// cache_put: no change by site.
	if d.UnchangedSites != 1 {
		t.Errorf("unchanged sites = %d, want 1 (cache_put)", d.UnchangedSites)
	}
}

func TestDiffGroupBy(t *testing.T) {
	a := buildSnap(t,
		"30 "+heapRoot,
		" 10 make (a.c:5)",
		"  10 main (a.c:9)",
		" 20 make (a.c:6)",
		"  20 run (a.c:20)",
		"   20 main (a.c:10)",
	)
	b := buildSnap(t,
		"70 "+heapRoot,
		" 30 make (a.c:5)",
		"  10 main (a.c:9)",
		"  20 run (a.c:21)",
		"   20 main (a.c:10)",
		" 40 make (a.c:6)",
		"  40 run (a.c:20)",
		"   40 main (a.c:10)",
	)
	bySite := mustDiff(t, a, b, Options{})
	if diff := cmp.Diff([]row{
		{"make (a.c:6)", 20, 40, 20, ChangeGrown},
		{"make (a.c:5)", 10, 30, 20, ChangeGrown},
	}, rows(bySite)); diff != "" {
		t.Errorf("by site (-want +got):\n%s", diff)
	}
	// make (a.c:5) grew through run (a.c:21): that is the stack shown.
	if diff := cmp.Diff([]string{"make (a.c:5)", "run (a.c:21)", "main (a.c:10)"}, frameStrings(bySite.Sites[1].Stack)); diff != "" {
		t.Errorf("stack of the changed call path (-want +got):\n%s", diff)
	}

	byFunc := mustDiff(t, a, b, Options{GroupBy: GroupByFunction})
	if diff := cmp.Diff([]row{{"make (a.c)", 30, 70, 40, ChangeGrown}}, rows(byFunc)); diff != "" {
		t.Errorf("by function (-want +got):\n%s", diff)
	}

	byStack := mustDiff(t, a, b, Options{GroupBy: GroupByStack})
	if len(byStack.Sites) != 2 || byStack.UnchangedSites != 1 {
		t.Fatalf("by stack: %v, %d unchanged; want 2 rows and make:5←main:9 unchanged", rows(byStack), byStack.UnchangedSites)
	}
	if diff := cmp.Diff([]row{
		{"make (a.c:6)", 20, 40, 20, ChangeGrown},
		{"make (a.c:5)", 0, 20, 20, ChangeNew},
	}, rows(byStack)); diff != "" {
		t.Errorf("by stack (-want +got):\n%s", diff)
	}

	// Depth 1 keeps the site and one caller: make:5←run:21 is new,
	// make:6←run:20 grew.
	byDepth := mustDiff(t, a, b, Options{GroupBy: GroupByStack, Depth: 1})
	if len(byDepth.Sites) != 2 {
		t.Errorf("by stack, depth 1: %v", rows(byDepth))
	}
}

// handle (srv.c:20) has the shape of a wrapper (one line, two callers);
// this test is about the filters, so wrappers are off.
func TestDiffIgnoreAndFocus(t *testing.T) {
	a := buildSnap(t,
		"100 "+heapRoot,
		" 100 calloc (rtld-malloc.h:44)",
		"  100 allocate_dtv (dl-tls.c:401)",
		"   100 _dl_allocate_tls (dl-tls.c:486)",
		"    100 pthread_create@@GLIBC_2.34 (pthread_create.c:647)",
		"     100 main (srv.c:50)",
	)
	b := buildSnap(t,
		"372 "+heapRoot,
		" 200 calloc (rtld-malloc.h:44)",
		"  200 allocate_dtv (dl-tls.c:401)",
		"   200 _dl_allocate_tls (dl-tls.c:486)",
		"    200 pthread_create@@GLIBC_2.34 (pthread_create.c:647)",
		"     200 main (srv.c:50)",
		" 172 handle (srv.c:20)",
		"  100 worker (srv.c:30)",
		"   100 start_thread (pthread_create.c:442)",
		"  72 serve (srv.c:40)",
		"   72 main (srv.c:60)",
	)
	d := mustDiff(t, a, b, Options{Ignore: []string{"_dl_allocate_tls"}, NoWrappers: true})
	if diff := cmp.Diff([]row{{"handle (srv.c:20)", 0, 172, 172, ChangeNew}}, rows(d)); diff != "" {
		t.Errorf("ignore _dl_allocate_tls (-want +got):\n%s", diff)
	}
	if d.FilteredDeltaBytes != 100 || d.SitesDeltaBytes+d.FilteredDeltaBytes != d.DeltaBytes {
		t.Errorf("filtered %+d, sites %+d, total %+d", d.FilteredDeltaBytes, d.SitesDeltaBytes, d.DeltaBytes)
	}

	// The stopped thread is in serve, called from main at srv.c:60: keep
	// only the allocations on its stack. serve's frame has Line 0: the
	// thread has moved on inside serve since.
	focus := Options{NoWrappers: true, FocusFrames: []Frame{{Function: "serve", File: "/src/srv.c"}, {Function: "main", File: "srv.c", Line: 60}}}
	d = mustDiff(t, a, b, focus)
	if diff := cmp.Diff([]row{{"handle (srv.c:20)", 0, 72, 72, ChangeNew}}, rows(d)); diff != "" {
		t.Errorf("focus on the stopped thread (-want +got):\n%s", diff)
	}
	d = mustDiff(t, a, b, Options{Focus: []string{"worker"}, NoWrappers: true})
	if diff := cmp.Diff([]row{{"handle (srv.c:20)", 0, 100, 100, ChangeNew}}, rows(d)); diff != "" {
		t.Errorf("focus worker (-want +got):\n%s", diff)
	}
	// Ignore wins over focus.
	d = mustDiff(t, a, b, Options{Focus: []string{"main"}, Ignore: []string{"srv.c:30"}, NoWrappers: true})
	if diff := cmp.Diff([]row{
		{"allocate_dtv (dl-tls.c:401)", 100, 200, 100, ChangeGrown},
		{"handle (srv.c:20)", 0, 72, 72, ChangeNew},
	}, rows(d)); diff != "" {
		t.Errorf("focus main, ignore srv.c:30 (-want +got):\n%s", diff)
	}
}

// Sites are linear in the bytes: the sites of the delta tree are the
// deltas of the sites. Wrapper detection is not (it looks at every tree an
// analyzer saw: threshold.c's big_site has one caller in each file), so it
// is off here.
func TestDiffTreeIsSiteLinear(t *testing.T) {
	opts := Options{NoWrappers: true}
	pairs := [][2]string{
		{"taskpool/before.ms", "taskpool/after.ms"},
		{"growth/hit-2.ms", "growth/hit-6.ms"},
		{"threshold/before.ms", "threshold/after.ms"},
	}
	for _, p := range pairs {
		a, b := loadSnapshot(t, p[0]), loadSnapshot(t, p[1])
		dt := DiffTree(a.Tree, b.Tree)
		if dt.Bytes != b.Tree.Bytes-a.Tree.Bytes {
			t.Errorf("%s: delta tree root %d, want %d", p[1], dt.Bytes, b.Tree.Bytes-a.Tree.Bytes)
		}
		want := map[string]int64{}
		for _, s := range Sites(a.Tree, opts) {
			want[FrameString(s.Frame)] -= s.Bytes
		}
		for _, s := range Sites(b.Tree, opts) {
			want[FrameString(s.Frame)] += s.Bytes
		}
		for k, v := range want {
			if v == 0 {
				delete(want, k)
			}
		}
		got := siteBytes(Sites(dt, opts))
		for k, v := range got {
			if v == 0 {
				delete(got, k)
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s → %s: sites of the delta tree (-want +got):\n%s", p[0], p[1], diff)
		}
	}
}

func TestDiffTreeMergesByFrame(t *testing.T) {
	a := buildTree(t,
		"30 "+heapRoot,
		" 30 0x1: f (a.c:1)",
		"  20 0x2: main (a.c:9)",
		"  10 below",
	)
	b := buildTree(t,
		"45 "+heapRoot,
		" 40 0x7: f (a.c:1)",
		"  35 0x8: main (a.c:9)",
		"  5 below",
		" 5 0x9: g (a.c:2)",
		"  5 0x8: main (a.c:10)",
	)
	got := DiffTree(a, b)
	want := buildTree(t,
		"15 "+heapRoot,
		" 10 f (a.c:1)",
		"  15 main (a.c:9)",
		"  -5 below",
		" 5 g (a.c:2)",
		"  5 main (a.c:10)",
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DiffTree (-want +got):\n%s", diff)
	}
}

func TestDiffNeedsTrees(t *testing.T) {
	a := &Snapshot{Index: 3, Kind: TreeEmpty, HeapBytes: 10}
	b := buildSnap(t, "0 "+heapRoot)
	_, err := DiffSnapshots(a, b, Options{})
	if !errors.Is(err, ErrNoTree) {
		t.Errorf("DiffSnapshots of a totals-only snapshot: %v, want ErrNoTree", err)
	}
	if _, err := DiffSnapshots(b, nil, Options{}); !errors.Is(err, ErrNoTree) {
		t.Errorf("DiffSnapshots with nil: %v, want ErrNoTree", err)
	}
}

// randomTree builds an arbitrary tree, consistent or not: bytes that do
// not add up, negative bytes, buckets anywhere, nil children, repeated
// frames.
func randomTree(r *rand.Rand, depth int) *Node {
	frames := []Frame{
		{Function: "main", File: "m.c", Line: 1},
		{Function: "f", File: "m.c", Line: 2},
		{Function: "std::vector<int>::push_back(int const&)", File: "stl_vector.h", Line: 3},
		{Function: "operator new(unsigned long)", Object: "/usr/lib/libstdc++.so.6"},
		{Function: "???"},
		{Function: "_dl_allocate_tls", File: "dl-tls.c", Line: 4},
	}
	n := &Node{Bytes: r.Int64N(200) - 20, Frame: frames[r.IntN(len(frames))]}
	if depth > 0 {
		for i := r.IntN(4); i > 0; i-- {
			switch r.IntN(8) {
			case 0:
				n.Children = append(n.Children, &Node{Below: true, Places: 2, Bytes: r.Int64N(50)})
			case 1:
				n.Children = append(n.Children, nil)
			default:
				n.Children = append(n.Children, randomTree(r, depth-1))
			}
		}
	}
	return n
}

// Whatever the trees, diffing never panics and the bytes are conserved:
// sites, below-threshold buckets and filtered allocations make up the
// change of the trees' totals.
func TestDiffConservesBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	optsList := []Options{
		{},
		{GroupBy: GroupByFunction},
		{GroupBy: GroupByStack, Depth: 2},
		{Ignore: []string{"_dl_allocate_tls"}, Focus: []string{"main"}},
		{NoDefaultLibrary: true},
	}
	for i := 0; i < 300; i++ {
		ta, tb := randomTree(r, 5), randomTree(r, 5)
		a := &Snapshot{Tree: ta, HeapBytes: ta.Bytes}
		b := &Snapshot{Tree: tb, HeapBytes: tb.Bytes}
		for _, opts := range optsList {
			opts.Unchanged = true
			d := mustDiff(t, a, b, opts)
			var sum int64
			for _, s := range d.Sites {
				sum += s.Delta
				if s.Delta != s.After-s.Before || len(s.Stack) == 0 {
					t.Fatalf("bad row %+v", s)
				}
			}
			if sum != d.SitesDeltaBytes || sum+d.BelowThresholdDeltaBytes+d.FilteredDeltaBytes != d.DeltaBytes {
				t.Fatalf("tree %d, %+v: sites %d (listed %d) + below %d + filtered %d != delta %d", i, opts,
					d.SitesDeltaBytes, sum, d.BelowThresholdDeltaBytes, d.FilteredDeltaBytes, d.DeltaBytes)
			}
		}
		dt := DiffTree(ta, tb)
		if dt.Bytes != tb.Bytes-ta.Bytes {
			t.Fatalf("delta tree root %d, want %d", dt.Bytes, tb.Bytes-ta.Bytes)
		}
		if err := RenderDeltaTree(io.Discard, dt, TreeOptions{MaxDepth: 3}); err != nil {
			t.Fatal(err)
		}
	}
}
