package snapshots

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
)

// suspectRow is the part of a Suspect the tests compare.
type suspectRow struct {
	Site                        string
	GrowthPerHit, TotalGrowth   int64
	GrowingIntervals, Intervals int
}

func suspectRows(s []Suspect) []suspectRow {
	out := []suspectRow{}
	for _, x := range s {
		out = append(out, suspectRow{FrameString(x.Frame), x.GrowthPerHit, x.TotalGrowth, x.GrowingIntervals, x.Intervals})
	}
	return out
}

// growthSeries feeds the snapshots of growth.c's hits to a series and
// returns it with the diffs.
func growthSeries(t *testing.T, paths []string) (*Series, []*Diff) {
	t.Helper()
	s := NewSeries("request", Options{})
	var diffs []*Diff
	for i, p := range paths {
		f, err := ParseFile(p)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := f.Select("")
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.Add(i+1, i+1, snap)
		if err != nil {
			t.Fatal(err)
		}
		if (i == 0) != (d == nil) {
			t.Fatalf("Add of hit %d returned diff %v", i+1, d)
		}
		if d != nil {
			diffs = append(diffs, d)
		}
	}
	return s, diffs
}

// checkGrowthSeries asserts what growth.c does over hits snapshots: 24
// bytes leaked per request; a scratch buffer of 64, 128, then 256 bytes
// during the first three requests, then no more.
func checkGrowthSeries(t *testing.T, s *Series, diffs []*Diff, hits int) {
	t.Helper()
	n := hits - 1
	if s.Intervals() != n || len(diffs) != n {
		t.Fatalf("%d intervals, %d diffs; want %d", s.Intervals(), len(diffs), n)
	}
	scratch := []int64{64, 64, 128}
	for i, d := range diffs {
		if d.Kind != "between-hits" || d.Breakpoint != "request" || d.FromSeq != i+1 || d.ToSeq != i+2 {
			t.Errorf("diff %d is %s %q %d→%d", i, d.Kind, d.Breakpoint, d.FromSeq, d.ToSeq)
		}
		want := []row{{"leak_record (growth.c:29)", int64(24 * i), int64(24 * (i + 1)), 24, ChangeGrown}}
		if i == 0 {
			want[0].Change = ChangeNew
		}
		if i < len(scratch) {
			var before int64
			for _, x := range scratch[:i] {
				before += x
			}
			r := row{"grow_scratch (growth.c:39)", before, before + scratch[i], scratch[i], ChangeGrown}
			if i == 0 {
				r.Change = ChangeNew
			}
			want = append([]row{r}, want...)
		}
		if diff := cmp.Diff(want, rows(d)); diff != "" {
			t.Errorf("hit %d → %d (-want +got):\n%s", i+1, i+2, diff)
		}
	}
	want := []suspectRow{{"leak_record (growth.c:29)", 24, int64(24 * n), n, n}}
	sus := s.Suspects()
	if diff := cmp.Diff(want, suspectRows(sus)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
	if len(sus) == 1 {
		if sus[0].Breakpoint != "request" {
			t.Errorf("suspect breakpoint %q", sus[0].Breakpoint)
		}
		if diff := cmp.Diff([]string{"leak_record (growth.c:29)", "handle_request (growth.c:45)", "main (growth.c:59)"}, frameStrings(sus[0].Stack)); diff != "" {
			t.Errorf("suspect stack (-want +got):\n%s", diff)
		}
	}
}

func TestSeriesRecordedGrowth(t *testing.T) {
	var paths []string
	for i := 1; i <= 7; i++ {
		paths = append(paths, filepath.Join("..", "testdata", "analysis", "growth", fmt.Sprintf("hit-%d.ms", i)))
	}
	s, diffs := growthSeries(t, paths)
	checkGrowthSeries(t, s, diffs, 7)
}

// TestSeriesLiveGrowth runs growth.c under the installed valgrind, which
// takes a detailed snapshot at the start of every request, exactly as the
// driver's monitor command does.
func TestSeriesLiveGrowth(t *testing.T) {
	testenv.MustHave(t, "valgrind")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, filepath.Join("..", "testdata", "analysis", "growth.c"))
	dir := t.TempDir()
	const hits = 5
	cmd := exec.Command("valgrind", "--tool=massif", "--threshold=0", "--vgdb-prefix="+filepath.Join(dir, "vgdb"),
		"--massif-out-file="+filepath.Join(dir, "massif.out"), bin, dir, fmt.Sprint(hits-1))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	var paths []string
	for i := 1; i <= hits; i++ {
		p := filepath.Join(dir, fmt.Sprintf("hit-%d.ms", i))
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	s, diffs := growthSeries(t, paths)
	checkGrowthSeries(t, s, diffs, hits)
}

// seriesOf feeds a series with synthetic hits: at hit i the site
// "f (s.c:N)" holds sizes[N][i] bytes.
func seriesOf(t *testing.T, sizes map[int][]int64) *Series {
	t.Helper()
	hits := 0
	for _, v := range sizes {
		hits = max(hits, len(v))
	}
	s := NewSeries("bp", Options{})
	for i := 0; i < hits; i++ {
		lines := []string{""}
		var total int64
		for line := 1; line <= len(sizes)+10; line++ {
			v, ok := sizes[line]
			if !ok || i >= len(v) {
				continue
			}
			total += v[i]
			lines = append(lines, fmt.Sprintf(" %d f (s.c:%d)", v[i], line), fmt.Sprintf("  %d main (s.c:99)", v[i]))
		}
		lines[0] = fmt.Sprintf("%d %s", total, heapRoot)
		if _, err := s.Add(i+1, i+1, buildSnap(t, lines...)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestSuspectRule(t *testing.T) {
	steady := []int64{0, 24, 48, 72, 96, 120, 144, 168, 192, 216}
	tests := []struct {
		name  string
		sizes []int64
		want  *suspectRow // nil: not a suspect
	}{
		{"steady 24 bytes a hit", steady, &suspectRow{"f (s.c:1)", 24, 216, 9, 9}},
		{"warm-up buffer doubling then stable", []int64{64, 128, 256, 512, 512, 512, 512, 512, 512, 512}, nil},
		{"warm-up over half the hits", []int64{0, 10, 20, 30, 40, 50, 50, 50, 50, 50}, nil},
		{"leak with a one-off spike", []int64{0, 24, 4120, 4144, 4168, 4192, 4216, 4240, 4264, 4288}, &suspectRow{"f (s.c:1)", 24, 4288, 9, 9}},
		{"every other hit", []int64{0, 48, 48, 96, 96, 144, 144, 192, 192, 240, 240}, &suspectRow{"f (s.c:1)", 24, 240, 5, 10}},
		{"churn", []int64{0, 24, 0, 24, 0, 24, 0, 24, 0, 24}, nil},
		{"stopped growing at the end", []int64{0, 24, 48, 72, 96, 120, 144, 168, 168}, nil},
		// Workers that finish their requests out of order: the site grows
		// in bursts, pauses of one interval, and the run ends in a pause of two.
		{"bursts, a longer pause at the end", []int64{0, 24, 24, 72, 96, 96, 120, 144, 144, 192, 216, 240, 240, 264, 288, 288, 312, 336, 384, 384, 384}, &suspectRow{"f (s.c:1)", 24, 384, 13, 20}},
		{"bursts, then stopped", []int64{0, 24, 24, 72, 96, 96, 120, 144, 144, 192, 216, 216, 216, 216, 216, 216}, nil},
		{"leak trimmed now and then", []int64{0, 24, 48, 72, 24, 48, 72, 96, 48, 72, 96}, &suspectRow{"f (s.c:1)", 24, 96, 8, 10}},
		{"shrinking", []int64{100, 90, 80, 70, 60}, nil},
		{"constant", []int64{100, 100, 100, 100}, nil},
		{"one interval", []int64{0, 24}, &suspectRow{"f (s.c:1)", 24, 24, 1, 1}},
		{"one interval, shrunk", []int64{24, 0}, nil},
		{"stepwise: a vector doubling as it fills", []int64{16, 32, 64, 64, 128, 128, 128, 128, 256, 256, 256, 256, 256, 256}, &suspectRow{"f (s.c:1)", 18, 240, 4, 13}},
		{"stepwise, flat for too long since", []int64{16, 32, 64, 64, 128, 128, 128, 128, 256, 256, 256, 256, 256, 256, 256, 256, 256}, nil},
		// A block kept every fourth request, the requests finished out of
		// order: steps at uneven spacing, the last two close together.
		{"stepwise: steps at uneven spacing", []int64{0, 0, 0, 64, 64, 64, 64, 128, 128, 128, 128, 128, 192, 192, 192, 256, 256, 256, 256, 256, 320, 320, 320, 320, 384, 448, 448, 448, 448, 448, 448}, &suspectRow{"f (s.c:1)", 15, 448, 7, 30}},
		{"stepwise, one step only", []int64{0, 0, 0, 0, 0, 128, 128, 128}, nil},
		{"starts late, grows to the end", []int64{0, 0, 0, 0, 24, 48, 72, 96, 120, 144}, &suspectRow{"f (s.c:1)", 24, 144, 6, 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := suspectRows(seriesOf(t, map[int][]int64{1: tt.sizes}).Suspects())
			want := []suspectRow{}
			if tt.want != nil {
				want = append(want, *tt.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("suspects (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSuspectsRanked(t *testing.T) {
	got := suspectRows(seriesOf(t, map[int][]int64{
		1: {0, 8, 16, 24, 32},
		2: {0, 100, 200, 300, 400},
		3: {0, 8, 16, 24, 40},
	}).Suspects())
	want := []suspectRow{
		{"f (s.c:2)", 100, 400, 4, 4},
		{"f (s.c:3)", 8, 40, 4, 4},
		{"f (s.c:1)", 8, 32, 4, 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
}

func TestSeriesRejectsEmptySnapshot(t *testing.T) {
	s := NewSeries("bp", Options{})
	if _, err := s.Add(1, 1, &Snapshot{Index: 4}); err == nil {
		t.Fatal("Add of a totals-only snapshot succeeded")
	}
	if d, err := s.Add(2, 2, buildSnap(t, "0 "+heapRoot)); d != nil || err != nil {
		t.Errorf("first good snapshot after a bad one: %v, %v; want nil, nil", d, err)
	}
}

// With every: 10 an interval spans ten hits: growth per hit is the
// interval's growth divided by them, and the interval's own figure keeps
// its name.
func TestSuspectPerHit(t *testing.T) {
	s := NewSeries("bp", Options{})
	for i := 0; i < 4; i++ {
		total := int64(480 * i)
		snap := buildSnap(t, fmt.Sprintf("%d %s", total, heapRoot), fmt.Sprintf(" %d f (s.c:1)", total), fmt.Sprintf("  %d main (s.c:99)", total))
		if _, err := s.Add(i+1, 1+10*i, snap); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Suspects()
	if len(got) != 1 {
		t.Fatalf("%d suspects, want 1", len(got))
	}
	g := got[0]
	if g.Pattern != PatternSteady || g.GrowthPerHit != 48 || g.GrowthPerInterval != 480 || g.Hits != 30 || g.Intervals != 3 || g.TotalGrowth != 1440 {
		t.Errorf("suspect %+v, want steady 48 B per hit, 480 B per interval, 30 hits in 3 intervals, 1440 B", g)
	}
	if g.BlocksPerHit != nil || g.TotalBlocks != nil {
		t.Errorf("blocks %v %v from snapshots without block counts", g.BlocksPerHit, g.TotalBlocks)
	}
}

// AddSame counts a snapshot known to equal the previous one exactly as Add
// counts that snapshot parsed again: the same diff (no site changed), the
// same suspects, also when the repeat spans several hits.
func TestSeriesAddSame(t *testing.T) {
	parsed, skipped := NewSeries("request", Options{}), NewSeries("request", Options{})
	if _, err := skipped.AddSame(1, 1); err == nil {
		t.Error("AddSame on an empty series succeeded")
	}
	type step struct {
		seq, hit, file int
		same           bool
	}
	for _, st := range []step{{1, 1, 1, false}, {2, 2, 2, false}, {3, 3, 2, true}, {4, 5, 2, true}, {5, 6, 3, false}, {6, 7, 4, false}, {7, 8, 4, true}} {
		snap := loadSnapshot(t, fmt.Sprintf("growth/hit-%d.ms", st.file))
		want, err := parsed.Add(st.seq, st.hit, snap)
		if err != nil {
			t.Fatal(err)
		}
		var got *Diff
		if st.same {
			got, err = skipped.AddSame(st.seq, st.hit)
		} else {
			got, err = skipped.Add(st.seq, st.hit, snap)
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stop %d: diff (-Add +AddSame):\n%s", st.seq, diff)
		}
		if st.same && (got.DeltaBytes != 0 || len(got.Sites) != 0 || got.UnchangedSites == 0) {
			t.Errorf("stop %d: a repeat's diff %+v, want no change", st.seq, got)
		}
	}
	if diff := cmp.Diff(parsed.Suspects(), skipped.Suspects()); diff != "" {
		t.Errorf("suspects (-Add +AddSame):\n%s", diff)
	}
}

// A series remembers a site's changes in runs and draws its history on
// at most maxHistory points: a steady leak over 100,000 hits is one run,
// so that snapctl's memory does not grow with the stops (issue 23's
// promise, flat within 2 MiB from 1,000 to 100,000 stops), and its
// figures are those of every interval.
func TestSeriesFlatOverManyHits(t *testing.T) {
	t.Parallel()
	const hits = 100_000
	s := NewSeries("bp", Options{})
	for i := 0; i < hits; i++ {
		b := int64(16 * i)
		snap := buildSnap(t, fmt.Sprintf("%d %s", b, heapRoot), fmt.Sprintf(" %d f (s.c:1)", b), fmt.Sprintf("  %d main (s.c:99)", b))
		if _, err := s.Add(i+1, i+1, snap); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.stats) != 1 {
		t.Fatalf("%d sites, want 1", len(s.stats))
	}
	for key, st := range s.stats {
		if len(st.changes) != 1 {
			t.Errorf("site %s: %d runs of changes kept for a steady leak, want 1", key, len(st.changes))
		}
	}
	got := s.Suspects()
	if len(got) != 1 {
		t.Fatalf("%d suspects, want 1", len(got))
	}
	g := got[0]
	if g.Pattern != PatternSteady || g.GrowthPerHit != 16 || g.GrowthPerInterval != 16 || g.GrowingIntervals != hits-1 || g.TotalGrowth != 16*(hits-1) {
		t.Errorf("suspect %+v, want steady 16 B per hit over %d intervals", g, hits-1)
	}
	h := g.History
	if len(h) > maxHistory+1 || len(h) < maxHistory/2 {
		t.Fatalf("history of %d points, want at most %d and at least %d", len(h), maxHistory+1, maxHistory/2)
	}
	for i, p := range h {
		if p.Bytes != 16*int64(p.Seq-1) || (i > 0 && p.Seq <= h[i-1].Seq) {
			t.Fatalf("history point %d: %+v, want stop %d's %d B, in order", i, p, p.Seq, 16*(p.Seq-1))
		}
	}
	if h[0].Seq != 1 || h[len(h)-1].Seq != hits {
		t.Errorf("history from stop %d to %d, want 1 to %d", h[0].Seq, h[len(h)-1].Seq, hits)
	}
}

// A thinned history still reads each point's bytes right where runs of
// changes, single changes and intervals without a change alternate.
func TestSeriesHistoryThinned(t *testing.T) {
	const hits = 4500
	sizes := make([]int64, hits)
	for i := 1; i < hits; i++ {
		switch {
		case i%7 == 0:
			sizes[i] = sizes[i-1] // no change
		case i%11 == 0:
			sizes[i] = sizes[i-1] - 40
		default:
			sizes[i] = sizes[i-1] + 24
		}
	}
	s := seriesOf(t, map[int][]int64{1: sizes})
	got := s.Suspects()
	if len(got) != 1 {
		t.Fatalf("%d suspects, want 1", len(got))
	}
	h := got[0].History
	if len(h) > maxHistory+1 || h[len(h)-1].Seq != hits {
		t.Fatalf("history of %d points ending at stop %d, want at most %d ending at %d", len(h), h[len(h)-1].Seq, maxHistory+1, hits)
	}
	for _, p := range h {
		if p.Bytes != sizes[p.Seq-1] {
			t.Fatalf("stop %d: %d B, want %d", p.Seq, p.Bytes, sizes[p.Seq-1])
		}
	}
}
