package driver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// keep_snapshots: changed keeps a snapshot file only when the breakpoint's
// tree changed: steady.c's heap is 100 bytes at hits 1 and 2 and 132 from
// hit 3 on, so only the files of stops 1 and 3 stay. Every stop is still in
// run.json with its totals, and the one diff kept is the +32 bytes.
func TestRunKeepChanged(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/steady.c")
	res, err := runPlan(t, "keep_snapshots: changed\nbreakpoints:\n  - name: tick\n    location: tick\n", bin, "5", "3")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	type stop struct {
		Seq       int
		Snapshot  string
		SameAsSeq int
		HeapBytes int64
	}
	var got []stop
	for _, s := range m.Stops {
		got = append(got, stop{s.Seq, s.Snapshot, s.SameAsSeq, s.HeapBytes})
	}
	want := []stop{
		{1, "snapshots/0001-tick-1.massif.gz", 0, 100},
		{2, "", 1, 100},
		{3, "snapshots/0003-tick-3.massif.gz", 0, 132},
		{4, "", 3, 132},
		{5, "", 3, 132},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	names, err := filepath.Glob(filepath.Join(res.Dir, snapshotDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range names {
		names[i] = filepath.Join(snapshotDir, filepath.Base(names[i]))
	}
	if diff := cmp.Diff([]string{want[0].Snapshot, want[2].Snapshot}, names); diff != "" {
		t.Errorf("files kept (-want +got):\n%s", diff)
	}
	b := m.Breakpoints[0]
	if b.Hits != 5 || b.Snapshots != 5 || b.Unchanged != 3 || b.KeepSnapshots != "changed" {
		t.Errorf("breakpoint summary %+v, want 5 hits, 5 snapshots, 3 unchanged, keep changed", b)
	}
	if len(m.Diffs) != 1 || m.Diffs[0].FromSeq != 2 || m.Diffs[0].ToSeq != 3 || m.Diffs[0].DeltaBytes != 32 {
		t.Fatalf("diffs %+v, want one of +32 B from stop 2 to 3", m.Diffs)
	}
	if s := m.Diffs[0].Sites; len(s) != 1 || s[0].Frame.Function != "grow" || s[0].Delta != 32 {
		t.Errorf("diff sites %+v, want grow +32", s)
	}
	if res.Stops != 5 || res.Diffs != 1 {
		t.Errorf("Result counts %d stops, %d diffs; want 5, 1", res.Stops, res.Diffs)
	}
	// The reports count the four intervals, the three unchanged ones
	// included, though run.json holds one diff.
	if _, err := os.Stat(filepath.Join(res.Dir, manifestFile)); err != nil {
		t.Error(err)
	}
	var out bytes.Buffer
	if err := WriteText(&out, res, snapshots.RenderOptions{MaxDiffs: 3}); err != nil {
		t.Fatal(err)
	}
	if want := "\n  4 intervals between hits (stops 1 → 5): heap 100 B → 132 B (+32 B); sites changed in 1, none in 3; the largest heap change +32 B (stops 2 → 3)\n"; !strings.Contains(out.String(), want) {
		t.Errorf("text report lacks %q:\n%s", want, out.String())
	}
}

// The default keeps every file, even when nothing changed.
func TestRunKeepAll(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/steady.c")
	res, err := runPlan(t, "breakpoints:\n  - name: tick\n    location: tick\n", bin, "3")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	names, _ := filepath.Glob(filepath.Join(res.Dir, snapshotDir, "*"))
	if len(m.Stops) != 3 || len(names) != 3 || len(m.Diffs) != 2 || m.Breakpoints[0].Unchanged != 0 {
		t.Errorf("%d stops, %d files, %d diffs, %d unchanged; want 3, 3, 2, 0", len(m.Stops), len(names), len(m.Diffs), m.Breakpoints[0].Unchanged)
	}
	for _, s := range m.Stops {
		if s.Snapshot == "" || s.SameAsSeq != 0 || s.HeapBytes != 100 {
			t.Errorf("stop %d: snapshot %q, same_as_seq %d, heap %d; want a file and 100 B", s.Seq, s.Snapshot, s.SameAsSeq, s.HeapBytes)
		}
	}
}

// Under around_call, hit and return snapshots are compared each with the
// last kept one of their own phase, and a call that did not change the
// heap leaves no within-call diff.
func TestRunKeepChangedAroundCall(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/steady.c")
	res, err := runPlan(t, "breakpoints:\n  - name: tick\n    location: tick\n    around_call: true\n    keep_snapshots: changed\n", bin, "3")
	if err != nil {
		t.Fatal(err)
	}
	m := readManifest(t, res.Dir)
	type stop struct {
		Seq       int
		Phase     string
		Snapshot  string
		SameAsSeq int
		HeapBytes int64
	}
	var got []stop
	for _, s := range m.Stops {
		got = append(got, stop{s.Seq, s.Phase, s.Snapshot, s.SameAsSeq, s.HeapBytes})
	}
	want := []stop{
		{1, "hit", "snapshots/0001-tick-1.massif.gz", 0, 100},
		{2, "return", "snapshots/0002-tick-1-return.massif.gz", 0, 100},
		{3, "hit", "", 1, 100},
		{4, "return", "", 2, 100},
		{5, "hit", "", 1, 100},
		{6, "return", "", 2, 100},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	names, _ := filepath.Glob(filepath.Join(res.Dir, snapshotDir, "*"))
	if len(names) != 2 || len(m.Diffs) != 0 || m.Breakpoints[0].Unchanged != 4 || m.Breakpoints[0].Snapshots != 6 {
		t.Errorf("%d files, %d diffs, summary %+v; want 2 files, no diff, 6 snapshots of which 4 unchanged", len(names), len(m.Diffs), m.Breakpoints[0])
	}
}

// A snapshot whose tree equals the previous hit's is not parsed: its
// totals and its empty diff come from the previous one. The proof: the
// repeat's time= line is garbage, which the parser refuses and the tree
// sum leaves out.
func TestUnchangedSnapshotNotParsed(t *testing.T) {
	plan := mustPlan(t, "breakpoints:\n  - name: request\n    location: handle_request\n")
	s := scriptedSession(t, plan, newFakeGDB(t))
	st := s.rec.order[0]
	st.agent = true
	records := openAgentRecords(t, s)
	var lines string
	for hit, tm := range []string{"1", "not a time", "3"} {
		snap := filepath.Join(s.priv.dir, fmt.Sprintf("%d.ms", hit+1))
		massif := "desc: --threshold=0\ncmd: ./leak\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=" + tm + "\nmem_heap_B=48\nmem_heap_extra_B=8\nmem_stacks_B=0\nheap_tree=detailed\n" +
			"n1: 48 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n n0: 48 0x1091E0: keep (leak.c:15)\n"
		if err := os.WriteFile(snap, []byte(massif), 0o600); err != nil {
			t.Fatal(err)
		}
		lines += fmt.Sprintf(`{"bp":"1","hit":%d,"time":1790000000.25,"snapshot":%q,"thread":{"id":"1"},"done":false}`+"\n", hit+1, snap)
	}
	appendRecords(t, records, lines)
	if err := s.agent.read(); err != nil {
		t.Fatalf("the agent's read = %v; the repeat was parsed", err)
	}
	stops := spooled[runjson.Stop](t, s.rec.stops)
	diffs := spooled[snapshots.Diff](t, s.rec.diffs)
	if len(stops) != 3 || len(diffs) != 2 {
		t.Fatalf("%d stops, %d diffs; want 3, 2", len(stops), len(diffs))
	}
	for _, stop := range stops {
		if stop.HeapBytes != 48 || stop.HeapExtraBytes != 8 || stop.Snapshot == "" {
			t.Errorf("stop %d: heap %d + %d, file %q; want 48 + 8 and a file", stop.Seq, stop.HeapBytes, stop.HeapExtraBytes, stop.Snapshot)
		}
		// Kept, under its unlisted name until run.json lists it.
		if _, err := os.Stat(unlistedPath(s.out.dir, stop.Snapshot)); err != nil {
			t.Error(err)
		}
	}
	for _, d := range diffs {
		if d.DeltaBytes != 0 || len(d.Sites) != 0 || d.UnchangedSites != 1 || d.BeforeBytes != 48 {
			t.Errorf("diff %d..%d: %+v, want 48 B before and one site unchanged", d.FromSeq, d.ToSeq, d)
		}
	}
}
