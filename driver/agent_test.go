package driver

import (
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

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// The agent selects hits in Python: it must take exactly the hits that
// plan.Breakpoint's ShouldSnapshot and Done take in Go, for every
// every and max_hits.
func TestAgentHitSelection(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	script := filepath.Join(t.TempDir(), gdb.AgentScript)
	if err := os.WriteFile(script, []byte(gdb.AgentSource), 0o600); err != nil {
		t.Fatal(err)
	}
	type decision struct {
		Every, MaxHits, Hit int
		Snapshot, Done      bool
	}
	var want []decision
	for every := 0; every <= 4; every++ {
		for _, maxHits := range []int{0, 1, 2, 5, 7} {
			bp := plan.Breakpoint{Every: every, MaxHits: maxHits}
			// Hits count from 1, after skip.
			for hit := 1; hit <= 12; hit++ {
				want = append(want, decision{every, maxHits, hit, bp.ShouldSnapshot(hit), bp.Done(hit)})
			}
		}
	}
	py := `python
import json
print(json.dumps([{"Every": e, "MaxHits": m, "Hit": h,
                   "Snapshot": should_snapshot(h, e, m), "Done": done(h, e, m)}
                  for e in range(5) for m in (0, 1, 2, 5, 7) for h in range(1, 13)]))
end`
	cmdFile := filepath.Join(t.TempDir(), "cmds")
	if err := os.WriteFile(cmdFile, []byte(py+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gdb", "-batch", "-nx", "-x", script, "-x", cmdFile).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	var got []decision
	if err := json.Unmarshal([]byte(gdb.LastLine(string(out))), &got); err != nil {
		t.Fatalf("agent's answer %q: %v", out, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent's hit selection differs from the plan's (-go +python):\n%s", diff)
	}
}

// The loop reads the agent's records as whole lines: a record that the
// agent is still writing waits for the next read, and every stop keeps
// its snapshot under the run's name for it.
func TestReadAgentWholeRecords(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n")
	s := scriptedSession(t, plan, newFakeGDB(t))
	st := s.rec.order[0]
	st.agent = true
	records := openAgentRecords(t, s)

	var lines []string
	for hit := 1; hit <= 2; hit++ {
		snap := filepath.Join(s.priv.dir, fmt.Sprintf("%d.massif", hit))
		massif := fmt.Sprintf("desc: --threshold=0\ncmd: ./leak\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=8\nmem_stacks_B=0\nheap_tree=detailed\n"+
			"n1: %d (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n n0: %d 0x1091E0: keep (leak.c:15)\n", hit, 16*hit, 16*hit, 16*hit)
		if err := os.WriteFile(snap, []byte(massif), 0o600); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf(`{"bp":"1","hit":%d,"time":1790000000.25,"snapshot":%q,"thread":{"id":"1","target-id":"Thread 7","state":"stopped"},`+
			`"backtrace":[{"func":"handle_request","file":"../src/leak.c","fullname":"/src/leak.c","line":23,"addr":"0x0000000000109154"},{"func":"main","file":"leak.c","line":35,"addr":"0x00000000001091ea"}],`+
			`"threads":[{"id":"1","target-id":"Thread 7","state":"stopped","frame":{"func":"handle_request","file":"leak.c","line":23}}],"done":false}`+"\n", hit, snap))
	}
	half := len(lines[1]) / 2
	appendRecords(t, records, lines[0]+lines[1][:half])
	if err := s.agent.read(); err != nil {
		t.Fatal(err)
	}
	if s.rec.seq != 1 || st.sum.Snapshots != 1 {
		t.Fatalf("after one whole record and half of another: %d stops, %d snapshots; want 1, 1", s.rec.seq, st.sum.Snapshots)
	}
	appendRecords(t, records, lines[1][half:])
	if err := s.agent.read(); err != nil {
		t.Fatal(err)
	}
	stops := spooled[runjson.Stop](t, s.rec.stops)
	if len(stops) != 2 {
		t.Fatalf("%d stops, want 2", len(stops))
	}
	want := runjson.Stop{Seq: 2, Breakpoint: "request", Hit: 2, Phase: runjson.PhaseHit, Time: "2026-09-21T14:13:20.250Z",
		Thread:    runjson.Thread{ID: "1", TargetID: "Thread 7", State: "stopped"},
		Frame:     runjson.Frame{Function: "handle_request", File: "leak.c", FullName: "/src/leak.c", Line: 23, Addr: "0x0000000000109154"},
		Backtrace: []runjson.Frame{{Function: "handle_request", File: "leak.c", FullName: "/src/leak.c", Line: 23, Addr: "0x0000000000109154"}, {Function: "main", File: "leak.c", Line: 35, Addr: "0x00000000001091ea"}},
		Threads:   []runjson.Thread{{ID: "1", TargetID: "Thread 7", State: "stopped", Frame: &runjson.Frame{Function: "handle_request", File: "leak.c", Line: 23}}},
		Snapshot:  "snapshots/0002-request-2.massif.gz", HeapBytes: 32, HeapExtraBytes: 8}
	if diff := cmp.Diff(want, stops[1]); diff != "" {
		t.Errorf("stop 2 (-want +got):\n%s", diff)
	}
	// Kept, under their unlisted names until run.json lists them.
	for _, st := range stops {
		if _, err := os.Stat(unlistedPath(s.out.dir, st.Snapshot)); err != nil {
			t.Errorf("stop %d: %v", st.Seq, err)
		}
	}
	// A failed snapshot ends the run with valgrind's words.
	appendRecords(t, records, `{"bp":"1","kind":"snapshot","error":"Error: can not open xtree output file"}`+"\n")
	var te *ToolError
	if err := s.agent.read(); err == nil || !strings.Contains(err.Error(), "can not open") || !errors.As(err, &te) {
		t.Errorf("the agent's read after a failed snapshot = %v, want valgrind's error", err)
	}
}

// The agent's records are read and flushed a batch at a time: a backlog
// of 1,000 stops (the loop behind, the agent taking stops) is read in one
// call, every stop recorded, and never more than a batch's stops, a few
// dozen, held before their measurements are read (docs/facts.md, fact
// 130).
func TestReadAgentBacklogInBatches(t *testing.T) {
	t.Parallel()
	plan := mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n")
	s := scriptedSession(t, plan, newFakeGDB(t))
	st := s.rec.order[0]
	st.agent = true
	records := openAgentRecords(t, s)
	var text strings.Builder
	const stops = 1000
	size := 0
	for hit := 1; hit <= stops; hit++ {
		snap := filepath.Join(s.priv.dir, fmt.Sprintf("%d.massif", hit))
		massif := fmt.Sprintf("desc: --threshold=0\ncmd: ./leak\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=%d\nmem_heap_B=%d\nmem_heap_extra_B=8\nmem_stacks_B=0\nheap_tree=detailed\n"+
			"n1: %d (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n n0: %d 0x1091E0: keep (leak.c:15)\n", hit, 16*hit, 16*hit, 16*hit)
		if err := os.WriteFile(snap, []byte(massif), 0o600); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf(`{"bp":"1","hit":%d,"time":1790000000.25,"snapshot":%q,"thread":{"id":"1","target-id":"Thread 7","state":"stopped"},`+
			`"backtrace":[{"func":"handle_request","file":"../src/leak.c","fullname":"/src/leak.c","line":23,"addr":"0x0000000000109154"},{"func":"main","file":"leak.c","line":35,"addr":"0x00000000001091ea"}],`+
			`"threads":[{"id":"1","target-id":"Thread 7","state":"stopped","frame":{"func":"handle_request","file":"leak.c","line":23}}],"done":false}`+"\n", hit, snap)
		size = max(size, len(line))
		text.WriteString(line)
	}
	appendRecords(t, records, text.String())
	held := 0
	stage := s.rec.stage
	s.rec.stage = func(m backend.Measurement, stop *runjson.Stop) (string, error) {
		held = max(held, len(s.rec.pending)+1)
		return stage(m, stop)
	}
	if err := s.agent.read(); err != nil {
		t.Fatal(err)
	}
	if s.rec.seq != stops || st.sum.Snapshots != stops || s.rec.stops.len() != stops {
		t.Fatalf("%d stops numbered, %d snapshots, %d spooled; want %d each", s.rec.seq, st.sum.Snapshots, s.rec.stops.len(), stops)
	}
	// A batch's worth: at most 80 of these records of about 500 B.
	if most := min(agentBatch/size+1, 80); held > most {
		t.Errorf("%d stops held before their measurements were read, want at most %d (a batch of %d B, records of %d B)", held, most, agentBatch, size)
	}
}

func appendRecords(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// In a plan whose breakpoints stop both ways, the agent's stops and those
// over MI come in the order the target reached them. leak.c's
// handle_request (the agent's) calls keep (commands: over MI); at hit k
// the heap holds 8n + 16(k-1) bytes, plus the 100 bytes of scratch inside
// handle_request.
func TestRunMixedStops(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	const n = 3
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n"+
		"  - name: keep\n    location: keep\n    commands: [\"print n\"]\n", bin, fmt.Sprint(n))
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	type stop struct {
		Seq        int
		Breakpoint string
		Hit        int
		HeapBytes  int64
		Output     string
	}
	var got, want []stop
	for _, s := range m.Stops {
		st := stop{s.Seq, s.Breakpoint, s.Hit, s.HeapBytes, ""}
		if len(s.Commands) == 1 {
			st.Output = s.Commands[0].Output
		}
		got = append(got, st)
	}
	for k := 1; k <= n; k++ {
		heap := int64(8*n + 16*(k-1))
		want = append(want, stop{2*k - 1, "request", k, heap, ""}, stop{2 * k, "keep", k, heap + 100, fmt.Sprintf("$%d = 16\n", k)})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
}

// A condition that gdb cannot evaluate at a hit counts as true, as gdb
// counts it for its own conditions; the agent also records why.
func TestRunConditionError(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n    condition: \"*(int *) 0 == 1\"\n", bin, "2")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			if len(m.Stops) != 2 || m.Breakpoints[0].Hits != 2 {
				t.Errorf("%d stops, %d hits; want 2, 2", len(m.Stops), m.Breakpoints[0].Hits)
			}
			if p.noAgent {
				return
			}
			if len(m.Events) != 2 || m.Events[0].Kind != runjson.EventConditionError || !strings.Contains(m.Events[0].Message, "Cannot access memory at address 0x0") {
				t.Errorf("events %+v, want two condition-error events with gdb's words", m.Events)
			}
		})
	}
}

// A gdb whose Python cannot load the agent still runs the plan, every stop
// over MI, and says so. A json module that fails to import, first on
// gdb's Python path, stands in for a broken Python installation: the
// early gdb cannot read agent.py either.
func TestRunAgentFallsBack(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	pydir := t.TempDir()
	if err := os.WriteFile(filepath.Join(pydir, "json.py"), []byte("raise ImportError('json is broken here')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warn testenv.Buffer
	res, err := runPlanDir(t, Options{Streams: Streams{Warn: &warn}, Env: []string{"PYTHONPATH=" + pydir}},
		"breakpoints:\n  - name: request\n    location: handle_request\n", bin, "3")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	if m.GdbAgent || len(m.Stops) != 3 || m.Stops[2].HeapBytes != 8*3+16*2 {
		t.Errorf("gdb_agent %v, %d stops; want false and 3 stops over MI", m.GdbAgent, len(m.Stops))
	}
	if w := warn.String(); !strings.Contains(w, "cannot load snapctl's agent") || !strings.Contains(w, "json") {
		t.Errorf("warnings %q, want the agent's failure with Python's words", w)
	}
}

// The agent's stops while an around_call stop runs its call to the return
// come between the hit and the return, as they happened: leak.c's
// handle_request (around_call, over MI) calls keep (the agent's).
func TestRunAgentStopsInsideAroundCall(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	const n = 2
	res, err := runPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n    around_call: true\n"+
		"  - name: keep\n    location: keep\n", bin, fmt.Sprint(n))
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	type stop struct {
		Seq        int
		Breakpoint string
		Hit        int
		Phase      string
	}
	var got, want []stop
	for _, s := range m.Stops {
		got = append(got, stop{s.Seq, s.Breakpoint, s.Hit, s.Phase})
	}
	for k := 1; k <= n; k++ {
		want = append(want, stop{3*k - 2, "request", k, "hit"}, stop{3*k - 1, "keep", k, "hit"}, stop{3 * k, "request", k, "return"})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
}

// After max_hits the breakpoint is deleted, whichever path took its stops,
// and its hits stay those counted until then.
func TestRunMaxHitsDeletes(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			res, err := runPlanOpts(t, Options{NoAgent: p.noAgent}, "breakpoints:\n  - name: request\n    location: handle_request\n    max_hits: 2\n", bin, "4")
			if err != nil {
				t.Fatal(err)
			}
			m := readManifest(t, res.Dir)
			b := m.Breakpoints[0]
			if len(m.Stops) != 2 || b.Hits != 2 || b.Snapshots != 2 || !b.Deleted {
				t.Errorf("%d stops; breakpoint %+v; want 2 stops, 2 hits, 2 snapshots, deleted", len(m.Stops), b)
			}
		})
	}
}

// A record the loop cannot use ends the run with a message that says so.
func TestReadAgentBadRecords(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, record, want string }{
		{"not JSON", "{\"bp\":\n", "reading the agent's records"},
		{"unknown breakpoint", `{"bp":"9","hit":1}` + "\n", "breakpoint 9, which is not the plan's"},
		{"agent failure", `{"bp":"1","kind":"agent","error":"KeyError: 'x'"}` + "\n", `gdb's agent failed at breakpoint "request": KeyError: 'x'`},
		{"lost snapshot", `{"bp":"1","hit":1,"snapshot":"/nonexistent/1.massif"}` + "\n", "keeping snapshot snapshots/0001-request-1.massif.gz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := scriptedSession(t, mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n"), newFakeGDB(t))
			s.rec.order[0].agent = true
			records := filepath.Join(s.priv.dir, agentRecords)
			if err := os.WriteFile(records, []byte(tt.record), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(records)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			s.useAgent(f, nil)
			if err := s.agent.read(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("the agent's read = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// openAgentRecords creates the agent's empty records file in s's private
// directory and has s read it, as startAgent does; it returns its path.
func openAgentRecords(t *testing.T, s *session) string {
	t.Helper()
	records := filepath.Join(s.priv.dir, agentRecords)
	if err := os.WriteFile(records, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(records)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	s.useAgent(f, nil)
	return records
}

// nativeAgent writes gdb's agent for a native run, agent.py and the
// native backend's part, into dir and returns a script that reads them
// into gdb's namespace as a run does (gdb.WriteAgent, gdb.WriteScripts),
// for gdb -x.
func nativeAgent(t *testing.T, dir string) string {
	t.Helper()
	core, err := gdb.WriteAgent(dir)
	if err != nil {
		t.Fatal(err)
	}
	part, err := gdb.WriteScripts(dir, native.Name, native.Python)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "read-agent.py")
	if err := os.WriteFile(script, []byte(core+part), 0o600); err != nil {
		t.Fatal(err)
	}
	return script
}

// snapctl doctor's check has gdb read agent.py and every backend's part
// of gdb's Python, as the runs do: a part Python cannot read fails it,
// in Python's words. Not parallel: its gdb carries no test's mark.
func TestCheckAgent(t *testing.T) {
	testenv.MustHave(t, "gdb")
	ctx := context.Background()
	if err := CheckAgent(ctx, "gdb"); err != nil {
		t.Fatalf("CheckAgent: %v", err)
	}
	parts := make(map[string][]gdb.Script)
	for _, b := range backends {
		if b.python != nil {
			parts[b.name] = b.python
		}
	}
	if len(parts) < 2 {
		t.Errorf("parts of gdb's Python of %d backends, want memcheck's and native's", len(parts))
	}
	parts["broken"] = []gdb.Script{{Name: "broken.py", Source: "raise RuntimeError('a part that does not load')\n"}}
	if err := checkAgent(ctx, "gdb", parts); err == nil || err.Error() != "a part that does not load" {
		t.Errorf("a broken part: %v, want Python's words", err)
	}
}
