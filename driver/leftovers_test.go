package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// What a run leaves behind on any backend: no core file of gdb's, and
// under massif none of the program's processes, which run under valgrind.
// (What attach leaves in the process it attached to is the native
// backend's, tested in driver/backend/native.)

// TestGdbInternalErrorNoCore: on every backend, the gdb that runs the
// program (native) or reaches valgrind (massif, memcheck) quits on an
// internal error, as gdb does, without the core file gdb would write into
// the program's working directory.
func TestGdbInternalErrorNoCore(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "testdata/native/tcpserver.c")
	for _, backend := range BackendNames() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testenv.MustHave(t, "gdb")
			if traits, _ := BackendTraits(backend); !traits.GDBStarts {
				testenv.MustHave(t, "valgrind")
			}
			testenv.AllowCores(t)
			cwd := t.TempDir()
			res, err := runSession(t, Options{Timeouts: Timeouts{Timeout: time.Minute}}, testenv.InternalErrorPlan(backend, cwd), bin, filepath.Join(cwd, "port"))
			if res == nil {
				t.Fatalf("no run: %v", err)
			}
			if err == nil || !strings.Contains(err.Error(), "gdb: exited with status 1") {
				t.Errorf("error %v, want gdb's exit", err)
			}
			testenv.NoCores(t, cwd, res.Dir, ".")
		})
	}
}

// TestMassifChildrenEnd: under massif the program's child and daemon run
// under valgrind, which may not outlive the run: both end with it, and an
// event names them and says why.
func TestMassifChildrenEnd(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "valgrind")
	bin := testenv.Build(t, "testdata/native/children.c")
	pidFile := filepath.Join(t.TempDir(), "pids")
	res, err := runSession(t, Options{}, "breakpoints:\n  - name: round\n    location: round_done\n", bin, pidFile, "60")
	var pids [2]int
	if data, rerr := os.ReadFile(pidFile); rerr == nil {
		fmt.Sscan(string(data), &pids[0], &pids[1])
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if res == nil || err != nil {
		t.Fatalf("run: %v", err)
	}
	m := readManifest(t, res.Dir)
	var ended []string
	for _, ev := range m.Events {
		if ev.Kind == EventLeftoversEnded {
			ended = append(ended, ev.Message)
		}
	}
	if len(ended) != 1 {
		t.Fatalf("events %+v, want one %s", m.Events, EventLeftoversEnded)
	}
	for i, what := range []string{"child", "daemon"} {
		if pids[i] == 0 || proc.Alive(pids[i]) {
			t.Errorf("the program's %s (process %d) outlived the run", what, pids[i])
		}
		// The child sleeps in the program's process group, which ends
		// with the program: where it went with the group before snapctl
		// looked for what was left, snapctl did not end it and the event
		// rightly leaves it out. The daemon, in a session of its own,
		// is always snapctl's to end.
		if !strings.Contains(ended[0], fmt.Sprintf("%d (", pids[i])) && what == "daemon" {
			t.Errorf("event %q does not name the %s, process %d", ended[0], what, pids[i])
		}
	}
	if !strings.Contains(ended[0], "nothing of valgrind's outlives a massif run") {
		t.Errorf("event %q does not say why", ended[0])
	}
}
