package driver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// run.json streamed from the spools is byte for byte what encoding/json
// makes of the whole manifest, so readers see the same schema however long
// the run was; an empty run has empty lists, not nulls.
func TestWriteManifestStreams(t *testing.T) {
	code := 0
	m := &runjson.Manifest{
		Schema: runjson.Schema, Status: runjson.StatusCompleted, StartedAt: time.Unix(1, 0).UTC(), FinishedAt: time.Unix(2, 0).UTC(),
		Plan: planFile, Target: runjson.Target{Argv: []string{"./leak", "a <b>"}, ExitCode: &code},
		Breakpoints: []runjson.BreakpointSummary{{Name: "request", Location: "handle_request", Hits: 3, Snapshots: 3, Unchanged: 1, KeepSnapshots: "changed"}},
		Suspects:    []snapshots.Suspect{{Breakpoint: "request", GrowthPerHit: 16, StackID: new(0)}},
		Stacks:      [][]snapshots.Frame{{{Function: "keep"}, {Function: "main"}}},
	}
	stops, events, diffs := newSpool("stops-*"), newSpool("events-*"), newSpool("diffs-*")
	stops.dir, events.dir, diffs.dir = t.TempDir(), t.TempDir(), t.TempDir()
	defer stops.close()
	defer events.close()
	defer diffs.close()
	whole := *m
	// A message that looks like one of the lists' own lines.
	ev := runjson.Event{Kind: runjson.EventSignal, Message: "a\n  \"stops\": []"}
	events.add(&ev)
	whole.Events = []runjson.Event{ev}
	for i := 1; i <= 3; i++ {
		st := runjson.Stop{Seq: i, Breakpoint: "request", Hit: i, Phase: runjson.PhaseHit, Snapshot: snapshotName(i, "request", i, runjson.PhaseHit),
			Backtrace: []runjson.Frame{{Function: "f", File: "leak.c", Line: 3}}, HeapBytes: int64(16 * i)}
		if i == 3 {
			st.Snapshot, st.SameAsSeq = "", 2
		}
		stops.add(&st)
		whole.Stops = append(whole.Stops, st)
		if i > 1 {
			d := &snapshots.Diff{Kind: "between-hits", Breakpoint: "request", FromSeq: i - 1, ToSeq: i, DeltaBytes: 16,
				Sites: []snapshots.SiteDelta{{Frame: snapshots.Frame{Function: "keep"}, Delta: 16}}}
			diffs.add(d)
			whole.Diffs = append(whole.Diffs, d)
		}
	}
	for _, tc := range []struct {
		name   string
		spools manifestSpools
		want   *runjson.Manifest
	}{
		{"full", manifestSpools{stops: stops, events: events, diffs: diffs}, &whole},
		{"empty", manifestSpools{}, m},
	} {
		dir := t.TempDir()
		if err := writeManifest(dir, m, tc.spools); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, manifestFile))
		if err != nil {
			t.Fatal(err)
		}
		w := *tc.want
		if w.Stops == nil {
			w.Stops, w.Events, w.Diffs = []runjson.Stop{}, []runjson.Event{}, []*snapshots.Diff{}
		}
		want, _ := json.MarshalIndent(&w, "", "  ")
		want = append(want, '\n')
		if !bytes.Equal(want, got) {
			t.Errorf("%s: run.json differs from json.MarshalIndent (-want +got):\n%s", tc.name, cmp.Diff(string(want), string(got)))
		}
	}
	// The spools can be streamed again: run.json is rewritten on every end.
	if stops.len() != 3 || diffs.len() != 2 {
		t.Errorf("spools hold %d stops and %d diffs, want 3 and 2", stops.len(), diffs.len())
	}
}

// run.json stores each distinct stack once: the analysis spools diffs whose
// sites name their stack by stack_id, the reports keep the stacks, and
// ResolveStacks gives a reader back what the analysis made.
func TestManifestStacksOnce(t *testing.T) {
	// What the massif backend's analysis does with each diff: intern its
	// stacks and spool it.
	stacks, diffs := snapshots.NewStackTable(), newSpool(".diffs-*")
	diffs.dir = t.TempDir()
	defer diffs.close()
	keep := []snapshots.Frame{{Function: "keep", File: "leak.c", Line: 12, Addr: "0x1"}, {Function: "main", File: "leak.c", Line: 30}}
	other := []snapshots.Frame{{Function: "other", File: "leak.c", Line: 20}, {Function: "main", File: "leak.c", Line: 31}}
	var made []*snapshots.Diff
	for i := 1; i <= 3; i++ {
		d := &snapshots.Diff{Kind: "between-hits", Breakpoint: "request", FromSeq: i, ToSeq: i + 1, DeltaBytes: 48,
			Sites: []snapshots.SiteDelta{
				{Frame: keep[0], Stack: keep, Delta: 32},
				{Frame: other[0], Stack: other, Delta: 16},
			}}
		spooled := *d
		spooled.Sites = stacks.InternSites(d.Sites)
		diffs.add(&spooled)
		made = append(made, d)
	}
	if stacks.Len() != 2 {
		t.Fatalf("%d stacks in the table, want 2", stacks.Len())
	}
	m := &runjson.Manifest{Schema: runjson.Schema, Suspects: stacks.InternSuspects([]snapshots.Suspect{{Frame: other[0], Stack: other, Breakpoint: "request"}}),
		Stacks: stacks.Stacks()}
	stops := newSpool("stops-*")
	stops.dir = t.TempDir()
	defer stops.close()
	dir := t.TempDir()
	if err := writeManifest(dir, m, manifestSpools{stops: stops, diffs: diffs}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		t.Fatal(err)
	}
	// The sites keep their own frame inline; their callers are only in
	// the table.
	if n := bytes.Count(data, []byte(`"line": 30`)); n != 1 {
		t.Errorf("keep's caller is written %d times, want once, in stacks:\n%s", n, data)
	}
	if n := bytes.Count(data, []byte(`"stack_id": 1`)); n != 4 {
		t.Errorf("%d references to stack 1, want 4 (three diffs and the suspect)", n)
	}
	var got runjson.Manifest
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := got.ResolveStacks(); err != nil {
		t.Fatal(err)
	}
	keep[0].Addr = "" // run.json never held addresses
	for i, d := range got.Diffs {
		if diff := cmp.Diff(made[i].Sites[1].Stack, d.Sites[1].Stack); diff != "" || d.Sites[0].StackID != nil {
			t.Errorf("diff %d site 1 stack (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(keep, d.Sites[0].Stack); diff != "" {
			t.Errorf("diff %d site 0 stack (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(other, got.Suspects[0].Stack); diff != "" {
		t.Errorf("suspect stack (-want +got):\n%s", diff)
	}

	// A stack_id out of the table is an error, not a panic.
	got.Suspects[0].Stack, got.Suspects[0].StackID = nil, new(7)
	if err := got.ResolveStacks(); err == nil {
		t.Error("ResolveStacks accepted stack_id 7 of 2 stacks")
	}
}
