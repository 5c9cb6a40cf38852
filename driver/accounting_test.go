package driver

import (
	"errors"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestExecResolved: a breakpoint that hit four times before the target
// exec'd a program without its function resolved, though gdb has made it
// pending again in the new image, and so did one that never hit: run.json
// calls neither unresolved.
func TestExecResolved(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/native/execother.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			plan := roundPlan + "  - name: never\n    location: never_called\n    optional: true\n"
			_, m, err := runNative(t, Options{NoAgent: p.noAgent}, plan, bin, "/bin/true")
			var ee *ExecError
			if !errors.As(err, &ee) || ee.Stops != 4 {
				t.Fatalf("error %v, want an ExecError after 4 stops", err)
			}
			if b := m.Breakpoints[0]; b.Unresolved || b.Hits != 4 || b.Snapshots != 4 {
				t.Errorf("breakpoint %+v, want 4 hits and snapshots, resolved", b)
			}
			if b := m.Breakpoints[1]; b.Unresolved || b.Hits != 0 {
				t.Errorf("breakpoint %+v, want no hit, resolved", b)
			}
		})
	}
}
