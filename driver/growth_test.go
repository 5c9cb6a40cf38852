package driver

import (
	"bytes"
	"strings"
	"testing"

	"strconv"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// suspectFigures is what the growth tests compare of a suspect.
type suspectFigures struct {
	Site                       string
	Pattern                    string
	PerHit, PerInterval, Total int64
	BlocksPerHit               float64
	TotalBlocks                int64
	BytesPerBlock              int64
	Growing, Intervals, Hits   int
	Library                    string
}

func figuresOf(sus []snapshots.Suspect) []suspectFigures {
	out := []suspectFigures{}
	for _, s := range sus {
		f := suspectFigures{Site: snapshots.FrameString(s.Frame), Pattern: s.Pattern, PerHit: s.GrowthPerHit,
			PerInterval: s.GrowthPerInterval, Total: s.TotalGrowth, Growing: s.GrowingIntervals, Intervals: s.Intervals, Hits: s.Hits}
		if s.BlocksPerHit != nil {
			f.BlocksPerHit = *s.BlocksPerHit
		}
		if s.TotalBlocks != nil {
			f.TotalBlocks = *s.TotalBlocks
		}
		if s.BytesPerBlock != nil {
			f.BytesPerBlock = *s.BytesPerBlock
		}
		var lib []string
		for _, l := range s.Library {
			lib = append(lib, l.Function)
		}
		f.Library = strings.Join(lib, " ")
		out = append(out, f)
	}
	return out
}

// Every allocation of wrapper.c goes through xalloc: its two leaking
// callers are the suspects, with xalloc among their library frames, and
// with every: 2 the growth per hit is half the growth per interval.
func TestRunWrapperEveryTwo(t *testing.T) {
	t.Parallel()
	const src = "testdata/wrapper.c"
	bin := testenv.Build(t, src)
	session, token := testenv.LineOf(t, src, "leak: session"), testenv.LineOf(t, src, "leak: token")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n    every: 2\n", bin, "9")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			var hits []int
			for _, s := range m.Stops {
				hits = append(hits, s.Hit)
			}
			if diff := cmp.Diff([]int{1, 3, 5, 7, 9}, hits); diff != "" {
				t.Fatalf("stops' hits (-want +got):\n%s", diff)
			}
			want := []suspectFigures{
				{Site: "add_session (wrapper.c:" + strconv.Itoa(session) + ")", Pattern: "steady", PerHit: 48, PerInterval: 96, Total: 384,
					BlocksPerHit: 1, TotalBlocks: 8, BytesPerBlock: 48, Growing: 4, Intervals: 4, Hits: 8, Library: "xalloc"},
				{Site: "add_token (wrapper.c:" + strconv.Itoa(token) + ")", Pattern: "steady", PerHit: 16, PerInterval: 32, Total: 128,
					BlocksPerHit: 1, TotalBlocks: 8, BytesPerBlock: 16, Growing: 4, Intervals: 4, Hits: 8, Library: "xalloc"},
			}
			if diff := cmp.Diff(want, figuresOf(m.Suspects)); diff != "" {
				t.Errorf("suspects (-want +got):\n%s", diff)
			}
			// Each interval: +96 B in 2 blocks at add_session, +32 B in 2
			// blocks at add_token; the freed scratch buffer never shows.
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
				wantSites := []site{
					{"add_session (wrapper.c:" + strconv.Itoa(session) + ")", 48 * n, 48 * (n + 2), 96, snapshots.SiteBlocks{BeforeBlocks: n, AfterBlocks: n + 2, DeltaBlocks: 2}},
					{"add_token (wrapper.c:" + strconv.Itoa(token) + ")", 16 * n, 16 * (n + 2), 32, snapshots.SiteBlocks{BeforeBlocks: n, AfterBlocks: n + 2, DeltaBlocks: 2}},
				}
				if diff := cmp.Diff(wantSites, got); diff != "" {
					t.Errorf("diff %d (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// Two snapshots make one interval: its growth is reported, marked as
// seen in a single interval.
func TestRunTwoSnapshots(t *testing.T) {
	t.Parallel()
	const src = "testdata/wrapper.c"
	bin := testenv.Build(t, src)
	session, token := testenv.LineOf(t, src, "leak: session"), testenv.LineOf(t, src, "leak: token")
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n    every: 2\n", bin, "3")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	want := []suspectFigures{
		{Site: "add_session (wrapper.c:" + strconv.Itoa(session) + ")", Pattern: "single-interval", PerHit: 48, PerInterval: 96, Total: 96,
			BlocksPerHit: 1, TotalBlocks: 2, BytesPerBlock: 48, Growing: 1, Intervals: 1, Hits: 2, Library: "xalloc"},
		{Site: "add_token (wrapper.c:" + strconv.Itoa(token) + ")", Pattern: "single-interval", PerHit: 16, PerInterval: 32, Total: 32,
			BlocksPerHit: 1, TotalBlocks: 2, BytesPerBlock: 16, Growing: 1, Intervals: 1, Hits: 2, Library: "xalloc"},
	}
	if diff := cmp.Diff(want, figuresOf(m.Suspects)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
}

// A std::vector that only grows doubles its buffer on ever rarer hits: a
// stepwise suspect. The scratch buffer next to it, grown by realloc over
// the first four calls and then reused, is not one.
func TestRunStepwiseVector(t *testing.T) {
	t.Parallel()
	const src = "testdata/vector.cpp"
	bin := testenv.Build(t, src)
	push := testenv.LineOf(t, src, "grows in steps")
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n", bin, "20")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	// At hit 20, 19 records are in a buffer of 32: 1024 bytes in one
	// block, grown in the intervals ending at hits 2, 3, 4, 6, 10 and 18.
	got := figuresOf(m.Suspects)
	for i := range got {
		got[i].Library = ""
	}
	want := []suspectFigures{
		{Site: "handle_request(int) (vector.cpp:" + strconv.Itoa(push) + ")", Pattern: "stepwise", PerHit: 54, PerInterval: 54, Total: 1024,
			BlocksPerHit: 0.05, TotalBlocks: 1, BytesPerBlock: 1024, Growing: 6, Intervals: 19, Hits: 19},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("suspects (-want +got):\n%s", diff)
	}
	// The verdict names the vector's capacity and its remedy.
	var text bytes.Buffer
	if err := WriteText(&text, res, snapshots.RenderOptions{MaxSites: 10, MaxFrames: 12, MaxDiffs: 3}); err != nil {
		t.Fatal(err)
	}
	verdict, _, _ := strings.Cut(text.String(), "\n")
	if !strings.Contains(verdict, "; it is a std::vector's buffer growing in steps (_M_realloc_insert): a vector keeps its capacity after clear()") || !strings.Contains(verdict, "shrink_to_fit()") {
		t.Errorf("the verdict does not name the vector's capacity: %s", verdict)
	}
	// So do report.md and report.html, at the suspect.
	md, html := testenv.Reports(t, res.Dir)
	note := "it is a std::vector's buffer growing in steps (_M_realloc_insert): a vector keeps its capacity after clear(), so one cleared and refilled holds its largest size for good; shrink_to_fit() (or swapping with an empty vector) returns it."
	if want := "- Suspect 1, <code>handle_request(int)</code> vector.cpp:" + strconv.Itoa(push) + ": " + note + "\n"; !strings.Contains(md, want) {
		t.Errorf("report.md does not name the vector's capacity (want %q):\n%s", want, md)
	}
	if want := `<p class="note">` + strings.ReplaceAll(note, "'", "&#39;") + `</p>`; !strings.Contains(html, want) {
		t.Errorf("report.html does not name the vector's capacity (want %q)", want)
	}
}
