package driver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// threadStartingGDB is a fakeGDB whose target starts a thread while it
// runs after the given continue.
type threadStartingGDB struct {
	*fakeGDB
	at, conts int
	cmds      []string // every command's name, in order
}

func (g *threadStartingGDB) Send(ctx context.Context, cmd string, args ...string) (*mi.Result, error) {
	g.cmds = append(g.cmds, cmd)
	if cmd == "-exec-continue" {
		g.conts++
		if g.conts == g.at {
			g.events <- mustRecord(g.t, `=thread-created,id="2",group-id="i1"`)
		}
	}
	return g.fakeGDB.Send(ctx, cmd, args...)
}

func (g *threadStartingGDB) SendBatch(ctx context.Context, cmds []mi.Command) ([]*mi.Result, []error) {
	res := make([]*mi.Result, len(cmds))
	errs := make([]error, len(cmds))
	for i, c := range cmds {
		res[i], errs[i] = g.Send(ctx, c.Name, c.Args...)
	}
	return res, errs
}

// A target with one thread keeps its thread list from stop to stop: gdb is
// asked again only after it announced a new thread, and every stop still
// records the thread with the stop's frame.
func TestThreadListAskedOnlyWhenItMayHaveChanged(t *testing.T) {
	fake := &threadStartingGDB{fakeGDB: newFakeGDB(t, hitRecord, hitRecord, hitRecord, `*stopped,reason="exited-normally"`), at: 2}
	s := scriptedSession(t, mustPlan(t, "threads: current\nbreakpoints:\n  - name: request\n    location: handle_request\n"), fake)

	fake.events <- mustRecord(t, hitRecord)
	if err := s.newStopLoop().loop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The listings: at the first stop, and at the third, after the thread
	// appeared while the target ran from the second.
	var listings []int
	stop := 0
	for _, c := range fake.cmds {
		switch c {
		case "-stack-list-frames":
			stop++
		case "-thread-info":
			listings = append(listings, stop)
		}
	}
	if len(listings) != 2 || listings[0] != 1 || listings[1] != 3 {
		t.Errorf("-thread-info at stops %v, want [1 3]", listings)
	}
	stops := spooled[runjson.Stop](t, s.rec.stops)
	if len(stops) != 4 {
		t.Fatalf("%d stops, want 4", len(stops))
	}
	for _, stop := range stops {
		if len(stop.Threads) != 1 || stop.Threads[0].TargetID != "Thread 42" || stop.Threads[0].Frame == nil ||
			stop.Threads[0].Frame.Function != "handle_request" || stop.Threads[0].Frame.Line != 23 || stop.Thread.TargetID != "Thread 42" {
			t.Errorf("stop %d: thread %+v, threads %+v", stop.Seq, stop.Thread, stop.Threads)
		}
	}
}

// The plan's threads on GDB/MI's stop path: how much thread state each
// stop of a worker thread records while main is blocked in read(2). The
// agent's path, snapctl run's own, is cmd/snapctl's
// TestBreakpointInWorkerWhileMainBlocked, with the same checks.
func TestRunThreadsModes(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../testdata/e2e/blocked.c")
	for _, p := range stopPaths {
		if !p.noAgent {
			continue
		}
		for _, mode := range []string{plan.ThreadsAll, plan.ThreadsCurrent, plan.ThreadsNone} {
			t.Run(p.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				pl := "threads: " + mode + "\nbreakpoints:\n  - name: request\n    location: handle_request\n"
				res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, pl, bin, "3")
				if err != nil {
					t.Fatal(err)
				}
				m := readManifest(t, res.Dir)
				if len(m.Stops) != 3 {
					t.Fatalf("%d stops, want 3", len(m.Stops))
				}
				for _, s := range m.Stops {
					if s.Thread.ID != "2" || s.Frame.Function != "handle_request" {
						t.Errorf("stop %d: thread %q at %v, want thread 2 at handle_request", s.Seq, s.Thread.ID, s.Frame)
					}
					var ids []string
					for _, th := range s.Threads {
						ids = append(ids, th.ID)
					}
					switch mode {
					case plan.ThreadsAll:
						if !slices.Equal(ids, []string{"1", "2"}) || s.Threads[0].Frame == nil {
							t.Errorf("stop %d: threads %+v, want main and the worker with frames", s.Seq, s.Threads)
						}
					case plan.ThreadsCurrent:
						if !slices.Equal(ids, []string{"2"}) || !strings.Contains(s.Thread.Details, "VgTs_Runnable") ||
							len(s.Backtrace) < 2 || s.Backtrace[1].Function != "worker" {
							t.Errorf("stop %d: thread %+v, threads %+v, backtrace %v, want the worker alone, its details and backtrace", s.Seq, s.Thread, s.Threads, s.Backtrace)
						}
					case plan.ThreadsNone:
						if len(ids) != 0 || len(s.Backtrace) != 0 || s.Thread.Details != "" {
							t.Errorf("stop %d: threads %+v, backtrace %v, thread %+v, want nothing but the id", s.Seq, s.Threads, s.Backtrace, s.Thread)
						}
					}
				}
			})
		}
	}
}
