package memcheck_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const roundPlan = "backend: memcheck\nbreakpoints:\n  - name: round\n    location: round_done\n"

// run runs plan on binary with args under the memcheck backend, its
// processes marked as the test's and checked for leftovers, and returns
// the run and its run.json as a reader finds it.
func run(t *testing.T, opts driver.Options, planText, binary string, args ...string) (*driver.Result, *runjson.Manifest, error) {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	testenv.NoLeftovers(t)
	dir := t.TempDir()
	opts.PlanPath = filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(opts.PlanPath, []byte(planText), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Binary, opts.Args, opts.OutDir = binary, args, filepath.Join(dir, "run dir")
	opts.Env = append(opts.Env, testenv.ScopeEnv(t))
	res, err := driver.Run(context.Background(), opts)
	if res == nil {
		t.Fatalf("no run: %v", err)
	}
	m, rerr := runjson.Read(context.Background(), res.Dir)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return res, m, err
}

// kind is a standing's kind as the test compares it.
type kind struct {
	Bytes, Blocks, BytesPerHit int64
	BlocksPerHit               float64
}

func kindOf(k snapshots.StandingKind) kind {
	return kind{k.Bytes, k.Blocks, k.BytesPerHit, k.BlocksPerHit}
}

// The bar: two sites grow by the same 640 B (20 blocks of 32 B)
// per round, served by 4 worker threads started and joined each round.
// lose() drops its blocks, keep() links them into the global registry.
// memcheck says the first is definitely lost and the second still
// reachable, held by registry, with the exact bytes and blocks per hit of
// each kind, on both stop paths.
func TestMemcheckLostAndHeld(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/reach.c", "-pthread")
	src := "testdata/reach.c"
	lost, kept, holder := testenv.LineOf(t, src, "/* lost */"), testenv.LineOf(t, src, "/* kept */"), testenv.LineOf(t, src, "/* the holder */")
	for _, p := range []struct {
		name    string
		noAgent bool
	}{{"agent", false}, {"mi", true}} {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, m, err := run(t, driver.Options{NoAgent: p.noAgent}, roundPlan, bin, "4")
			if err != nil {
				t.Fatal(err)
			}
			if m.Backend != "memcheck" || len(m.Stops) != 4 || !strings.Contains(strings.Join(m.Valgrind, " "), "--tool=memcheck") {
				t.Fatalf("backend %q, %d stops, valgrind %q, events %+v, breakpoints %+v", m.Backend, len(m.Stops), m.Valgrind, m.Events, m.Breakpoints)
			}
			// Each stop's leak search: lose()'s blocks are the only
			// definitely lost ones, keep()'s the only reachable ones
			// but for what glibc keeps.
			for i, s := range m.Stops {
				n := int64(i + 1)
				if s.Leak == nil || s.Leak.DefinitelyLost != (runjson.LeakKind{Bytes: 640 * n, Blocks: 20 * n}) || s.Leak.Records == "" {
					t.Errorf("stop %d: leak %+v, want %d B in %d blocks definitely lost", s.Seq, s.Leak, 640*n, 20*n)
					continue
				}
				if _, err := os.Stat(filepath.Join(res.Dir, s.Leak.Records)); err != nil {
					t.Errorf("stop %d: %v", s.Seq, err)
				}
			}
			got := make(map[string]snapshots.Suspect)
			for _, s := range m.Suspects {
				got[s.Frame.Function] = s
			}
			lose, keep := got["lose"], got["keep"]
			if len(m.Suspects) != 2 || lose.Memcheck == nil || keep.Memcheck == nil {
				t.Fatalf("suspects %+v", m.Suspects)
			}
			if lose.Frame.Line != lost || keep.Frame.Line != kept || lose.GrowthPerHit != 640 || keep.GrowthPerHit != 640 {
				t.Errorf("lose %v +%d/hit, keep %v +%d/hit; want lines %d and %d, +640 each", lose.Frame, lose.GrowthPerHit, keep.Frame, keep.GrowthPerHit, lost, kept)
			}
			want := kind{Bytes: 2560, Blocks: 80, BytesPerHit: 640, BlocksPerHit: 20}
			none := kind{}
			if diff := cmp.Diff([]kind{want, none, none, none}, []kind{kindOf(lose.Memcheck.DefinitelyLost), kindOf(lose.Memcheck.IndirectlyLost),
				kindOf(lose.Memcheck.PossiblyLost), kindOf(lose.Memcheck.StillReachable)}); diff != "" {
				t.Errorf("lose: definitely, indirectly, possibly lost, reachable (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]kind{none, none, none, want}, []kind{kindOf(keep.Memcheck.DefinitelyLost), kindOf(keep.Memcheck.IndirectlyLost),
				kindOf(keep.Memcheck.PossiblyLost), kindOf(keep.Memcheck.StillReachable)}); diff != "" {
				t.Errorf("keep: definitely, indirectly, possibly lost, reachable (-want +got):\n%s", diff)
			}
			if lose.Memcheck.HeldBy != nil {
				t.Errorf("lost blocks held by %+v", lose.Memcheck.HeldBy)
			}
			h := keep.Memcheck.HeldBy
			if h == nil || h.Root == nil {
				t.Fatalf("keep's blocks held by %+v", h)
			}
			if diff := cmp.Diff(snapshots.HolderRoot{Kind: "global", Name: "registry", File: "reach.c", Line: holder}, *h.Root); diff != "" {
				t.Errorf("root (-want +got):\n%s", diff)
			}
			// The chain runs from registry's node down the list to the
			// sample: keep's blocks alone, at most all 80 of them.
			if len(h.Chain) != 1 || h.Chain[0].Site.Function != "keep" || h.Chain[0].Site.Line != kept || h.Chain[0].Blocks < 1 || h.Chain[0].Blocks > 80 {
				t.Errorf("chain %+v", h.Chain)
			}
			if !strings.HasPrefix(h.Sentence, "held by `registry` (reach.c:") || !strings.Contains(h.Sentence, " blocks of keep (reach.c:") && !strings.Contains(h.Sentence, " block of keep (reach.c:") {
				t.Errorf("sentence %q", h.Sentence)
			}
		})
	}
}

// A plan's report.fail_on.lost_per_hit fails the run on lose()'s 640 B
// per hit, naming the site (exit as a leak, the run kept); a limit above
// it passes. Under another backend the key is a plan error at its line.
func TestMemcheckLostPerHitGate(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/reach.c", "-pthread")
	gate := func(limit string) string {
		return roundPlan + "report:\n  fail_on:\n    lost_per_hit: " + limit + "\n"
	}
	t.Run("over", func(t *testing.T) {
		t.Parallel()
		res, m, err := run(t, driver.Options{}, gate("600B"), bin, "4")
		var le *driver.LeakError
		if !errors.As(err, &le) || le.LostPerHit != 600 || len(le.Suspects) != 1 || !strings.HasPrefix(le.Suspects[0], "lose (reach.c:") ||
			!strings.HasSuffix(le.Suspects[0], `+640 B lost per hit at breakpoint "round"`) {
			t.Fatalf("err = %v", err)
		}
		if m.Status != runjson.StatusCompleted || len(m.Suspects) != 2 || res.Manifest.Status != runjson.StatusCompleted {
			t.Errorf("status %s, %d suspects", m.Status, len(m.Suspects))
		}
	})
	t.Run("under", func(t *testing.T) {
		t.Parallel()
		if _, _, err := run(t, driver.Options{}, gate("700B"), bin, "4"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("massif", func(t *testing.T) {
		t.Parallel()
		testenv.MustHave(t, "gdb", "valgrind", "vgdb")
		dir := t.TempDir()
		path := filepath.Join(dir, "plan.yaml")
		if err := os.WriteFile(path, []byte(strings.Replace(gate("1KiB"), "memcheck", "massif", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := driver.Run(context.Background(), driver.Options{PlanPath: path, Binary: bin, OutDir: filepath.Join(dir, "out")})
		var pe *plan.Error
		if !errors.As(err, &pe) || pe.Line != 7 || pe.Key != "report.fail_on.lost_per_hit" || !strings.HasPrefix(err.Error(), path+":7:") {
			t.Fatalf("err = %v", err)
		}
	})
}

// A target that dies of SIGSEGV after its third round keeps the three
// stops' measurements and their standing, and says where it died.
func TestMemcheckCrashKeepsMeasurements(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/reach.c", "-pthread")
	_, m, err := run(t, driver.Options{}, roundPlan, bin, "6", "2")
	var ce *driver.CrashError
	if !errors.As(err, &ce) || ce.Signal != "SIGSEGV" {
		t.Fatalf("err = %v", err)
	}
	if m.Target.Signal == nil || *m.Target.Signal != "SIGSEGV" || m.Target.Crash == nil || len(m.Target.Crash.Backtrace) == 0 || m.Target.Crash.Backtrace[0].Function != "main" {
		t.Errorf("target %+v, crash %+v", m.Target, m.Target.Crash)
	}
	if len(m.Stops) != 3 {
		t.Fatalf("%d stops, want 3", len(m.Stops))
	}
	for i, s := range m.Stops {
		if n := int64(i + 1); s.Leak == nil || s.Leak.DefinitelyLost.Bytes != 640*n || s.Snapshot == "" {
			t.Errorf("stop %d: snapshot %q, leak %+v", s.Seq, s.Snapshot, s.Leak)
		}
	}
	for _, s := range m.Suspects {
		if s.Frame.Function == "lose" && (s.Memcheck == nil || s.Memcheck.DefinitelyLost.BytesPerHit != 640) {
			t.Errorf("lose: %+v", s.Memcheck)
		}
	}
}

// around_call's return stops take the leak search too, and the standing
// comes from the hits alone: 8 stops of 4 hits, lose() still 640 B
// definitely lost per hit. The kept snapshots are massif files that
// snapctl's readers (show, diff, export) take.
func TestMemcheckAroundCall(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/reach.c", "-pthread")
	res, m, err := run(t, driver.Options{}, roundPlan+"    around_call: true\n", bin, "4")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stops) != 8 {
		t.Fatalf("%d stops, want 8", len(m.Stops))
	}
	for _, s := range m.Stops {
		if s.Leak == nil || s.Leak.DefinitelyLost.Bytes != 640*int64(s.Hit) {
			t.Errorf("stop %d (hit %d, %s): leak %+v", s.Seq, s.Hit, s.Phase, s.Leak)
		}
	}
	var lose *snapshots.Suspect
	for i, s := range m.Suspects {
		if s.Frame.Function == "lose" {
			lose = &m.Suspects[i]
		}
	}
	if lose == nil || lose.Memcheck == nil || kindOf(lose.Memcheck.DefinitelyLost) != (kind{2560, 80, 640, 20}) {
		t.Fatalf("lose: %+v", lose)
	}
	f, err := os.Open(filepath.Join(res.Dir, m.Stops[len(m.Stops)-1].Snapshot))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tree, err := snapshots.ReadHeapTree(f, f.Name(), snapshots.NewFrameTable())
	if err != nil || tree.HeapBytes < 5120 {
		t.Errorf("last snapshot: %v, %+v", err, tree)
	}
}

// A list held by a local of a thread's function: 4 threads each build
// their own, whose head is on the thread's stack. The holder is that
// stack frame, named by its function and the thread.
func TestMemcheckStackRoot(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/stackroot.c", "-pthread")
	frame := testenv.LineOf(t, "testdata/stackroot.c", "/* the holder's frame */")
	_, m, err := run(t, driver.Options{}, "backend: memcheck\nbreakpoints:\n  - name: mark\n    location: mark\n", bin)
	if err != nil {
		t.Fatal(err)
	}
	// The threads' own start (allocate_dtv under pthread_create) may
	// grow in the first intervals too: worker's suspect is the list.
	var st *snapshots.Standing
	for _, s := range m.Suspects {
		if s.Frame.Function == "worker" {
			st = s.Memcheck
		}
	}
	if len(m.Stops) != 12 || st == nil {
		t.Fatalf("%d stops, suspects %+v", len(m.Stops), m.Suspects)
	}
	if st.StillReachable.Blocks != 60 || st.DefinitelyLost.Blocks != 0 || st.HeldBy == nil || st.HeldBy.Root == nil {
		t.Fatalf("standing %+v", st)
	}
	r := st.HeldBy.Root
	prefix := fmt.Sprintf("a local of worker (stackroot.c:%d) on thread ", frame)
	if r.Kind != "stack" || !strings.HasPrefix(r.Name, prefix) || !strings.HasSuffix(r.Name, "'s stack") || r.File != "stackroot.c" || r.Line != frame {
		t.Errorf("root %+v, want a stack root named %q...", r, prefix)
	}
}
