package heaptrack

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/snapshots"
)

func needTools(t *testing.T) Tools {
	t.Helper()
	tools, err := FindTools("")
	if err != nil {
		t.Skip(err)
	}
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb is not installed (Debian package gdb)")
	}
	return tools
}

// compile builds a C fixture from testdata for gdb and valgrind: no
// optimization, no instructions valgrind 3.19 lacks.
func compile(t *testing.T, src string) string {
	t.Helper()
	cc := "gcc"
	if strings.HasSuffix(src, ".cpp") {
		cc = "g++"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skip(cc + " is not installed")
	}
	exe := filepath.Join(t.TempDir(), strings.TrimSuffix(strings.TrimSuffix(src, ".c"), ".cpp"))
	abs, _ := filepath.Abs(filepath.Join("testdata", src))
	if out, err := exec.Command(cc, "-g", "-O0", "-march=x86-64", "-pthread", "-o", exe, abs).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s: %v\n%s", src, err, out)
	}
	return exe
}

// siteFigures are a snapshot's live bytes and blocks per allocation call
// site (the root's children), by function name.
func siteFigures(s *snapshots.Snapshot) map[string][2]int64 {
	out := map[string][2]int64{}
	for _, c := range s.Tree.Children {
		f := out[c.Frame.Function]
		out[c.Frame.Function] = [2]int64{f[0] + c.Bytes, f[1] + c.Blocks}
	}
	return out
}

// wantSites are sites.c's figures after k rounds (testdata/sites.c).
func wantSites(k int64) map[string][2]int64 {
	return map[string][2]int64{
		"keep_small":  {102 * k, 4 * k},
		"keep_table":  {4000 * k, 4 * k},
		"grow_buffer": {256 * k, 4},
	}
}

func checkSites(t *testing.T, what string, s *snapshots.Snapshot, want map[string][2]int64) {
	t.Helper()
	got := siteFigures(s)
	for fn, w := range want {
		if got[fn] != w {
			t.Errorf("%s: site %s has %d bytes in %d blocks, want %d in %d", what, fn, got[fn][0], got[fn][1], w[0], w[1])
		}
	}
	if f, ok := got["scratch"]; ok {
		t.Errorf("%s: scratch, freed at once, has %d bytes in %d blocks", what, f[0], f[1])
	}
}

// runSites runs sites.c for rounds rounds, stopping at round_done.
func runSites(t *testing.T, rounds int) []*snapshots.Snapshot {
	return runNative(t, compile(t, "sites.c"), "round_done", itoa(rounds))
}

// runNative runs exe natively under gdb with heaptrack's preload library,
// cuts the stream at every stop at breakpoint bp and returns the
// snapshots, the last one cut as the program calls exit: the heap it
// ends with, as a stop of snapctl's cuts it (the library stops
// recording in the exit handlers that run next: docs/facts.md, fact
// 126).
func runNative(t *testing.T, exe, bp string, args ...string) []*snapshots.Snapshot {
	t.Helper()
	tools := needTools(t)
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
	g := startGDB(t, tools.Env(rec.FIFO()), append([]string{exe}, args...)...)
	g.send("-break-insert " + bp)
	g.send("-break-insert -f exit")
	g.send("-exec-run")
	var snaps []*snapshots.Snapshot
	var target *Target
	for {
		stop := g.waitStopped()
		if strings.Contains(stop, `reason="exited`) {
			break
		}
		if !strings.Contains(stop, `reason="breakpoint-hit"`) {
			t.Fatalf("unexpected stop: %s", stop)
		}
		if target == nil {
			if target, err = OpenTarget(g.pid(), layout); err != nil {
				t.Fatal(err)
			}
			defer target.Close()
		}
		for {
			s, err := cut(ctx, rec, target, len(snaps))
			var busy *BusyError
			if errors.As(err, &busy) {
				// The owner runs alone to its unlock and out of it.
				// A lock with no owner yet (fact 67) is the
				// driver's to handle (native's letOut and its test).
				t.Logf("stop %d: %v; letting it out", len(snaps), err)
				if busy.TID == 0 {
					t.Fatalf("stop %d: heaptrack's lock is held with no owner", len(snaps))
				}
				g.letOutOf(busy.TID, target.LockAddr())
				continue
			}
			if err != nil {
				t.Fatalf("stop %d: %v", len(snaps), err)
			}
			snaps = append(snaps, s)
			break
		}
		g.send("-exec-continue")
	}
	return snaps
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestCutIsExact runs four threads that leak known sizes from known call
// sites, round after round, and cuts heaptrack's stream at each stop
// between rounds: every site has exactly the bytes (as requested) and
// blocks of the rounds before the stop, none of the round after, which
// the threads make as soon as the program goes on.
func TestCutIsExact(t *testing.T) {
	t.Parallel()
	const rounds = 5
	snaps := runSites(t, rounds)
	if len(snaps) != rounds+1 {
		t.Fatalf("%d snapshots, want %d stops and the end", len(snaps), rounds+1)
	}
	for i, s := range snaps[:rounds] {
		checkSites(t, "stop "+itoa(i), s, wantSites(int64(i+1)))
		if !s.Blocks || s.Tree.Frame.Function != RootName {
			t.Errorf("stop %d: blocks %v, root %q", i, s.Blocks, s.Tree.Frame.Function)
		}
	}
	// At the end the threads' buffers, returned to pthread_join and never
	// freed, are still live.
	checkSites(t, "end", snaps[rounds], wantSites(rounds))
}

// TestSnapshotStacks checks a site's stack: function, file and line of
// each frame, innermost first, as massif names them.
func TestSnapshotStacks(t *testing.T) {
	t.Parallel()
	snaps := runSites(t, 1)
	var small *snapshots.Node
	for _, c := range snaps[0].Tree.Children {
		if c.Frame.Function == "keep_small" {
			small = c
		}
	}
	if small == nil {
		t.Fatal("no keep_small site")
	}
	if f := small.Frame; f.File != "sites.c" || f.Line != 19 {
		t.Errorf("keep_small frame %+v, want sites.c:19", f)
	}
	if len(small.Children) != 1 || small.Children[0].Frame.Function != "worker" || small.Children[0].Frame.Line != 35 {
		t.Fatalf("keep_small is called from %+v, want worker at sites.c:35", small.Children)
	}
}
