package driver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/plan"
)

// TestPlanBackendsAreTheList: the plan's enum of backends names the list's
// backends in the list's order, so that a plan's default is the run's.
func TestPlanBackendsAreTheList(t *testing.T) {
	if diff := cmp.Diff(BackendNames(), plan.Backends); diff != "" {
		t.Errorf("plan.Backends (-list +plan):\n%s", diff)
	}
}

// TestBackendChecks: what a run refuses before it starts anything, by what
// the backend can do (its traits), each message naming the backend that
// can.
func TestBackendChecks(t *testing.T) {
	const bp = "breakpoints:\n  - location: main\n"
	for _, tt := range []struct {
		name, plan string
		opts       Options
		want       string
	}{
		{"sites under massif", "native:\n  sites: true\n" + bp, Options{Measure: Measure{Backend: "massif"}},
			"plan.yaml:2:10: native.sites: true needs the native backend, and --backend massif was given, which records call sites already: drop one of them"},
		{"--sites under memcheck", bp, Options{Measure: Measure{Backend: "memcheck", Sites: true}},
			"--sites is the native backend's per-site recording: memcheck records sites already; drop --sites or use --backend native"},
		{"lost bytes natively", bp + "report:\n  fail_on:\n    lost_per_hit: 1\n", Options{Measure: Measure{Backend: "native"}},
			"plan.yaml:5:19: report.fail_on.lost_per_hit: needs a backend that tells lost blocks from reachable ones (memcheck), and the run uses native"},
		{"attach under massif", bp, Options{Measure: Measure{Backend: "massif"}, Attach: Attach{AttachPID: os.Getpid()}},
			"attaching to a process needs the native backend"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "plan.yaml")
			if err := os.WriteFile(path, []byte(tt.plan), 0o644); err != nil {
				t.Fatal(err)
			}
			opts := tt.opts
			opts.PlanPath, opts.Binary, opts.OutDir = path, "/bin/true", filepath.Join(dir, "run")
			res, err := Run(context.Background(), opts)
			if res != nil || err == nil {
				t.Fatalf("Run: %v, %v; want no result and an error", res, err)
			}
			if got := err.Error(); got != filepath.Join(dir, tt.want) && got != tt.want {
				t.Errorf("Run: %q\nwant %q", got, tt.want)
			}
		})
	}
}
