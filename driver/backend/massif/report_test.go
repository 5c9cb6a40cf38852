package massif

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// The report leads with the verdict, how the run ended and each
// breakpoint's stops, then the sites' sections: 33 unchanged intervals
// make one line in the terminal and in report.md.
func TestReportCountsUnchanged(t *testing.T) {
	c := snapshots.IntervalCount{Breakpoint: "b", Kind: "between-hits"}
	for i := 1; i <= 33; i++ {
		c.Count(&snapshots.Diff{Kind: "between-hits", Breakpoint: "b", FromSeq: i, ToSeq: i + 1,
			BeforeBytes: 2936012, AfterBytes: 2936012, Sites: []snapshots.SiteDelta{}})
	}
	rep := &snapshots.Report{Breakpoints: []string{"b"}, Diffs: []*snapshots.Diff{}, Suspects: []snapshots.Suspect{}, Intervals: []snapshots.IntervalCount{c}}
	res := &backend.Outcome{Dir: "/runs/x", Manifest: &runjson.Manifest{Status: runjson.StatusCompleted, Breakpoints: []runjson.BreakpointSummary{{Name: "b", Location: "f", Hits: 34, Snapshots: 34}}},
		Report: rep, Stops: 34, Diffs: 17}
	var out bytes.Buffer
	if err := WriteText(&out, res, snapshots.RenderOptions{MaxDiffs: 3, MaxSites: 10}); err != nil {
		t.Fatal(err)
	}
	want := `verdict: no leak found: no site grew between hits
snapctl run: 
status: completed
breakpoint b (f): 34 hits, 34 snapshots
run directory: /runs/x

Suspects: sites that grow between hits
  none: no site grew steadily between hits.

Breakpoint b
  33 intervals between hits (stops 1 → 34): heap 2.8 MiB → 2.8 MiB (0 B); no site changed in any
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("text report (-want +got):\n%s", diff)
	}
	md := filepath.Join(t.TempDir(), reportFile)
	if err := writeReport(md, res); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "no site changed"); n != 1 || strings.Contains(string(data), "#### Stop") ||
		!strings.HasPrefix(string(data), "# snapctl run\n\n- Command: ``\n- Status: **completed**\n- Stops: 34\n\n| Breakpoint | Location | Hits | Snapshots |\n|---|---|---:|---:|\n| b | `f` | 34 | 34 |\n\n") ||
		!strings.Contains(string(data), "\n- 33 intervals between hits (stops 1 → 34): heap 2.8 MiB → 2.8 MiB (0 B); no site changed in any.\n") {
		t.Errorf("report.md:\n%s", data)
	}
}
