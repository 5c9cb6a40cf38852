package native_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// fixtureProcs returns the test's live processes that run bin: a child
// forked or left stopped would be one.
func fixtureProcs(t *testing.T, bin string) []testenv.Proc {
	return testenv.Mine(t, func(p testenv.Proc) bool {
		return strings.HasPrefix(p.Cmdline, bin) && p.State != "Z"
	})
}

// TestNativeFork: gdb stays with the parent and detaches each child with
// its breakpoints taken out, so the children (which reach round_done
// too, and allocate 1000 blocks each) run to their exit with status 7,
// which the parent checks, and only the parent's 100 chunks of 112 bytes
// a round are measured. The same with a system() a round (a vfork).
func TestNativeFork(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/fork.c")
	for _, mode := range []string{"fork", "spawn"} {
		for _, p := range stopPaths {
			t.Run(mode+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				var out testenv.Buffer
				res, m, err := runNative(t, driver.Options{Streams: driver.Streams{Stdout: &out}, NoAgent: p.noAgent}, roundPlan, bin, mode)
				if err != nil {
					t.Fatal(err)
				}
				if m.Status != runjson.StatusCompleted || m.Target.ExitCode == nil || *m.Target.ExitCode != 0 {
					t.Fatalf("status %s, target %+v, events %+v", m.Status, m.Target, m.Events)
				}
				if len(m.Stops) != 4 || len(m.Events) != 0 {
					t.Fatalf("%d stops, want 4 (the parent's); events %+v", len(m.Stops), m.Events)
				}
				for _, d := range nativeDiffs(t, res.Dir) {
					if *d.MemoryDelta.HeapInUseBytes != 100*112 {
						t.Errorf("diff %d..%d: in-use delta %d, want 11200 (the parent's only)", d.FromSeq, d.ToSeq, *d.MemoryDelta.HeapInUseBytes)
					}
				}
				if n := strings.Count(out.String(), " done\n"); n != 4 {
					t.Errorf("%d children said they were done, want 4:\n%s", n, out.String())
				}
				if left := fixtureProcs(t, bin); len(left) > 0 {
					t.Errorf("processes left behind: %+v", left)
				}
			})
		}
	}
}

// TestNativeAttachFork: attached to a process that forks every round,
// the children run untouched and the parent is measured; after the
// detach it goes on forking (a child that failed would end it).
func TestNativeAttachFork(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/fork.c")
	fixture := testenv.StartFixture(t, bin, "forever")
	pid := fixture.Process.Pid
	res, m, err := runNative(t, driver.Options{Attach: driver.Attach{AttachPID: pid}}, "backend: native\nbreakpoints:\n  - name: round\n    location: round_done\n    max_hits: 5\n", "")
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != runjson.StatusCompleted || len(m.Stops) != 5 || !m.Native.Detached {
		t.Fatalf("status %s, %d stops, native %+v, events %+v", m.Status, len(m.Stops), m.Native, m.Events)
	}
	for _, d := range nativeDiffs(t, res.Dir) {
		if *d.MemoryDelta.HeapInUseBytes != 100*112 {
			t.Errorf("diff %d..%d: in-use delta %d, want 11200", d.FromSeq, d.ToSeq, *d.MemoryDelta.HeapInUseBytes)
		}
	}
	st, err := proc.Status(pid)
	if err != nil || st["TracerPid"] != "0" || strings.HasPrefix(st["State"], "t") || strings.HasPrefix(st["State"], "Z") {
		t.Fatalf("after the run: %v, state %q, tracer %q", err, st["State"], st["TracerPid"])
	}
	runsOn(t, pid)
	// The parent and at most the child of the round under way.
	if left := fixtureProcs(t, bin); len(left) > 2 {
		t.Errorf("children left behind: %+v", left)
	}
}

// TestNativeExec: the target execs itself; the catchpoint ends the run
// there with exit code 9, the two stops before it kept (their in-use
// growth is the first round's 100 chunks of 112 bytes) and none from the
// new image, whose round_done resolves to the same line. gdb ends the
// process.
func TestNativeExec(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/exec.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			var out testenv.Buffer
			res, m, err := runNative(t, driver.Options{Streams: driver.Streams{Stdout: &out}, NoAgent: p.noAgent}, roundPlan, bin)
			var ee *driver.ExecError
			if !errors.As(err, &ee) || ee.Program != bin || ee.Stops != 2 || ee.Attached {
				t.Fatalf("error %v, want an ExecError for %s after 2 stops", err, bin)
			}
			if code, reason := driver.ExitStatus(err); code != driver.ExitExec || reason != driver.ReasonExec {
				t.Errorf("exit %d %s, want %d %s", code, reason, driver.ExitExec, driver.ReasonExec)
			}
			msg := err.Error()
			for _, want := range []string{"called exec", "now runs " + bin, "the 2 stops taken before", "snapctl ended it"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			if m.Status != runjson.StatusFailed || m.ExitCode == nil || *m.ExitCode != driver.ExitExec || m.ExitReason != driver.ReasonExec || m.Target.Exec != bin {
				t.Errorf("status %s, exit %v %s, target %+v", m.Status, m.ExitCode, m.ExitReason, m.Target)
			}
			if len(m.Stops) != 2 || len(m.Diffs) != 1 || *nativeDiffs(t, res.Dir)[0].MemoryDelta.HeapInUseBytes != 100*112 {
				t.Errorf("%d stops, diffs %+v; want 2 stops, one diff of 11200", len(m.Stops), nativeDiffs(t, res.Dir))
			}
			if !slices.ContainsFunc(m.Events, func(e runjson.Event) bool { return e.Kind == "target-exec" && e.Message == msg }) {
				t.Errorf("events %+v: no target-exec", m.Events)
			}
			if strings.Contains(out.String(), "after exec") {
				t.Errorf("the new image ran under the run: %q", out.String())
			}
			if left := fixtureProcs(t, bin); len(left) > 0 {
				t.Errorf("processes left behind: %+v", left)
			}
		})
	}
}

// TestNativeAttachExec: attached, the exec ends the run with exit code
// 9; snapctl deletes its breakpoints and detaches, and the new image
// runs to its end: a breakpoint left at round_done would kill it with
// SIGTRAP.
func TestNativeAttachExec(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/exec.c")
	flag := filepath.Join(t.TempDir(), "exec-now")
	fixture := testenv.StartFixture(t, bin, "forever", flag)
	pid := fixture.Process.Pid
	// The fixture execs once flag exists: made at the third stop.
	plan := fmt.Sprintf("backend: native\nbreakpoints:\n  - name: round\n    location: round_done\n    commands: [\"shell touch %s\"]\n", flag)
	_, m, err := runNative(t, driver.Options{Attach: driver.Attach{AttachPID: pid}}, plan, "")
	var ee *driver.ExecError
	if !errors.As(err, &ee) || !ee.Attached || ee.Pid != pid || ee.Program != bin {
		t.Fatalf("error %v, want an ExecError for process %d", err, pid)
	}
	if code, _ := driver.ExitStatus(err); code != driver.ExitExec || !strings.Contains(err.Error(), "snapctl detached and it goes on running") {
		t.Errorf("exit %d: %v", code, err)
	}
	if !m.Native.Detached || len(m.Stops) == 0 || m.Target.Exec != bin {
		t.Errorf("native %+v, %d stops, target %+v", m.Native, len(m.Stops), m.Target)
	}
	done := make(chan error, 1)
	go func() { done <- fixture.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the new image: %v, want exit status 0", err)
		}
	case <-time.After(testenv.Scaled(10 * time.Second)):
		t.Errorf("the new image did not end after the detach")
		fixture.Process.Kill()
		<-done
	}
}

// TestNativeStaticGlibc: a static program carries glibc's allocator, and
// mallinfo2 with it: its figures are read as in a dynamic one, with no
// no-allocator-state event, and the number of arenas from the program's
// own symbol table.
func TestNativeStaticGlibc(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/leak.c", "-static")
	res, m, err := runNative(t, driver.Options{}, roundPlan, bin, "100")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Stops) != 6 || len(m.Events) != 0 {
		t.Fatalf("%d stops, events %+v", len(m.Stops), m.Events)
	}
	for _, s := range m.Stops {
		if s.Memory == nil || s.Memory.Arenas == nil || *s.Memory.Arenas != 1 {
			t.Errorf("stop %d: memory %+v, want 1 arena", s.Seq, s.Memory)
		}
	}
	for _, d := range nativeDiffs(t, res.Dir) {
		if d.MemoryDelta.HeapInUseBytes == nil || *d.MemoryDelta.HeapInUseBytes != 100*112 {
			t.Errorf("diff %d..%d: in-use delta %v, want 11200", d.FromSeq, d.ToSeq, d.MemoryDelta.HeapInUseBytes)
		}
	}
}

// TestExecResolved: a breakpoint that hit four times before the target
// exec'd a program without its function resolved, though gdb has made it
// pending again in the new image, and so did one that never hit: run.json
// calls neither unresolved.
func TestExecResolved(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/execother.c")
	for _, p := range stopPaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			plan := roundPlan + "  - name: never\n    location: never_called\n    optional: true\n"
			_, m, err := runNative(t, driver.Options{NoAgent: p.noAgent}, plan, bin, "/bin/true")
			var ee *driver.ExecError
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
