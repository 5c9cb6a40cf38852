package native

import (
	"testing"

	"github.com/snapctl/snapctl/runjson"
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
