package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/testenv"
)

// compareDoc mirrors `snapctl compare --format json`, schema
// snapctl.compare/v1.
type compareDoc struct {
	Schema      string            `json:"schema"`
	Suspects    []comparedSuspect `json:"suspects"`
	NotCompared []comparedSuspect `json:"not_compared"`
	Notes       []string          `json:"notes"`
}

type comparedSuspect struct {
	Frame              frame  `json:"frame"`
	Breakpoint         string `json:"breakpoint"`
	Status             string `json:"status"`
	Match              string `json:"match"`
	BeforeFrame        *frame `json:"before_frame"`
	BeforeGrowthPerHit *int64 `json:"before_growth_per_hit"`
	AfterGrowthPerHit  *int64 `json:"after_growth_per_hit"`
	Reason             string `json:"reason"`
}

// snapctlCmd runs the snapctl binary with args and returns its exit code
// and output.
func snapctlCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(snapctlBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.Exited()) {
		t.Fatalf("snapctl %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func ptr(n int64) *int64 { return &n }

// A leaking build against two rebuilds of fixcheck.c, each profiled for
// real: the partial fix keeps audit's 40-byte leak two lines lower (matched
// by function), adds a 16-byte leak and removes remember's 24 bytes, under
// a plan with one more breakpoint (not compared, and said so): exit 10.
// The full fix leaves every suspect gone: exit 0.
func TestCompareBeforeAndAfterAFix(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "fixcheck.c"
	leaky, partial, fixed := testenv.Build(t, src), testenv.Build(t, src, "-DPARTIAL"), testenv.Build(t, src, "-DFIXED")
	twoBreakpoints := requestPlan + "  - name: audit\n    location: audit\n"
	a := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"5"}}, exitOK)
	b := mustRun(t, session{Plan: twoBreakpoints, Bin: partial, Args: []string{"5"}}, exitOK)
	c := mustRun(t, session{Plan: requestPlan, Bin: fixed, Args: []string{"5"}}, exitOK)

	remember := frame{"remember", "fixcheck.c", testenv.LineOf(t, src, "remember: 24")}
	auditBefore := frame{"audit", "fixcheck.c", testenv.LineOf(t, src, "audit: 40")}
	auditAfter := frame{"audit", "fixcheck.c", testenv.LineOf(t, src, "audit, moved")}
	added := frame{"handle_request", "fixcheck.c", testenv.LineOf(t, src, "new in the partial fix")}

	code, stdout, stderr := snapctlCmd(t, "compare", "--format", "json", a.Out, b.Out)
	if code != exitLeak {
		t.Fatalf("compare exited %d, want %d\n%s%s", code, exitLeak, stdout, stderr)
	}
	var doc compareDoc
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	want := compareDoc{
		Schema: "snapctl.compare/v1",
		Suspects: []comparedSuspect{
			{Frame: auditAfter, Breakpoint: "request", Status: "persists", Match: "function", BeforeFrame: &auditBefore,
				BeforeGrowthPerHit: ptr(40), AfterGrowthPerHit: ptr(40)},
			{Frame: added, Breakpoint: "request", Status: "new", AfterGrowthPerHit: ptr(16)},
			{Frame: remember, Breakpoint: "request", Status: "gone", BeforeGrowthPerHit: ptr(24)},
		},
		NotCompared: []comparedSuspect{
			{Frame: auditAfter, Breakpoint: "audit", AfterGrowthPerHit: ptr(40), Reason: "breakpoint in one plan only"},
			{Frame: added, Breakpoint: "audit", AfterGrowthPerHit: ptr(16), Reason: "breakpoint in one plan only"},
		},
		Notes: []string{
			`breakpoint "audit" is only in the after run's plan: its suspects are not compared`,
			fmt.Sprintf(`audit at breakpoint "request": matched by function, line %d before and %d after`, auditBefore.Line, auditAfter.Line),
		},
	}
	if diff := cmp.Diff(want, doc); diff != "" {
		t.Errorf("compare (-want +got):\n%s", diff)
	}

	code, stdout, _ = snapctlCmd(t, "compare", a.Out, c.Out)
	if code != exitOK || !strings.Contains(stdout, "Fixed: 2 suspects gone, none new.") {
		t.Errorf("compare with the fixed build exited %d, want 0 and the suspects gone:\n%s", code, stdout)
	}
	code, stdout, _ = snapctlCmd(t, "compare", "--format", "markdown", c.Out, b.Out)
	if code != exitLeak || !strings.Contains(stdout, fmt.Sprintf("| new | - | +40 B | request | <code>audit</code> fixcheck.c:%d |", auditAfter.Line)) {
		t.Errorf("compare of the fixed build with the partial one exited %d, want 10 and audit new:\n%s", code, stdout)
	}
}

// Arguments that are not completed run directories of a known schema exit
// 5 with the reason; a wrong command line exits 2.
func TestCompareBadInput(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	// TestKeptSnapshotsCompressed's run, which this test only reads.
	good := mustRunShared(t, session{Plan: requestPlan, Bin: testenv.Build(t, fixtures+"leak.c"), Args: []string{"3"}}, exitOK).Out
	dir := t.TempDir()
	withManifest := func(name string, edit func(m map[string]any)) string {
		data, err := os.ReadFile(filepath.Join(good, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		out := filepath.Join(dir, name)
		data, _ = json.Marshal(m)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "run.json"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		return out
	}
	interrupted := withManifest("interrupted", func(m map[string]any) { m["status"], m["error"] = "interrupted", "interrupted by SIGINT" })
	future := withManifest("future", func(m map[string]any) { m["schema"] = "snapctl.run/v9" })
	// A run of the snapctl before stacks moved into a table: suspects
	// with their stack inline.
	v1 := withManifest("v1", func(m map[string]any) {
		m["schema"] = "snapctl.run/v1"
		stacks := m["stacks"].([]any)
		for _, s := range m["suspects"].([]any) {
			s := s.(map[string]any)
			s["stack"] = stacks[int(s["stack_id"].(float64))]
			delete(s, "stack_id")
		}
		delete(m, "stacks")
	})
	// Valid JSON whose fields have the wrong types.
	typed := withManifest("typed", func(m map[string]any) { m["suspects"] = "none" })
	deep := withManifest("deep", func(m map[string]any) { m["stops"].([]any)[0].(map[string]any)["phase"] = 5 })
	broken := filepath.Join(dir, "broken")
	os.MkdirAll(broken, 0o755)
	os.WriteFile(filepath.Join(broken, "run.json"), []byte("{\n  \"schema\": \"snapctl.run/v2\",\n  \"status\": completed\n}\n"), 0o644)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)

	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"compare", good, filepath.Join(dir, "missing")}, exitInput, "missing: no such run directory"},
		{[]string{"compare", good, filepath.Join(good, "run.json")}, exitInput, "not a run directory (compare takes the directories"},
		{[]string{"compare", empty, good}, exitInput, "empty: not a run directory: it has no run.json"},
		{[]string{"compare", good, interrupted}, exitInput, "the run did not complete (status interrupted: interrupted by SIGINT)"},
		{[]string{"compare", future, good}, exitInput, `run.json has schema "snapctl.run/v9"; this snapctl reads snapctl.run/v1 and snapctl.run/v2`},
		{[]string{"compare", v1, good}, exitLeak, "1 suspect or finding persists, is new or could not be compared"},
		{[]string{"compare", typed, good}, exitInput, "run.json is valid JSON but not a run: field suspects (byte "},
		{[]string{"compare", typed, good}, exitInput, ") is a string, where snapctl expects an array"},
		{[]string{"compare", good, deep}, exitInput, ") is a number, where snapctl expects a string"},
		{[]string{"compare", good, deep}, exitInput, "field stops.phase (byte "},
		{[]string{"compare", broken, good}, exitInput, "run.json is not valid JSON: line 3 (byte 45): invalid character 'c' looking for beginning of value"},
		{[]string{"compare", good}, exitUsage, "compare takes two run directories RUN_A and RUN_B, got 1 arguments"},
		{[]string{"compare", "--format", "html", good, good}, exitUsage, `invalid argument "html" for "--format" flag: want text, markdown or json`},
		{[]string{"compare", good, good}, exitLeak, "1 suspect or finding persists, is new or could not be compared"},
	} {
		code, stdout, stderr := snapctlCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("snapctl %v: exit %d, stderr %q; want exit %d and %q\n%s", tc.args[1:], code, stderr, tc.code, tc.msg, stdout)
		}
	}
}

// The same leaking program under a plan whose breakpoint was renamed:
// nothing could be compared, so compare does not pass, and says why.
func TestCompareRenamedBreakpoint(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	leaky := testenv.Build(t, fixtures+"fixcheck.c")
	a := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"5"}}, exitOK)
	b := mustRun(t, session{Plan: "breakpoints:\n  - name: req\n    location: handle_request\n", Bin: leaky, Args: []string{"5"}}, exitOK)
	code, stdout, stderr := snapctlCmd(t, "compare", a.Out, b.Out)
	if code != exitLeak || !strings.Contains(stdout, "Not fixed: 4 suspects could not be compared.") || strings.Contains(stdout, "No suspect") {
		t.Errorf("compare exited %d, want 10, 4 suspects not compared:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, `note: breakpoint "request" is only in the before run's plan: its suspects are not compared`) {
		t.Errorf("compare does not say why:\n%s", stdout)
	}
}

// comparedFinding mirrors findings[] of `snapctl compare --format json`.
type comparedFinding struct {
	Breakpoint string `json:"breakpoint"`
	Finding    string `json:"finding"`
	Status     string `json:"status"`
	Before     string `json:"before"`
	After      string `json:"after"`
	Reason     string `json:"reason"`
}

// Native runs are compared by their verdicts: the leak of fixcheck.c (80
// bytes of chunks a request) is gone in the fixed build (exit 0) and
// persists in the partial fix (exit 10). Against a massif run, a leak both
// show persists, but the fixed native build does not show a fix of what
// massif found: exit 10, saying why.
func TestCompareNative(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	src := fixtures + "fixcheck.c"
	leaky, partial, fixed := testenv.Build(t, src), testenv.Build(t, src, "-DPARTIAL"), testenv.Build(t, src, "-DFIXED")
	native := "backend: native\n" + requestPlan
	nLeaky := mustRun(t, session{Plan: native, Bin: leaky, Args: []string{"6"}}, exitOK)
	nPartial := mustRun(t, session{Plan: native, Bin: partial, Args: []string{"6"}}, exitOK)
	nFixed := mustRun(t, session{Plan: native, Bin: fixed, Args: []string{"6"}}, exitOK)
	mLeaky := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}}, exitOK)

	findings := func(a, b string, wantCode int) ([]comparedFinding, string) {
		t.Helper()
		code, stdout, stderr := snapctlCmd(t, "compare", "--format", "json", a, b)
		if code != wantCode {
			t.Errorf("compare %s %s exited %d, want %d\n%s%s", a, b, code, wantCode, stdout, stderr)
		}
		var doc struct {
			Findings []comparedFinding `json:"findings"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		_, text, _ := snapctlCmd(t, "compare", a, b)
		return doc.Findings, text
	}
	got, text := findings(nLeaky.Out, nFixed.Out, exitOK)
	want := []comparedFinding{{Breakpoint: "request", Finding: "leak", Status: "gone", Before: "leak (+80 B per hit)", After: "flat"}}
	if diff := cmp.Diff(want, got); diff != "" || !strings.Contains(text, "Fixed: 1 finding gone, none new.") {
		t.Errorf("leaky against fixed (-want +got):\n%s\n%s", diff, text)
	}
	got, text = findings(nLeaky.Out, nPartial.Out, exitLeak)
	want = []comparedFinding{{Breakpoint: "request", Finding: "leak", Status: "persists", Before: "leak (+80 B per hit)", After: "leak (+80 B per hit)"}}
	if diff := cmp.Diff(want, got); diff != "" || !strings.Contains(text, "Not fixed: 1 finding persists.") {
		t.Errorf("leaky against partial (-want +got):\n%s\n%s", diff, text)
	}
	got, text = findings(mLeaky.Out, nLeaky.Out, exitLeak)
	want = []comparedFinding{{Breakpoint: "request", Finding: "leak", Status: "persists", Before: "2 suspects", After: "leak (+80 B per hit)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("massif leaky against native leaky (-want +got):\n%s\n%s", diff, text)
	}
	got, text = findings(mLeaky.Out, nFixed.Out, exitLeak)
	want = []comparedFinding{{Breakpoint: "request", Finding: "leak", Status: "unjudged", Before: "2 suspects", After: "flat",
		Reason: "RUN_B (native) does not show it, but a fix is shown only between runs of one backend: run RUN_B with --backend massif"}}
	if diff := cmp.Diff(want, got); diff != "" || strings.Contains(text, "Fixed") || !strings.Contains(text, "Not fixed: 1 finding could not be judged.") {
		t.Errorf("massif leaky against native fixed (-want +got):\n%s\n%s", diff, text)
	}
}

// writeRun writes a completed run's run.json into a new directory: one
// breakpoint, "request", stopped six times, with one suspect, remember's
// 24 bytes a hit, and the given backend, native settings and verdicts.
func writeRun(t *testing.T, backend string, native, verdicts any) string {
	t.Helper()
	var stops []map[string]any
	for i := 1; i <= 6; i++ {
		stops = append(stops, map[string]any{"seq": i, "breakpoint": "request", "hit": i, "phase": "hit"})
	}
	m := map[string]any{
		"schema": "snapctl.run/v2", "status": "completed", "backend": backend,
		"breakpoints": []map[string]any{{"name": "request", "location": "handle_request"}},
		"stops":       stops,
		"stacks":      [][]map[string]any{{{"function": "remember", "file": "fixcheck.c", "line": 18}}},
		"suspects": []map[string]any{{"frame": map[string]any{"function": "remember", "file": "fixcheck.c", "line": 18},
			"stack_id": 0, "breakpoint": "request", "growth_per_hit": 24}},
	}
	if native != nil {
		m["native"] = native
	}
	if verdicts != nil {
		m["verdicts"] = verdicts
	}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A native run recorded with native.sites has call sites, as every massif
// run has; one without them has only its verdicts. compare matches the
// call sites of a massif run and a native one with them: the leak both
// show persists (exit 10).
func TestCompareLoadsNativeSites(t *testing.T) {
	verdicts := []map[string]any{{"breakpoint": "request", "verdict": "leak", "findings": []string{"leak"},
		"figures": map[string]any{"stops": 6, "heap_in_use_growth_per_hit_bytes": 24}}}
	sites := writeRun(t, "native", map[string]any{"sites": true}, verdicts)
	bare := writeRun(t, "native", map[string]any{"trim_probe": false}, verdicts)
	massif := writeRun(t, "massif", nil, nil)
	for dir, want := range map[string]bool{sites: true, bare: false, massif: true} {
		run, err := loadRun(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if run.Sites != want || len(run.Suspects) != 1 {
			t.Errorf("%s: Sites = %v with %d suspects, want %v and 1", dir, run.Sites, len(run.Suspects), want)
		}
	}
	var out bytes.Buffer
	err := runCompareCmd(context.Background(), &out, massif, sites, &compareOptions{format: "text"})
	var notFixed *notFixedError
	if !errors.As(err, &notFixed) || notFixed.n != 1 {
		t.Errorf("compare of a massif run with a native --sites run: %v, want 1 not fixed", err)
	}
	if !strings.Contains(out.String(), "persists       +24 B      +24 B  request     remember (fixcheck.c:18)") ||
		!strings.Contains(out.String(), "Not fixed: 1 suspect persists.") {
		t.Errorf("remember does not persist:\n%s", out.String())
	}
}

// TestCompareMassifAndSites: a massif run and a native --sites run of the
// same plan have the same suspects: compared site by site, the leaks of
// the unfixed program persist (exit 10), and against the fixed program,
// measured with --sites, they are gone (exit 0); two --sites runs compare
// their sites and their verdicts.
func TestCompareMassifAndSites(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.MustHave(t, "heaptrack")
	src := fixtures + "fixcheck.c"
	leaky, fixed := testenv.Build(t, src), testenv.Build(t, src, "-DFIXED")
	mLeaky := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}}, exitOK)
	sLeaky := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}, Flags: []string{"--sites"}}, exitOK)
	sFixed := mustRun(t, session{Plan: requestPlan, Bin: fixed, Args: []string{"6"}, Flags: []string{"--sites"}}, exitOK)
	suspects := func(a, b string, wantCode int) (map[string]string, string) {
		t.Helper()
		code, stdout, stderr := snapctlCmd(t, "compare", "--format", "json", a, b)
		if code != wantCode {
			t.Errorf("compare %s %s exited %d, want %d\n%s%s", a, b, code, wantCode, stdout, stderr)
		}
		var doc struct {
			Suspects []comparedSuspect `json:"suspects"`
		}
		if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, stdout)
		}
		got := map[string]string{}
		for _, s := range doc.Suspects {
			got[s.Frame.Function] = s.Status
		}
		_, text, _ := snapctlCmd(t, "compare", a, b)
		return got, text
	}
	want := map[string]string{"remember": "persists", "audit": "persists"}
	if got, text := suspects(mLeaky.Out, sLeaky.Out, exitLeak); !cmp.Equal(want, got) || !strings.Contains(text, "Not fixed: 2 suspects persist.") {
		t.Errorf("massif leaky against sites leaky: %v, want %v\n%s", got, want, text)
	}
	want = map[string]string{"remember": "gone", "audit": "gone"}
	if got, text := suspects(mLeaky.Out, sFixed.Out, exitOK); !cmp.Equal(want, got) || !strings.Contains(text, "Fixed") {
		t.Errorf("massif leaky against sites fixed: %v, want %v\n%s", got, want, text)
	}
	if got, text := suspects(sLeaky.Out, sFixed.Out, exitOK); !cmp.Equal(want, got) || !strings.Contains(text, "Fixed") {
		t.Errorf("sites leaky against sites fixed: %v, want %v\n%s", got, want, text)
	}
}

// compare never shows a fix against a run that measured nothing: a
// --sites run whose heaptrack interpreter exited at once (it exits 1
// itself) recorded no call site, and a native run of a program that
// allocates with a jemalloc that answers no statistic, so that snapctl
// cannot read it, judged no heap.
// Each leaves the leak of the run before unjudged: exit 10, with a note
// that says why, never "Fixed".
func TestCompareAgainstNothingMeasured(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	testenv.MustHave(t, "heaptrack", "valgrind")
	src := fixtures + "fixcheck.c"
	leaky, fixed := testenv.Build(t, src), testenv.Build(t, src, "-DFIXED")
	mLeaky := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}}, exitOK)
	sLeaky := mustRunShared(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}, Flags: []string{"--sites"}}, exitOK)
	broken := fakeHeaptrack(t, "echo 'heaptrack_interpret: cannot start' >&2; exit 1")
	sNothing := mustRun(t, session{Plan: requestPlan, Bin: fixed, Args: []string{"6"}, Flags: []string{"--sites", "--heaptrack", broken}}, exitFailure)
	for _, before := range []string{mLeaky.Out, sLeaky.Out} {
		code, stdout, stderr := snapctlCmd(t, "compare", before, sNothing.Out)
		if code != exitLeak || strings.Contains(stdout, "Fixed") || !strings.Contains(stdout, "none of its 6 stops has a per-site snapshot: heaptrack's recording failed") {
			t.Errorf("compare %s against the failed recording exited %d, want 10, no fix and why:\n%s%s", before, code, stdout, stderr)
		}
	}

	nLeaky := mustRun(t, session{Plan: requestPlan, Bin: leaky, Args: []string{"6"}, Flags: []string{"--backend", "native"}}, exitOK)
	je := testenv.Build(t, src, "-DFIXED", "-DNO_STATS", "-Wl,--no-as-needed", "-ljemalloc")
	nJemalloc := mustRun(t, session{Plan: requestPlan, Bin: je, Args: []string{"6"}, Flags: []string{"--backend", "native"}}, exitOK)
	code, stdout, stderr := snapctlCmd(t, "compare", nLeaky.Out, nJemalloc.Out)
	if code != exitLeak || strings.Contains(stdout, "Fixed") || !strings.Contains(stdout, "its in-use heap is unmeasured there") {
		t.Errorf("compare against the jemalloc run exited %d, want 10, the leak unjudged:\n%s%s", code, stdout, stderr)
	}
}
