package heaptrack

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCutAtExitGroup: a program that ends by _exit never writes out
// heaptrack's last buffer, so the stream's end misses its last events;
// a cut at the exit_group system call has them all.
func TestCutAtExitGroup(t *testing.T) {
	t.Parallel()
	tools := needTools(t)
	exe := compile(t, "quickexit.c")
	layout, err := ReadLayout(tools.Preload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec, err := Start(tools, filepath.Join(t.TempDir(), "heaptrack.fifo"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	g := startGDB(t, tools.Env(rec.FIFO()), exe)
	g.send("-break-insert mark")
	g.send(`-interpreter-exec console "catch syscall exit_group"`)
	g.send("-exec-run")
	var target *Target
	var blocks []int64
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
		s, err := cut(ctx, rec, target, i)
		for b := (*BusyError)(nil); errors.As(err, &b); {
			// heaptrack's own thread, which writes a timestamp every
			// few milliseconds, was stopped inside the library: as
			// snapctl does, it is let out alone before the cut.
			t.Logf("stop %d: thread %d let out of heaptrack first", i, b.TID)
			g.letOutOf(b.TID, target.LockAddr())
			s, err = cut(ctx, rec, target, i)
		}
		if err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
		blocks = append(blocks, siteFigures(s)["keep"][1])
		g.send("-exec-continue")
	}
	if len(blocks) != 2 || blocks[0] != 3 || blocks[1] != 5 {
		t.Errorf("keep's blocks at mark and at exit_group: %v, want [3 5]", blocks)
	}
}
