package heaptrack

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/snapshots"
)

// TestAttach injects heaptrack into sites.c once it has run a round (as
// `heaptrack -p` does: gdb calls dlmopen on libheaptrack_inject.so, then
// heaptrack_inject(FIFO)), cuts the stream at the later stops and stops
// the library (heaptrack_stop) before the program's last round. What was
// allocated before the injection is unknown: a site counts only the
// blocks allocated since, and a block allocated before and given to
// realloc after counts at its whole new size, its free being dropped.
// After heaptrack_stop the program runs on with the library idle.
func TestAttach(t *testing.T) {
	t.Parallel()
	tools := needTools(t)
	exe := compile(t, "sites.c")
	layout, err := ReadLayout(tools.Inject)
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
	const rounds = 5
	g := startGDB(t, nil, exe, itoa(rounds))
	g.send("-break-insert round_done")
	g.send("-exec-run")
	var target *Target
	var snaps []*snapshots.Snapshot
	for stop := 0; ; stop++ {
		s := g.waitStopped()
		if strings.Contains(s, `reason="exited`) {
			break
		}
		switch {
		case stop == 0:
			for _, c := range tools.InjectCommands(rec.FIFO()) {
				g.console(c)
			}
			if target, err = OpenTarget(g.pid(), layout); err != nil {
				t.Fatal(err)
			}
			defer target.Close()
		case stop < rounds-1:
			for {
				snap, err := cut(ctx, rec, target, stop)
				var b *BusyError
				if errors.As(err, &b) {
					g.letOutOf(b.TID, target.LockAddr())
					continue
				}
				if err != nil {
					t.Fatalf("stop %d: %v", stop, err)
				}
				snaps = append(snaps, snap)
				break
			}
		default:
			g.console(StopCommand)
		}
		g.send("-exec-continue")
	}
	for i, s := range snaps {
		k := int64(i + 1) // rounds since the injection
		checkSites(t, "stop "+itoa(i+1), s, map[string][2]int64{
			"keep_small":  {102 * k, 4 * k},
			"keep_table":  {4000 * k, 4 * k},
			"grow_buffer": {256 * (k + 1), 4},
		})
	}
}
