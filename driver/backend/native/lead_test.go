package native

import (
	"html"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// TestRunLeadSaidOnce: a run that did not complete says how it ended
// once: "run interrupted", not "run interrupted: run stopped:
// interrupted"; a timeout says its own sentence; another error follows
// the status.
func TestRunLeadSaidOnce(t *testing.T) {
	for _, tt := range []struct {
		status    runjson.Status
		err, want string
	}{
		{runjson.StatusInterrupt, "run stopped: interrupted", "run interrupted"},
		{runjson.StatusTimeout, "run stopped after 10s: timeout expired", "run stopped after 10s: timeout expired"},
		{runjson.StatusFailed, "gdb died", "run failed: gdb died"},
	} {
		m := &runjson.Manifest{Status: tt.status, Error: tt.err}
		if got := nativeVerdicts(m)[0]; got != tt.want {
			t.Errorf("%s: lead %q, want %q", tt.status, got, tt.want)
		}
	}
}

// TestSitesUnmeasuredNotClean: a --sites run whose per-site snapshots
// made no diff (fewer than two of any breakpoint) has nothing to compare:
// report.html says so, never a green "No leak found".
func TestSitesUnmeasuredNotClean(t *testing.T) {
	m := &runjson.Manifest{Status: runjson.StatusCompleted, Native: &runjson.NativeSettings{Sites: true},
		Stops:  []runjson.Stop{{Seq: 1, Breakpoint: "a", Hit: 1, Phase: runjson.PhaseHit}, {Seq: 2, Breakpoint: "a", Hit: 2, Phase: runjson.PhaseHit}},
		Events: []runjson.Event{{Kind: runjson.EventSitesFailed}, {Kind: runjson.EventSitesFailed}}}
	why := sitesUnmeasured(m, &snapshots.Report{})
	if want := "heaptrack's recording took no two per-site snapshots of a breakpoint to compare (2 stops took none; see run.json's events)"; why != want {
		t.Errorf("why %q, want %q", why, want)
	}
	var page strings.Builder
	if err := snapshots.RenderReportHTML(&page, &snapshots.Report{}, snapshots.HTMLOptions{SitesUnmeasured: why}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(page.String(), "No leak found") || !strings.Contains(page.String(), "No per-site figures: "+html.EscapeString(why)) {
		t.Errorf("the page does not say the sites measured nothing:\n%s", page.String())
	}
	diffs := &snapshots.Report{Intervals: []snapshots.IntervalCount{{Breakpoint: "a", Kind: "between-hits", Diffs: 1}}}
	if why := sitesUnmeasured(m, diffs); why != "" {
		t.Errorf("two snapshots of a breakpoint: %q", why)
	}
}
