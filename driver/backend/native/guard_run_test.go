package native_test

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestGuardGdbKilledUnderLoad: gdb SIGKILLed twice, at a random moment,
// while 4 clients send requests to the threaded server and every request
// stops at gdb's breakpoint: gdbserver, the server's tracer, keeps it,
// snapctl has gdbserver take the breakpoints out and detach, and the
// server answers on, untraced, its code the files' again, and is
// attached again as before. With gdb as the tracer the server dies of
// SIGTRAP nearly every time (docs/facts.md, fact 63). More random
// moments are bench/harm.sh's: its row "attach: kill -9 gdb/mid-run"
// is this fault through snapctl attach (guarded by default), 10 cycles
// on one server.
func TestGuardGdbKilledUnderLoad(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	for cycle := 1; cycle <= 2; cycle++ {
		// --guard: gdbserver traces the server.
		done := attachInBackground(t, srv.Pid, attachPlan, driver.Options{Attach: driver.Attach{Guard: true}})
		st, _ := proc.Status(srv.Pid)
		if comm, _ := os.ReadFile("/proc/" + st["TracerPid"] + "/comm"); strings.TrimSpace(string(comm)) != "gdbserver" {
			t.Fatalf("cycle %d: the server's tracer is %s (%q), not gdbserver", cycle, st["TracerPid"], comm)
		}
		gdbserver := mustAtoi(st["TracerPid"])
		gdb := tracer(srv.Pid)
		// gdb dies at a random moment once requests go through the
		// breakpoint: however long that takes on a loaded machine.
		before := served(t, srv)
		for deadline := testenv.NewDeadline(2 * time.Minute); served(t, srv)-before < 2; time.Sleep(10 * time.Millisecond) {
			if deadline.Passed() {
				t.Fatalf("cycle %d: no request went through the breakpoint in 2 minutes", cycle)
			}
		}
		time.Sleep(time.Duration(rand.Intn(500)) * time.Millisecond)
		syscall.Kill(gdb, syscall.SIGKILL)
		err := <-done
		want := fmt.Sprintf("gdb: was killed by SIGKILL during the run; process %d runs on: snapctl removed its ", srv.Pid)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "through gdbserver") {
			t.Errorf("cycle %d: error %v, want it to say %q ... through gdbserver", cycle, err, want)
		}
		if g := srv.Settled(); g != "" {
			t.Fatalf("cycle %d: %s", cycle, g)
		}
		if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
			t.Fatalf("cycle %d: breakpoints left in the process: %s", cycle, strings.Join(ch, "; "))
		}
		srv.MustServe(t)
		if proc.Alive(gdbserver) {
			t.Errorf("cycle %d: gdbserver %d outlived the run", cycle, gdbserver)
		}
	}
	close(stop)
	if answered() == 0 {
		t.Errorf("no request of the load was answered")
	}
}

// served is the number of requests the server has answered, read from its
// answer to one more.
func served(t *testing.T, srv *testenv.Server) int {
	t.Helper()
	got, err := srv.Ask("count")
	var n int
	if _, serr := fmt.Sscanf(got, "ok %d ", &n); err != nil || serr != nil {
		t.Fatalf("the server does not answer: %q, %v", got, err)
	}
	return n
}
