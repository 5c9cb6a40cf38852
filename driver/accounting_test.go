package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// TestInterruptTakesNoStop: after the run's context ends (the first
// Ctrl-C), no stop is taken, on every backend and stop path, while four
// threads at a time start, hit the breakpoint and exit. Only a stop under
// way when the context ended may end after it. Before, gdb's agent went on
// measuring until the interrupt reached the target through vgdb: about 3 s
// and 250 snapshots under massif here.
//
// The interrupt is answered: the agent stops the program at the next hit
// once the run ends (a hit it declined resumed the program, and valgrind's
// gdbserver, which reports the interrupt as the hit of a program that
// hits all the time, never stopped it: 3 s of resent interrupts), and
// valgrind ends on snapctl's SIGTERM (a fatal signal no longer waits for
// a gdb to connect: 2 s of grace, then SIGKILL).
//
// The native backend's agent is left out: gdb 13 aborts on its stops of
// several threads (x86_linux_update_debug_registers: "Assertion
// `lwp_is_stopped (lwp)' failed"), a fault of that stop path.
func TestInterruptTakesNoStop(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	bin := testenv.Build(t, "testdata/spin.c")
	for _, backend := range BackendNames() {
		for _, p := range stopPaths {
			t.Run(backend+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				testenv.NoLeftovers(t)
				dir, planPath := writePlan(t, "breakpoints:\n  - name: work\n    location: work\n")
				out := filepath.Join(dir, "run")
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				done := make(chan error, 1)
				go func() {
					_, err := Run(ctx, Options{Timeouts: Timeouts{ManifestEvery: 100 * time.Millisecond}, PlanPath: planPath, Binary: bin, OutDir: out, Measure: Measure{Backend: backend}, NoAgent: p.noAgent, Trace: true,
						Env: []string{testenv.ScopeEnv(t)}})
					done <- err
				}()
				for deadline := testenv.NewDeadline(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
					var m runjson.Manifest
					if data, err := os.ReadFile(filepath.Join(out, manifestFile)); err == nil && json.Unmarshal(data, &m) == nil && len(m.Stops) >= 20 {
						break
					}
					select {
					case err := <-done:
						t.Fatalf("the run ended (%v) before its 20th stop", err)
					default:
					}
					if deadline.Passed() {
						t.Fatal("no 20 stops in 2 minutes")
					}
				}
				cancelled := time.Now()
				cancel()
				if err := <-done; !errors.Is(err, ErrInterrupted) {
					t.Errorf("Run = %v, want ErrInterrupted", err)
				}
				m := readManifest(t, out)
				// The halt reaches the agent through a file that a goroutine
				// creates when the context ends: under -race on a loaded
				// machine that took up to 11 ms (3 stops of this loop),
				// and up to 39 ms beside two busy loops, so the allowance
				// is stretched by the load as every wait of the tests is.
				// Stops that start later than that allowance are taken
				// after the halt.
				haltLatency := testenv.Scaled(20 * time.Millisecond)
				var after []string
				for _, st := range m.Stops {
					at, err := time.Parse(time.RFC3339Nano, st.Time)
					if err != nil {
						t.Fatalf("stop %d: %v", st.Seq, err)
					}
					late := at.After(cancelled.Add(haltLatency))
					if late && len(after) < 5 {
						after = append(after, fmt.Sprintf("%d at %s", st.Seq, st.Time))
					} else if late {
						after = append(after, "...")
					}
				}
				if m.Status != runjson.StatusInterrupt || len(after) > 1 {
					t.Errorf("status %s, %d stops, %d after the interrupt at %s: %v", m.Status, len(m.Stops), len(after), runjson.Stamp(cancelled), after[:min(len(after), 6)])
				}
				trace, err := os.ReadFile(filepath.Join(out, traceFile))
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(trace, []byte("while the target is running")) {
					t.Errorf("the program still ran when gdb was told to exit: no stop answered the interrupt; the transcript ends\n%s", trace[max(0, len(trace)-2000):])
				}
				if backend == "native" {
					return
				}
				if log, err := os.ReadFile(filepath.Join(out, valgrindLog)); err != nil || !bytes.Contains(log, []byte("Process terminating with default action of signal 15 (SIGTERM)")) {
					t.Errorf("valgrind did not end on SIGTERM (%v): its log ends\n%s", err, log[max(0, len(log)-1000):])
				}
			})
		}
	}
}

// --force removes what a snapctl killed outright leaves in a run
// directory, besides its run.json and snapshots: the snapshots run.json
// did not list yet, under their hidden names, the spools, and a run.json
// half written; files snapctl does not write stay.
func TestForceClearsKilledRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := prepareRunDir(dir, false); err != nil {
		t.Fatal(err)
	}
	s := &session{out: runOut{dir: dir}}
	left := []string{
		filepath.Join(dir, manifestFile),
		filepath.Join(dir, snapshotName(1, "request", 1, runjson.PhaseHit)),
		unlistedPath(s.out.dir, snapshotName(2, "request", 2, runjson.PhaseHit)),
		filepath.Join(dir, snapshotDir, ".0003"+snapshotExt),
		filepath.Join(dir, ".stops-123.jsonl"), filepath.Join(dir, ".events-4.jsonl"), filepath.Join(dir, ".diffs-56.jsonl"),
		filepath.Join(dir, ".run.json.tmp-789"), filepath.Join(dir, "report.html"), filepath.Join(dir, ".report.html.tmp-1"),
	}
	mine := []string{filepath.Join(dir, ".notes"), filepath.Join(dir, snapshotDir, ".notes")}
	for _, p := range append(mine, left...) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := prepareRunDir(dir, true); err != nil {
		t.Fatalf("--force: %v", err)
	}
	for _, p := range left {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--force kept %s: %v", p, err)
		}
	}
	for _, p := range mine {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("--force removed %s, which snapctl did not write: %v", p, err)
		}
	}
}

// report.html draws at most timelinePoints stops of a breakpoint, evenly
// spaced, its first and last among them, however many it made.
func TestTimelineThinned(t *testing.T) {
	for _, n := range []int{1, timelinePoints, timelinePoints + 1, 10_007} {
		th := &thinned{step: 1}
		for seq := 1; seq <= n; seq++ {
			th.add(snapshots.StopPoint{Seq: seq})
		}
		pts := th.all()
		if len(pts) > timelinePoints+1 || pts[0].Seq != 1 || pts[len(pts)-1].Seq != n {
			t.Fatalf("%d stops: %d points, from %d to %d", n, len(pts), pts[0].Seq, pts[len(pts)-1].Seq)
		}
		for i := 1; i < len(pts)-1; i++ {
			if pts[i].Seq-pts[i-1].Seq != th.step {
				t.Fatalf("%d stops: points %d and %d are %d apart, want %d", n, pts[i-1].Seq, pts[i].Seq, pts[i].Seq-pts[i-1].Seq, th.step)
			}
		}
		if n <= timelinePoints && len(pts) != n {
			t.Errorf("%d stops: %d points, want all", n, len(pts))
		}
	}
}

// A backlog of the agent's records larger than one batch (the loop was
// busy while the agent went on) is read in batches, a record cut by a
// batch's end whole in the next, every stop kept in order.
func TestReadAgentBacklog(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n")
	s := scriptedSession(t, plan, newFakeGDB(t))
	s.rec.order[0].agent = true
	records := openAgentRecords(t, s)
	var text strings.Builder
	const n = 1500
	for hit := 1; hit <= n; hit++ {
		snap := filepath.Join(s.priv.dir, fmt.Sprintf("%d.massif", hit))
		massif := fmt.Sprintf("desc: --threshold=0\ncmd: ./leak\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n"+
			"n1: %d (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n n0: %d 0x1091E0: keep (leak.c:15)\n", hit, 16*hit, 16*hit, 16*hit)
		if err := os.WriteFile(snap, []byte(massif), 0o600); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&text, `{"bp":"1","hit":%d,"time":1790000000.25,"snapshot":%q,"thread":{"id":"1"},"frame":{"func":"handle_request","file":"leak.c","line":23},"done":false}`+"\n", hit, snap)
	}
	if text.Len() < 2*agentBatch {
		t.Fatalf("%d bytes of records: not two batches", text.Len())
	}
	appendRecords(t, records, text.String())
	if err := s.agent.read(); err != nil {
		t.Fatal(err)
	}
	stops := spooled[runjson.Stop](t, s.rec.stops)
	if len(stops) != n {
		t.Fatalf("%d stops, want %d", len(stops), n)
	}
	for i, st := range stops {
		if st.Seq != i+1 || st.Hit != i+1 || st.HeapBytes != int64(16*(i+1)) {
			t.Fatalf("stop %d: seq %d, hit %d, heap %d", i+1, st.Seq, st.Hit, st.HeapBytes)
		}
	}
}

// A spool's view reads the records written when it was made, through a
// file descriptor of its own, while the spool goes on taking records and
// reading them itself; closing the view leaves the spool's file.
func TestSpoolView(t *testing.T) {
	sp := newSpool(".test-*.jsonl")
	sp.dir = t.TempDir()
	defer sp.close()
	for i := range 1000 {
		sp.add(i)
	}
	v, err := sp.view()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1000; i < 3000; i++ {
		sp.add(i)
	}
	read := func(s *spool) []string {
		var out []string
		if err := s.each(func(line []byte) error { out = append(out, string(line)); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := read(v)
	if len(got) != 1000 || got[0] != "0" || got[999] != "999" {
		t.Errorf("the view read %d records, %v...%v; want 0 to 999", len(got), got[:min(len(got), 1)], got[max(len(got)-1, 0):])
	}
	v.closeView()
	sp.add(3000)
	if all := read(sp); len(all) != 3001 || all[3000] != "3000" {
		t.Errorf("the spool holds %d records after its view, want 3001", len(all))
	}
	empty, err := newSpool("x").view()
	if err != nil || empty.each(func([]byte) error { t.Error("a record in an empty view"); return nil }) != nil {
		t.Errorf("view of an empty spool: %v", err)
	}
}
