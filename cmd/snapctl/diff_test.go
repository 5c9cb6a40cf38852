package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/snapshots"
)

func analysisFile(name string) string {
	return filepath.Join("..", "..", "testdata", "analysis", name)
}

// snapctlDiff runs `snapctl diff args...` and returns its output.
func snapctlDiff(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"diff"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestDiffCommandText(t *testing.T) {
	out, err := snapctlDiff(t, analysisFile("taskpool/before.ms"), analysisFile("taskpool/after.ms"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"+664 B     0 B  664 B  new     Scheduler::submit(int) (taskpool.cpp:34)",
		"via 7 library frames: std::__new_allocator<…>::allocate … std::unordered_map<…>::emplace<…>",
		"← main (taskpool.cpp:44)",
		" +64 B     0 B   64 B  new     main (taskpool.cpp:45)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour on a buffer:\n%q", out)
	}
}

func TestDiffCommandJSON(t *testing.T) {
	out, err := snapctlDiff(t, "--format", "json", "--ignore", "leak_record",
		analysisFile("growth/hit-1.ms"), analysisFile("growth/hit-7.ms#0"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema     string                `json:"schema"`
		From       snapshots.SnapshotRef `json:"from"`
		To         snapshots.SnapshotRef `json:"to"`
		DeltaBytes int64                 `json:"delta_bytes"`
		Filtered   int64                 `json:"filtered_delta_bytes"`
		Sites      []snapshots.SiteDelta `json:"sites"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Schema != "snapctl.diff/v1" || doc.DeltaBytes != 400 || doc.Filtered != 144 {
		t.Errorf("schema %q, delta %d, filtered %d; want snapctl.diff/v1, 400, 144", doc.Schema, doc.DeltaBytes, doc.Filtered)
	}
	if len(doc.Sites) != 1 || doc.Sites[0].Frame.Function != "grow_scratch" || doc.Sites[0].Delta != 256 {
		t.Errorf("sites: %+v", doc.Sites)
	}
}

func TestDiffCommandGroupByFunctionMarkdown(t *testing.T) {
	out, err := snapctlDiff(t, "--format", "markdown", "--group-by", "function",
		analysisFile("taskpool/before.ms"), analysisFile("taskpool/after.ms"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| +664 B | 0 B | 664 B | new | <code>Scheduler::submit(int)</code> taskpool.cpp |",
		"| +64 B | 0 B | 64 B | new | <code>main</code> taskpool.cpp |",
		"<details><summary>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A multi-snapshot file: FILE#N, FILE#peak and a bare FILE (its last
// detailed snapshot) name the snapshots Select picks.
func TestDiffCommandSelectors(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "massif", "leak.massif")
	f, err := snapshots.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last, err := f.Select("")
	if err != nil {
		t.Fatal(err)
	}
	var first *snapshots.Snapshot
	for _, s := range f.Snapshots {
		if s.Tree != nil {
			first = s
			break
		}
	}
	spec := path + "#" + itoa(first.Index)
	out, err := snapctlDiff(t, "--format", "json", spec, path)
	if err != nil {
		t.Fatal(err)
	}
	var doc snapshots.DiffDocument
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.From.Snapshot != first.Index || doc.To.Snapshot != last.Index || doc.DeltaBytes != last.HeapBytes-first.HeapBytes {
		t.Errorf("from #%d to #%d, delta %d; want #%d to #%d, delta %d", doc.From.Snapshot, doc.To.Snapshot, doc.DeltaBytes,
			first.Index, last.Index, last.HeapBytes-first.HeapBytes)
	}
	peak, err := f.Select("peak")
	if err != nil {
		t.Fatal(err) // leak.massif is a normal massif run: it has a peak
	}
	out, err = snapctlDiff(t, "--format", "json", path+"#peak", path)
	if err != nil {
		t.Fatal(err)
	}
	doc = snapshots.DiffDocument{}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.From.Snapshot != peak.Index || doc.DeltaBytes != last.HeapBytes-peak.HeapBytes {
		t.Errorf("FILE#peak: from #%d, delta %d; want #%d, %d", doc.From.Snapshot, doc.DeltaBytes, peak.Index, last.HeapBytes-peak.HeapBytes)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestDiffCommandErrors(t *testing.T) {
	a, b := analysisFile("taskpool/before.ms"), analysisFile("taskpool/after.ms")
	tests := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{a}, exitUsage, "two snapshots"},
		{[]string{"--format", "xml", a, b}, exitUsage, `invalid argument "xml" for "--format" flag: want text, markdown or json`},
		{[]string{"--group-by", "file", a, b}, exitUsage, "unknown grouping"},
		{[]string{"--top", "-1", a, b}, exitUsage, "negative"},
		{[]string{a, analysisFile("no-such.ms")}, exitFailure, "no-such.ms"},
		{[]string{a + "#7", b}, exitFailure, "no snapshot 7"},
	}
	for _, tt := range tests {
		_, err := snapctlDiff(t, tt.args...)
		if err == nil {
			t.Errorf("snapctl diff %v succeeded", tt.args)
			continue
		}
		code, msg := describe(err)
		if code != tt.code || !strings.Contains(msg, tt.msg) {
			t.Errorf("snapctl diff %v: exit %d %q, want %d and %q", tt.args, code, msg, tt.code, tt.msg)
		}
	}
}

func TestColorFor(t *testing.T) {
	if colorFor(&bytes.Buffer{}) {
		t.Error("colour for a buffer")
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if colorFor(f) {
		t.Error("colour for a regular file")
	}
	// /dev/null is a character device but no terminal.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if colorFor(null) {
		t.Error("colour for /dev/null")
	}
	master, tty, err := term.OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer tty.Close()
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if !colorFor(tty) {
		t.Error("no colour for a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if colorFor(tty) {
		t.Error("colour for a terminal with NO_COLOR=1")
	}
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "dumb")
	if colorFor(tty) {
		t.Error("colour for TERM=dumb")
	}
}

func TestDiffCommandTree(t *testing.T) {
	out, err := snapctlDiff(t, "--tree", analysisFile("threshold/before.ms"), analysisFile("threshold/after.ms"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"+193.4 KiB  ├─ big_site (threshold.c:22)",
		"  -2.0 KiB  │  └─ main (threshold.c:30)",
		"    +200 B  └─ (below massif's threshold, 1 place)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := snapctlDiff(t, "--tree", "--format", "json", analysisFile("threshold/before.ms"), analysisFile("threshold/after.ms")); err == nil {
		t.Error("--tree --format json succeeded")
	}
}
