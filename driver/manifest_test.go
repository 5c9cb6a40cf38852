package driver

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/snapshots"
)

// run.json streamed from the spools is byte for byte what encoding/json
// makes of the whole manifest, so readers see the same schema however long
// the run was; an empty run has empty lists, not nulls.
func TestWriteManifestStreams(t *testing.T) {
	code := 0
	m := &Manifest{
		Schema: Schema, Status: StatusCompleted, StartedAt: time.Unix(1, 0).UTC(), FinishedAt: time.Unix(2, 0).UTC(),
		Plan: planFile, Target: Target{Argv: []string{"./leak", "a <b>"}, ExitCode: &code},
		Breakpoints: []BreakpointSummary{{Name: "request", Location: "handle_request", Hits: 3, Snapshots: 3, Unchanged: 1, KeepSnapshots: "changed"}},
		Events:      []Event{{Kind: "signal", Message: "a\n  \"stops\": []"}},
		Suspects:    []snapshots.Suspect{{Breakpoint: "request", GrowthPerHit: 16}},
	}
	stops, diffs := newSpool("stops-*"), newSpool("diffs-*")
	stops.dir, diffs.dir = t.TempDir(), t.TempDir()
	defer stops.close()
	defer diffs.close()
	whole := *m
	for i := 1; i <= 3; i++ {
		st := Stop{Seq: i, Breakpoint: "request", Hit: i, Phase: phaseHit, Snapshot: snapshotName(i, "request", i, phaseHit),
			Backtrace: []Frame{{Function: "f", File: "leak.c", Line: 3}}, HeapBytes: int64(16 * i)}
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
		name         string
		stops, diffs *spool
		want         *Manifest
	}{
		{"full", stops, diffs, &whole},
		{"empty", nil, nil, m},
	} {
		dir := t.TempDir()
		if err := writeManifest(dir, m, tc.stops, tc.diffs); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, manifestFile))
		if err != nil {
			t.Fatal(err)
		}
		w := *tc.want
		if w.Stops == nil {
			w.Stops, w.Diffs = []Stop{}, []*snapshots.Diff{}
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
