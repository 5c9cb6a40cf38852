package heaptrack

import (
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// runMassif runs exe under the massif backend of snapctl (`snapctl run`,
// the binary at snapctl, built from this module) with a breakpoint at bp
// and returns the snapshot of every stop, with live blocks (monitor
// xtmemory).
func runMassif(t *testing.T, snapctl, exe, bp string, args ...string) []*snapshots.Snapshot {
	t.Helper()
	if _, err := exec.LookPath("valgrind"); err != nil {
		t.Skip("valgrind is not installed (Debian package valgrind)")
	}
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("breakpoints:\n  - name: stop\n    location: "+bp+"\n    keep_snapshots: all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	cmd := exec.Command(snapctl, append([]string{"run", "-q", "-o", run, plan, exe}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("snapctl run: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(run, "snapshots", "*.massif.gz"))
	sort.Strings(files)
	var snaps []*snapshots.Snapshot
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := snapshots.ReadHeap(z, name)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	return snaps
}

// fixtureSites returns the sites of a snapshot that lie in the fixture
// (file src), each as its text: the site and its callers in the fixture,
// with the live bytes and blocks.
func fixtureSites(s *snapshots.Snapshot, src string) map[string][2]int64 {
	out := map[string][2]int64{}
	var walk func(n *snapshots.Node, path []string)
	walk = func(n *snapshots.Node, path []string) {
		if n.Frame.File == src {
			path = append(path, snapshots.FrameString(n.Frame))
		}
		inFixture := false
		for _, c := range n.Children {
			if c.Frame.File == src || containsFile(c, src) {
				inFixture = true
				walk(c, path)
			}
		}
		if !inFixture && len(path) > 0 {
			k := strings.Join(path, " < ")
			f := out[k]
			out[k] = [2]int64{f[0] + n.Bytes, f[1] + n.Blocks}
		}
	}
	for _, site := range s.Tree.Children {
		if site.Frame.File == src {
			walk(site, nil)
		}
	}
	return out
}

func containsFile(n *snapshots.Node, src string) bool {
	for _, c := range n.Children {
		if c.Frame.File == src || containsFile(c, src) {
			return true
		}
	}
	return false
}

// TestSitesEqualMassif runs fixtures under massif (snapctl run) and
// natively under heaptrack with the same breakpoint: at every stop, every
// call site in the fixture has the same stack (function, file and line of
// each frame in the fixture), the same bytes and the same live blocks.
// sites.c has four threads; newsites.cpp allocates with new and new[],
// which valgrind replaces and heaptrack sees as malloc called from
// libstdc++.
func TestSitesEqualMassif(t *testing.T) {
	t.Parallel()
	// One snapctl for both fixtures, built as the tests are (with -race
	// when they are): each link of it is seconds of processor time.
	snapctl := testenv.BuildCommand(t, "../cmd/snapctl")
	for _, c := range []struct {
		src, bp string
		stops   int
		sites   int
	}{
		{"sites.c", "round_done", 3, 3},
		{"newsites.cpp", "step", 3, 2},
	} {
		t.Run(c.src, func(t *testing.T) {
			t.Parallel()
			exe := compile(t, c.src)
			massif := runMassif(t, snapctl, exe, c.bp, itoa(c.stops))
			native := runNative(t, exe, c.bp, itoa(c.stops))
			if len(massif) != c.stops || len(native) != c.stops+1 {
				t.Fatalf("%d massif stops and %d native snapshots, want %d and %d with the end", len(massif), len(native), c.stops, c.stops)
			}
			for i := range massif {
				// Through the file snapctl would keep for the stop.
				var b bytes.Buffer
				if err := WriteXtmemory(&b, native[i], exe); err != nil {
					t.Fatal(err)
				}
				kept, err := snapshots.ReadHeap(&b, "native.ms")
				if err != nil {
					t.Fatal(err)
				}
				m, h := fixtureSites(massif[i], c.src), fixtureSites(kept, c.src)
				if len(m) != c.sites {
					t.Errorf("stop %d: massif has %d fixture stacks, want %d: %v", i, len(m), c.sites, m)
				}
				for k, v := range m {
					if h[k] != v {
						t.Errorf("stop %d: %s: heaptrack %v, massif %v (bytes, blocks)", i, k, h[k], v)
					}
				}
				for k, v := range h {
					if _, ok := m[k]; !ok {
						t.Errorf("stop %d: %s %v under heaptrack only", i, k, v)
					}
				}
			}
		})
	}
}
