package main

// Breakpoints in libraries: a static function of a library the program
// links, and one of a plugin it loads with dlopen().

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/internal/testenv"
)

// libraryProgram builds libmain.c against libkeep.c and the plugin, and
// returns the program and the plugin's path.
func libraryProgram(t *testing.T) (bin, plugin string) {
	t.Helper()
	lib := testenv.Build(t, fixtures+"libkeep.c", "-shared", "-fPIC")
	plugin = testenv.Build(t, fixtures+"plugin.c", "-shared", "-fPIC")
	// Linked by path, so the program finds the library wherever the
	// fixture cache is; --no-as-needed keeps it however the linker is
	// set up.
	bin = testenv.Build(t, fixtures+"libmain.c", "-Wl,--no-as-needed", lib, "-ldl")
	return bin, plugin
}

// A static function of a linked library resolves before the run (its
// symbols are read from the library) and one of a plugin with pending:
// true when the plugin loads; both take their exact bytes.
func TestBreakpointsInLibraries(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin, plugin := libraryProgram(t)
	plan := "breakpoints:\n  - name: lib\n    location: lib_keep\n  - name: plugin\n    location: plugin_keep\n    pending: true\n"
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{plugin, "3"}}, exitOK)
	checkCompleted(t, res)
	var got []string
	for _, s := range res.Run.Stops {
		got = append(got, fmt.Sprintf("%s %d %s", s.Breakpoint, s.Hit, s.Frame.Function))
	}
	want := []string{"lib 1 lib_keep", "plugin 1 plugin_keep", "lib 2 lib_keep", "plugin 2 plugin_keep", "lib 3 lib_keep", "plugin 3 plugin_keep"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stops (-want +got):\n%s", diff)
	}
	// Between two hits of one breakpoint, both libraries kept one more
	// block each: 40 + 56 bytes.
	if diff := cmp.Diff([]int64{96, 96}, heapDeltas(res.Run, "lib")); diff != "" {
		t.Errorf("heap deltas at lib (-want +got):\n%s", diff)
	}
}

// A location in no library the program links is a plan error that says
// how to make it pending; one that is pending and never resolves is
// reported by name, as a breakpoint that never hit.
func TestUnresolvedLibraryLocations(t *testing.T) {
	t.Parallel()
	bin, plugin := libraryProgram(t)
	t.Run("not pending", func(t *testing.T) {
		t.Parallel()
		testenv.NoLeftovers(t)
		plan := "breakpoints:\n  - name: plugin\n    location: plugin_keep\n"
		res := runSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{plugin}})
		if res.Code != exitPlan {
			t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitPlan, res.Stderr)
		}
		if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "plan.yaml:3:15") || !strings.Contains(msg, "pending: true") {
			t.Errorf("message %q does not point at the location and suggest pending: true", msg)
		}
	})
	t.Run("never resolves", func(t *testing.T) {
		t.Parallel()
		testenv.NoLeftovers(t)
		plan := "breakpoints:\n  - name: lib\n    location: lib_keep\n  - name: gone\n    location: no_such_plugin_fn\n    pending: true\n"
		res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{plugin, "2"}}, exitNeverHit)
		if msg := oneLine(t, res.Stderr); !strings.Contains(msg, `"gone" never resolved`) {
			t.Errorf("message %q does not say that gone never resolved", msg)
		}
		if len(res.Run.stopsOf("lib")) != 2 {
			t.Errorf("%d stops at lib, want 2", len(res.Run.stopsOf("lib")))
		}
	})
}

// At -O2, Cache::add and std::vector's code are inlined into handle():
// valgrind names those frames by their bare names, and snapctl puts their
// scope back from the program's DWARF, so the site is store::Cache::add
// and the inlined std:: frames are library frames, not sites.
func TestInlinedFramesKeepQualifiedNames(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"inlined.cpp", "-O2")
	plan := "breakpoints:\n  - name: handle\n    location: handle\n"
	res := mustRun(t, session{Plan: plan, Bin: bin, Args: []string{"6"}}, exitOK)
	checkCompleted(t, res)
	if len(res.Run.Suspects) == 0 || res.Run.Suspects[0].Frame.Function != "store::Cache::add" {
		t.Fatalf("suspects %+v, want store::Cache::add first", res.Run.Suspects)
	}
	for _, d := range res.Run.Diffs {
		for _, s := range d.changed() {
			if f := s.Frame.Function; !strings.Contains(f, "::") && !strings.Contains(f, "(") && f != "main" {
				t.Errorf("diff %d→%d: site %q has a bare name", d.FromSeq, d.ToSeq, f)
			}
		}
	}
}
