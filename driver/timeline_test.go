package driver

import (
	"runtime"
	"testing"

	"github.com/snapctl/snapctl/runjson"
)

// Reading a long run's stops back for report.html decodes whole only the
// stops the page draws (at most timelinePoints a breakpoint, thinned as
// they come): the others make no garbage, so that what the end of a run
// allocates does not grow with its stops, which a garbage collector
// behind on a loaded machine let into snapctl's peak (docs/facts.md,
// fact 136).
func TestTimelineGarbageBounded(t *testing.T) {
	plan := mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n  - name: flush\n    location: flush_cache\n")
	// spool adds stops up to the nth to s's.
	spool := func(s *session, n int) {
		for seq := s.rec.stops.n + 1; seq <= n; seq++ {
			bp, hit := "request", (seq+1)/2
			if seq%2 == 0 {
				bp = "flush"
			}
			in, free := int64(1000*seq), int64(seq)
			s.rec.stops.add(&runjson.Stop{Seq: seq, Breakpoint: bp, Hit: hit, Phase: runjson.PhaseHit, Time: "2026-11-29T08:00:00.000Z",
				Thread: runjson.Thread{ID: "3", TargetID: "Thread 4242"}, Frame: runjson.Frame{Function: "handle_request", File: "server.c", Line: 71},
				Backtrace: []runjson.Frame{{Function: "handle_request", File: "server.c", Line: 71}, {Function: "main", File: "server.c", Line: 200}},
				HeapBytes: int64(16 * seq), Memory: &runjson.Memory{RSSBytes: int64(4096 * seq), HeapInUseBytes: &in, HeapFreeBytes: &free}})
		}
	}
	// One run read back at 10,000 stops and again at 30,000.
	run := scriptedSession(t, plan, newFakeGDB(t))
	allocs := func(n int) uint64 {
		spool(run, n)
		return allocsOfOne(func() {
			pts, _, err := run.timeline()
			if err != nil {
				t.Fatal(err)
			}
			// Each breakpoint's first and last stop are drawn, at most
			// timelinePoints+1 of its stops, with their figures.
			if len(pts) > 2*(timelinePoints+1) || pts[0].Seq != 1 || pts[len(pts)-1].Seq != n {
				t.Fatalf("%d stops: %d points, from %d to %d", n, len(pts), pts[0].Seq, pts[len(pts)-1].Seq)
			}
			last := pts[len(pts)-1]
			if last.Breakpoint != "flush" || last.Hit != n/2 || last.Thread != "3 (Thread 4242)" || last.HeapBytes != int64(16*n) ||
				last.Memory == nil || last.Memory.RSSBytes != int64(4096*n) || *last.Memory.HeapInUseBytes != int64(1000*n) || *last.Memory.HeapFreeBytes != int64(n) {
				t.Fatalf("%d stops: the last point reads %+v", n, last)
			}
		})
	}
	// What the first reading of any run allocates once (the decoders'
	// caches of the types) is left out, as testing.AllocsPerRun leaves
	// it out by reading once before it counts; read here from a run of
	// a few stops rather than twice from each long one.
	warm := scriptedSession(t, plan, newFakeGDB(t))
	spool(warm, 10)
	if _, _, err := warm.timeline(); err != nil {
		t.Fatal(err)
	}
	small, large := allocs(10_000), allocs(30_000)
	// 20,000 more stops: fewer than one allocation each (only the points
	// drawn of them allocate, a few each, and each thinning halves how
	// many of the stops that follow are drawn); before, 17 each.
	if more := float64(large) - float64(small); more > 20_000 {
		t.Errorf("reading 30,000 stops back made %d allocations, 10,000 stops %d: %.1f for each stop more", large, small, more/20_000)
	}
	t.Logf("allocations: %d for 10,000 stops, %d for 30,000", small, large)
}

// allocsOfOne counts the heap allocations of one call of f, with one
// processor, as testing.AllocsPerRun counts them, but without the call
// before it that AllocsPerRun makes to warm up: the caller warms up.
func allocsOfOne(f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}
