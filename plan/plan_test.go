package plan

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDefaults(t *testing.T) {
	p, err := Parse("plan.yaml", []byte("breakpoints:\n  - location: handle_request\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Plan{
		File:             "plan.yaml",
		Source:           []byte("breakpoints:\n  - location: handle_request\n"),
		Backend:          "massif",
		Valgrind:         Valgrind{Threshold: 0, FairSched: "yes", Blocks: true},
		SchedulerLocking: "on",
		KeepSnapshots:    "all",
		StopTimeout:      30 * time.Second,
		Threads:          "none",
		Breakpoints: []Breakpoint{{
			Name:          "handle_request",
			Location:      "handle_request",
			Every:         1,
			KeepSnapshots: "all",
			Threads:       "none",
			Pos:           Pos{"plan.yaml", 2, 5},
			LocationPos:   Pos{"plan.yaml", 2, 15},
		}},
		Report: Report{GroupBy: "site", Depth: 12},
	}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(Breakpoint{})); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

// TestSitesBackend: native.sites implies the native backend when the plan
// names none, as --sites does; with backend: native it stays native, and
// without sites the default is massif.
func TestSitesBackend(t *testing.T) {
	bp := "breakpoints:\n  - location: f\n"
	for _, tt := range []struct{ plan, want string }{
		{"native:\n  sites: true\n" + bp, "native"},
		{"backend: native\nnative:\n  sites: true\n" + bp, "native"},
		{"native:\n  sites: false\n" + bp, "massif"},
		{bp, "massif"},
	} {
		p, err := Parse("plan.yaml", []byte(tt.plan))
		if err != nil {
			t.Fatalf("%q: %v", tt.plan, err)
		}
		if p.Backend != tt.want {
			t.Errorf("%q: backend %q, want %q", tt.plan, p.Backend, tt.want)
		}
	}
}

// TestFullPlan decodes testdata/plans/full.yaml, which sets every key.
func TestFullPlan(t *testing.T) {
	path := filepath.Join("..", "testdata", "plans", "full.yaml")
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile(path)
	want := &Plan{
		File:   path,
		Source: src,
		Target: Target{
			Args: []string{"--requests", "200", "two words", ""},
			Env:  []string{"LANG=C", "PORT=8080", "EMPTY="},
			Cwd:  "/tmp", CwdPos: Pos{path, 8, 8},
		},
		Backend: "massif",
		Valgrind: Valgrind{
			Threshold:   0.5,
			PagesAsHeap: true,
			Stacks:      true,
			Depth:       40,
			AllocFns:    []string{"xmalloc", "xcalloc"},
			IgnoreFns:   []string{"pool_grow"},
			FairSched:   "try",
			Blocks:      true,
			Args:        []string{"--max-snapshots=200", "--trace-children=no"},
		},
		Gdb:              Gdb{Init: []string{"set print pretty on"}},
		SchedulerLocking: "step",
		KeepSnapshots:    "changed",
		StopTimeout:      2 * time.Minute,
		Threads:          "none",
		Breakpoints: []Breakpoint{
			{
				Name: "request", Location: "handle_request", Condition: "id % 10 == 0",
				Thread: 2, Skip: 5, Every: 3, MaxHits: 100, AroundCall: true,
				Commands: []string{"print queue_len", "info locals"}, Optional: true, KeepSnapshots: "changed", Threads: "all",
				Pos: Pos{path, 23, 5}, LocationPos: Pos{path, 24, 15}, ConditionPos: Pos{path, 25, 16}, index: 0,
			},
			{Name: "leak.c-15", Location: "leak.c:15", Every: 1, KeepSnapshots: "changed", Threads: "none", Pos: Pos{path, 34, 5}, LocationPos: Pos{path, 34, 15}, index: 1},
			{Name: "submit", Location: "Scheduler::submit(int, char)", Every: 1, KeepSnapshots: "changed", Threads: "none", Pos: Pos{path, 35, 5}, LocationPos: Pos{path, 36, 15}, index: 2},
		},
		Report: Report{
			GroupBy:       "stack",
			Depth:         0,
			LibraryFrames: []string{"/usr/include/*", "std::*"},
			Ignore:        []string{"_dl_allocate_tls"},
			FailOn:        FailOn{GrowthPerHit: 1024, TotalGrowth: 2 << 20},
		},
	}
	if diff := cmp.Diff(want, p, cmp.AllowUnexported(Breakpoint{})); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

// TestPlanFiles loads every plan under testdata/plans: the good ones
// parse, each broken one gives exactly the errors listed in its .err file.
func TestPlanFiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "plans", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no plans: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, err := Load(f)
			want, rerr := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
			if os.IsNotExist(rerr) {
				if err != nil {
					t.Fatalf("good plan does not load:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("broken plan loads, want:\n%s", want)
			}
			// .err files name the plan relative to the repository root.
			got := strings.ReplaceAll(err.Error(), filepath.Join("..", "testdata"), "testdata") + "\n"
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("no/such/plan.yaml")
	if got, want := err.Error(), "no/such/plan.yaml: cannot read the plan: no such file or directory"; got != want {
		t.Errorf("Load error = %q, want %q", got, want)
	}
	if !os.IsNotExist(unwrapAll(err)) {
		t.Errorf("Load error does not wrap fs.ErrNotExist: %#v", err)
	}
}

func unwrapAll(err error) error {
	if l, ok := err.(ErrorList); ok && len(l) > 0 {
		return l[0].Err
	}
	return err
}

func TestDeriveName(t *testing.T) {
	for loc, want := range map[string]string{
		"handle_request":              "handle_request",
		"leak.c:15":                   "leak.c-15",
		"Scheduler::submit(int)":      "Scheduler-submit-int",
		"'ns::f(int, char)'":          "ns-f-int-char",
		"*0x401136":                   "0x401136",
		"-source leak.c -line 15":     "source-leak.c-line-15",
		"std::vector<int>::push_back": "std-vector-int-push_back",
		strings.Repeat("ab", 40):      strings.Repeat("ab", 32),
	} {
		if got := deriveName(loc); got != want {
			t.Errorf("deriveName(%q) = %q, want %q", loc, got, want)
		}
		if got := deriveName(loc); checkName(got) != "" {
			t.Errorf("deriveName(%q) = %q, which checkName refuses: %s", loc, got, checkName(got))
		}
	}
}

// TestHits checks skip/every/max_hits through the helpers the stop loop
// uses: hit 1 is the first stop after the skipped ones.
func TestHits(t *testing.T) {
	tests := []struct {
		every, maxHits int
		snapshots      []int // hits 1..12 that take a snapshot
		done           int   // the hit after which the breakpoint is deleted; 0 never
	}{
		{every: 1, maxHits: 0, snapshots: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
		{every: 3, maxHits: 0, snapshots: []int{1, 4, 7, 10}},
		{every: 1, maxHits: 4, snapshots: []int{1, 2, 3, 4}, done: 4},
		{every: 3, maxHits: 7, snapshots: []int{1, 4, 7}, done: 7},
		{every: 3, maxHits: 9, snapshots: []int{1, 4, 7}, done: 7},
		{every: 5, maxHits: 1, snapshots: []int{1}, done: 1},
	}
	for _, tt := range tests {
		b := Breakpoint{Every: tt.every, MaxHits: tt.maxHits}
		var snaps []int
		done := 0
		for hit := 1; hit <= 12; hit++ {
			if b.ShouldSnapshot(hit) {
				snaps = append(snaps, hit)
			}
			if b.Done(hit) {
				done = hit
				break
			}
		}
		if diff := cmp.Diff(tt.snapshots, snaps, cmpopts.EquateEmpty()); diff != "" || done != tt.done {
			t.Errorf("every %d max_hits %d: snapshots (-want +got):\n%s done after %d, want %d", tt.every, tt.maxHits, diff, done, tt.done)
		}
		for hit := 1; hit <= 12; hit++ {
			// gdb stops next at the next hit that takes a snapshot.
			next := hit + 1
			for !b.ShouldSnapshot(next) && next < 100 && (b.HitLimit() == 0 || next <= b.HitLimit()) {
				next++
			}
			if got, want := b.NextIgnore(hit), next-hit-1; b.ShouldSnapshot(next) && got != want {
				t.Errorf("every %d: NextIgnore(%d) = %d, want %d", tt.every, hit, got, want)
			}
		}
	}
}

func TestLocationError(t *testing.T) {
	p, err := Parse("plan.yaml", []byte("breakpoints:\n  - location: main\n  - name: x\n    location: nosuch\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Breakpoints[1].LocationError("gdb cannot resolve %q: %s", "nosuch", `Function "nosuch" not defined.`).Error()
	want := `plan.yaml:4:15: breakpoints[1].location: gdb cannot resolve "nosuch": Function "nosuch" not defined.`
	if got != want {
		t.Errorf("LocationError = %q, want %q", got, want)
	}
	if got, want := p.Breakpoints[1].Pos.String(), "plan.yaml:3:5"; got != want {
		t.Errorf("Pos = %q, want %q", got, want)
	}
}

// TestBooleansAndEnumsUnquoted checks YAML 1.1 spellings users write
// unquoted: scheduler_locking: on and fair_sched: yes are strings here, and
// yes/no are accepted for booleans.
func TestBooleansAndEnumsUnquoted(t *testing.T) {
	p, err := Parse("plan.yaml", []byte("scheduler_locking: off\nvalgrind:\n  fair_sched: no\n  stacks: yes\nbreakpoints:\n  - location: main\n    optional: on\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.SchedulerLocking != "off" || p.Valgrind.FairSched != "no" || !p.Valgrind.Stacks || !p.Breakpoints[0].Optional {
		t.Errorf("got scheduler_locking %q, fair_sched %q, stacks %v, optional %v", p.SchedulerLocking, p.Valgrind.FairSched, p.Valgrind.Stacks, p.Breakpoints[0].Optional)
	}
}

// keep_snapshots at the top of the plan is every breakpoint's default; a
// breakpoint may override it.
func TestKeepSnapshots(t *testing.T) {
	for _, tc := range []struct {
		plan string
		want []string
	}{
		{"breakpoints:\n  - location: f\n  - location: g\n", []string{KeepAll, KeepAll}},
		{"keep_snapshots: changed\nbreakpoints:\n  - location: f\n  - location: g\n    keep_snapshots: all\n", []string{KeepChanged, KeepAll}},
		{"breakpoints:\n  - location: f\n    keep_snapshots: changed\n  - location: g\n", []string{KeepChanged, KeepAll}},
	} {
		p, err := Parse("plan.yaml", []byte(tc.plan))
		if err != nil {
			t.Fatalf("%q: %v", tc.plan, err)
		}
		var got []string
		for _, b := range p.Breakpoints {
			got = append(got, b.KeepSnapshots)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.plan, diff)
		}
	}
}

// TestFramePatterns checks that report.library_frames and report.ignore
// take frame patterns, where only '*' is special: brackets, '?' and '\'
// are literal characters of C++ names, not path.Match syntax.
func TestFramePatterns(t *testing.T) {
	for _, pat := range []string{
		`operator new[]*`,
		`std::vector<int>::operator[]`,
		`[`,
		`???`,
		`a\`,
		`fn:operator delete[](void*)`,
		`obj:/usr/lib/*`,
		`/usr/include/*`,
	} {
		t.Run(pat, func(t *testing.T) {
			q := strconv.Quote(pat)
			src := "report:\n  library_frames: [" + q + "]\n  ignore: [" + q + ", \"x\"]\n" + bp
			p, err := Parse("plan.yaml", []byte(src))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := p.Report.LibraryFrames; !cmp.Equal(got, []string{pat}) {
				t.Errorf("LibraryFrames = %q, want [%q]", got, pat)
			}
			if got := p.Report.Ignore; !cmp.Equal(got, []string{pat, "x"}) {
				t.Errorf("Ignore = %q, want [%q \"x\"]", got, pat)
			}
		})
	}
}

// valgrind.blocks is true unless the plan says false; YAML's other words
// for false count.
func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{{"", true}, {"valgrind:\n  blocks: true\n", true}, {"valgrind:\n  blocks: false\n", false}, {"valgrind:\n  blocks: no\n", false}} {
		p, err := Parse("plan.yaml", []byte(tc.yaml+"breakpoints:\n  - location: main\n"))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if p.Valgrind.Blocks != tc.want {
			t.Errorf("%q: blocks %v, want %v", tc.yaml, p.Valgrind.Blocks, tc.want)
		}
	}
}
