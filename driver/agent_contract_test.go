package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
)

// contractTable returns the rows of the table that follows marker in
// docs/design.md ("The agent's contract"), each as its first cell's text
// and the backquoted names of its second cell up to a colon.
func contractTable(t *testing.T, marker string) [][2][]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(doc, []byte("<!-- "+marker+" -->\n"))
	if !ok {
		t.Fatalf("docs/design.md has no %s table", marker)
	}
	names := regexp.MustCompile("`([a-z_-]+)`")
	var rows [][2][]string
	sc := bufio.NewScanner(bytes.NewReader(after))
	for i := 0; sc.Scan() && strings.HasPrefix(sc.Text(), "|"); i++ {
		if i < 2 {
			continue // header and rule
		}
		cells := strings.Split(strings.Trim(sc.Text(), "| "), " | ")
		field, _, _ := strings.Cut(cells[1], ":")
		var row [2][]string
		for _, m := range names.FindAllStringSubmatch(cells[0], -1) {
			row[0] = append(row[0], m[1])
		}
		for _, m := range names.FindAllStringSubmatch(field, -1) {
			row[1] = append(row[1], m[1])
		}
		rows = append(rows, row)
	}
	return rows
}

// jsonFields returns the JSON names of a struct type's fields.
func jsonFields(v any) []string {
	var names []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// The Go/Python contract of the agent, checked from both sides against its
// one description in docs/design.md: the agent reads every field of the
// breakpoint file as Go writes it, and every record it writes in a real
// gdb decodes into agentRecord with nothing left over and carries exactly
// the fields its kind lists.
func TestAgentContract(t *testing.T) {
	testenv.MustHave(t, "gdb")
	t.Parallel()
	bin := testenv.Build(t, "testdata/leak.c")
	dir := t.TempDir()

	// The documented spec fields are agentSpec's.
	var specDoc []string
	for _, row := range contractTable(t, "agent-spec") {
		specDoc = append(specDoc, row[0]...)
	}
	slices.Sort(specDoc)
	if diff := cmp.Diff(jsonFields(agentSpec{}), specDoc); diff != "" {
		t.Errorf("agentSpec's fields (-go +docs/design.md):\n%s", diff)
	}
	// The documented record fields are agentRecord's.
	recordRows := contractTable(t, "agent-record")
	if len(recordRows) != 5 {
		t.Fatalf("docs/design.md's agent-record table has %d rows, want 5", len(recordRows))
	}
	var recordDoc []string
	for _, row := range recordRows {
		for _, f := range row[1] {
			if !slices.Contains(recordDoc, f) {
				recordDoc = append(recordDoc, f)
			}
		}
	}
	slices.Sort(recordDoc)
	if diff := cmp.Diff(jsonFields(agentRecord{}), recordDoc); diff != "" {
		t.Errorf("agentRecord's fields (-go +docs/design.md):\n%s", diff)
	}

	// One breakpoint per record kind. Under the native measurement the
	// stops run in gdb alone; a measurement whose command is gdb's echo
	// answers with text, which the agent takes for valgrind's error.
	specs := []agentSpec{
		{Location: "handle_request", Skip: 1, Every: 2, MaxHits: 2, Threads: "current", Depth: 4},
		{Location: "keep", Condition: "n == 16", Every: 1, MaxHits: 1, Threads: "none", Depth: 32},
		{Location: "keep", Condition: "*(int *) 0 == 1", MaxHits: 1, Threads: "all", Depth: 2},
		{Location: "main", Threads: "current", Depth: 0},
	}
	script := nativeAgent(t, dir)
	run := func(name, measure string, specs []agentSpec) []map[string]json.RawMessage {
		t.Helper()
		records := filepath.Join(dir, name+".jsonl")
		var py strings.Builder
		py.WriteString("python\na = Agent(" + gdb.PyString(records) + ", " + gdb.PyString(dir) + ", " + gdb.PyString(filepath.Join(dir, agentBusy)) + ", " + measure + ")\n")
		for i, sp := range specs {
			data, err := json.Marshal(sp)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, name+"-bp"+string(rune('0'+i))+".json")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			py.WriteString("a.insert(" + gdb.PyString(path) + ")\n")
		}
		// What the agent read of each file, in the file's own terms.
		py.WriteString("import json\nprint('SPECS ' + json.dumps([{'location': b.location, 'condition': b.cond, 'skip': b.skip, " +
			"'every': b.every, 'max_hits': b.max_hits, 'threads': b.threads, 'depth': b.depth} for b in a.breakpoints]))\nend\n")
		py.WriteString("run\ncontinue\ncontinue\ncontinue\ncontinue\n")
		cmds := filepath.Join(dir, name+".gdb")
		if err := os.WriteFile(cmds, []byte(py.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		// Marked as this test's: the others, running beside it, end any
		// gdb with no mark as their own leftover.
		cmd := exec.Command("gdb", "-batch", "-nx", "-x", script, "-x", cmds, "--args", bin, "5")
		cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
		out, _ := cmd.CombinedOutput()
		_, read, ok := strings.Cut(string(out), "SPECS ")
		if !ok {
			t.Fatalf("gdb did not print the agent's breakpoints:\n%s", out)
		}
		read, _, _ = strings.Cut(read, "\n")
		var got []agentSpec
		if err := json.Unmarshal([]byte(read), &got); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(specs)
		for i := range want {
			// The agent's own defaults for what Go leaves out.
			if want[i].Every == 0 {
				want[i].Every = 1
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: the agent read the breakpoint files as (-go wrote +agent read):\n%s", name, diff)
		}
		data, err := os.ReadFile(records)
		if err != nil {
			t.Fatalf("%s: no records: %v\n%s", name, err, out)
		}
		var recs []map[string]json.RawMessage
		for line := range bytes.Lines(data) {
			dec := json.NewDecoder(bytes.NewReader(line))
			dec.DisallowUnknownFields()
			var rec agentRecord
			if err := dec.Decode(&rec); err != nil {
				t.Errorf("%s: record %s does not decode into agentRecord: %v", name, line, err)
			}
			var m map[string]json.RawMessage
			json.Unmarshal(line, &m)
			recs = append(recs, m)
		}
		return recs
	}
	native := run("native", native.New(backend.Config{Plan: &plan.Plan{}}).AgentMeasure(), specs)
	massif := run("echo", backend.PyDict("kind", massif.Name, "monitor", "echo", "ext", snapshotExt, "report", xtreeReport), specs[:1])
	recs := append(native, massif...)

	row := func(rec map[string]json.RawMessage) int {
		var kind string
		json.Unmarshal(rec["kind"], &kind)
		switch {
		case kind == "condition":
			return 2
		case kind == "snapshot":
			return 3
		case kind == "agent":
			return 4
		case rec["frame"] != nil:
			return 1
		}
		return 0
	}
	seen := make([]int, len(recordRows))
	for i, rec := range recs {
		r := row(rec)
		seen[r]++
		var keys []string
		for k := range rec {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(recordRows[r][1]))
		if i >= len(native) {
			// The measurement comes in the record only natively.
			want = slices.DeleteFunc(want, func(f string) bool { return f == "memory" })
		}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("a %v record has the fields (-docs/design.md +agent):\n%s", recordRows[r][0], diff)
		}
	}
	for r, n := range seen {
		if n == 0 {
			t.Errorf("no %v record came out", recordRows[r][0])
		}
	}
}
