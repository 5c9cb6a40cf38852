package heaptrack

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCutWhileThreadsAllocate stops a program whose three threads
// allocate without pause, at any point of their work, and checks each
// site against the program's own count of the blocks it holds: thread t's
// site has exactly counts[t] blocks, or one more when the thread was
// stopped between malloc and its count. A cut by time, or one that missed
// the events still in heaptrack's buffers, would be off by hundreds. A
// thread stopped while it wrote an event (BusyError) is let out of
// heaptrack's lock alone first.
func TestCutWhileThreadsAllocate(t *testing.T) {
	t.Parallel()
	tools := needTools(t)
	exe := compile(t, "churn.c")
	layout, err := ReadLayout(tools.Preload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rec, err := Start(tools, filepath.Join(t.TempDir(), "heaptrack.fifo"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	const checks = 8
	g := startGDB(t, tools.Env(rec.FIFO()), exe, fmt.Sprint(checks))
	g.send("-break-insert check")
	g.send("-exec-run")
	var target *Target
	busy := 0
	for i := 0; ; i++ {
		stop := g.waitStopped()
		if strings.Contains(stop, `reason="exited`) {
			break
		}
		if target == nil {
			if target, err = OpenTarget(g.pid(), layout); err != nil {
				t.Fatal(err)
			}
			defer target.Close()
		}
		var got map[string][2]int64
		for {
			s, err := cut(ctx, rec, target, i)
			var b *BusyError
			if errors.As(err, &b) {
				busy++
				g.letOutOf(b.TID, target.LockAddr())
				continue
			}
			if err != nil {
				t.Fatalf("stop %d: %v", i, err)
			}
			got = siteFigures(s)
			break
		}
		total := int64(0)
		for th := 0; th < 3; th++ {
			total += g.value(fmt.Sprintf("counts[%d]", th))
		}
		c := got["churn_alloc"]
		// Each thread may hold one block it has not counted yet.
		if c[1] < total || c[1] > total+3 {
			t.Errorf("stop %d: churn_alloc has %d blocks, the threads count %d", i, c[1], total)
		}
		t.Logf("stop %d: churn_alloc %d blocks, counted %d; churn_temp %v", i, c[1], total, got["churn_temp"])
		g.send("-exec-continue")
	}
	t.Logf("%d cuts found a thread inside heaptrack", busy)
}
