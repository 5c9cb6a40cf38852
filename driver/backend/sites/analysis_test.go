package sites

import (
	"testing"

	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/snapshots"
)

// The analysis spools each diff with its sites' stacks interned (run.json
// stores each stack once), and keeps the diffs the reports show with
// their stacks whole.
func TestAnalysisInternsSpooledStacks(t *testing.T) {
	p, err := plan.Parse("plan.yaml", []byte("breakpoints:\n  - name: request\n    location: handle_request\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, sk := newTestAnalysis(p)
	keep := []snapshots.Frame{{Function: "keep", File: "leak.c", Line: 12}, {Function: "main", File: "leak.c", Line: 30}}
	other := []snapshots.Frame{{Function: "other", File: "leak.c", Line: 20}, {Function: "main", File: "leak.c", Line: 31}}
	for i := 1; i <= 3; i++ {
		a.add(&snapshots.Diff{Kind: "between-hits", Breakpoint: "request", FromSeq: i, ToSeq: i + 1, DeltaBytes: 48,
			Sites: []snapshots.SiteDelta{{Frame: keep[0], Stack: keep, Delta: 32}, {Frame: other[0], Stack: other, Delta: 16}}})
	}
	if a.stacks.Len() != 2 {
		t.Fatalf("%d stacks in the table, want 2", a.stacks.Len())
	}
	for _, d := range a.shown[shownKey{"request", "between-hits"}] {
		if d.Sites[0].Stack == nil || d.Sites[0].StackID != nil {
			t.Errorf("diff %d..%d for the reports lost its stack: %+v", d.FromSeq, d.ToSeq, d.Sites[0])
		}
	}
	for _, d := range sk.all() {
		if d.Sites[0].Stack != nil || d.Sites[0].StackID == nil {
			t.Errorf("spooled diff %d..%d keeps its stack: %+v", d.FromSeq, d.ToSeq, d.Sites[0])
		}
	}
}
