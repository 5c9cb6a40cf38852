package native_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// The attach tests below assert what snapctl owes a process it attached
// to: it serves after snapctl leaves, however gdb ended, and none of the
// breakpoint instructions gdb wrote is left in it. They do not depend on
// the stops' measurements, whose outcome on a threaded program is the
// stop loop's concern.

// traceStopped reports whether a thread of process pid is stopped by its
// tracer.
func traceStopped(pid int) bool {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if proc.Stat(tid).State == 't' {
			return true
		}
	}
	return false
}

// tracer returns the gdb that traces pid, itself or through its
// gdbserver (driver/backend/native/guard.go), 0 for none.
func tracer(pid int) int {
	st, _ := proc.Status(pid)
	n, _ := strconv.Atoi(st["TracerPid"])
	if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", n)); strings.TrimSpace(string(comm)) == "gdbserver" {
		st, _ = proc.Status(n)
		n, _ = strconv.Atoi(st["PPid"])
	}
	return n
}

// attachPlan has gdb stop every request the server handles, evaluate the
// breakpoint's condition, always false, and resume it: gdb stops and
// resumes the threads as often as requests come, and no stop measures
// anything.
const attachPlan = "backend: native\nstop_timeout: 2s\nbreakpoints:\n  - name: request\n    location: handle_request\n    condition: \"n == 0\"\n"

// attachInBackground runs snapctl attach with plan against pid until it
// returns, and waits until gdb's breakpoints are in the process and it
// runs: no thread is stopped by gdb.
func attachInBackground(t *testing.T, pid int, plan string, opts driver.Options) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	opts.AttachPID, opts.Timeout, opts.Grace = pid, 5*time.Minute, 500*time.Millisecond
	go func() {
		res, err := runSession(t, opts, plan, "")
		if res == nil && err == nil {
			err = errors.New("no run")
		}
		done <- err
	}()
	// gdb's own breakpoints (the dynamic linker's) go in at the attach;
	// the plan's, in the program, once snapctl has set up the run. The
	// wait lasts while gdb works: minutes on a loaded machine.
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	inProgram := func() bool {
		for _, c := range testenv.TextChanges(t, pid) {
			if strings.HasPrefix(c, exe+"+") {
				return true
			}
		}
		return false
	}
	deadline := testenv.NewDeadline(3 * time.Minute)
	for ready := inProgram; ; time.Sleep(time.Millisecond) {
		if ready() {
			if ready = func() bool { return !traceStopped(pid) }; ready() {
				return done
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the attach ended before its breakpoints were in: %v", err)
		default:
		}
		if deadline.Passed() {
			t.Fatal("gdb inserted no breakpoint in the program, or does not let it run")
		}
	}
}

// TestAttachCyclesUnderLoad: two attach and detach cycles on the
// threaded server while 4 clients send requests: after each, it answers
// and runs untraced, and its code is the files' again, and a process
// snapctl detached from is attached again as before.
func TestAttachCyclesUnderLoad(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	// A loaded machine may spend the whole timeout attaching: a cycle
	// that measured nothing is done again with twice the time.
	timeout := 3 * time.Second
	for cycle := 1; cycle <= 2; cycle++ {
		// Every request hits the breakpoint, every tenth is measured
		// with every thread stopped, and the run ends with --timeout,
		// under load.
		res, err := runSession(t, driver.Options{Attach: driver.Attach{AttachPID: srv.Pid}, Timeouts: driver.Timeouts{Timeout: timeout}},
			"backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: 10\n", "")
		if res == nil {
			t.Fatalf("cycle %d: no run: %v", cycle, err)
		}
		m := readManifest(t, res.Dir)
		if !errors.Is(err, driver.ErrTimeout) || !m.Native.Detached {
			t.Errorf("cycle %d: %v, want the timeout and a detach", cycle, err)
		}
		measured := 0
		for _, st := range m.Stops {
			if st.Memory != nil && st.Memory.HeapInUseBytes != nil {
				measured++
			}
		}
		if measured == 0 && timeout < time.Minute {
			t.Logf("cycle %d: %d stops, none with the allocator's figures in %v; again with twice the time", cycle, len(m.Stops), timeout)
			timeout *= 2
			cycle--
		} else if measured == 0 {
			t.Errorf("cycle %d: %d stops, none with the allocator's figures in %v", cycle, len(m.Stops), timeout)
		}
		if g := srv.Settled(); g != "" {
			t.Fatalf("cycle %d: %s", cycle, g)
		}
		if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
			t.Fatalf("cycle %d: breakpoints left in the process: %s", cycle, strings.Join(ch, "; "))
		}
		srv.MustServe(t)
	}
	close(stop)
	if n := answered(); n == 0 {
		t.Errorf("no request of the load was answered")
	}
}

// TestAttachGdbKilled: gdb killed with SIGKILL while attached, its
// breakpoints in the server: snapctl takes them out itself, the server
// serves on, and the message says so. The server is idle when gdb dies:
// under load a thread runs into a breakpoint within the milliseconds
// before snapctl can take it out, and dies of SIGTRAP (docs/facts.md,
// fact 34).
func TestAttachGdbKilled(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	done := attachInBackground(t, srv.Pid, attachPlan, driver.Options{})
	gdb := tracer(srv.Pid)
	if gdb == 0 {
		t.Fatal("the server has no tracer")
	}
	// Without --guard, gdb traces the server itself.
	st, _ := proc.Status(srv.Pid)
	if n, _ := strconv.Atoi(st["TracerPid"]); n != gdb {
		t.Fatalf("the server's tracer is %d (%s), want gdb %d itself", n, proc.Name(n), gdb)
	}
	syscall.Kill(gdb, syscall.SIGKILL)
	err := <-done
	want := fmt.Sprintf("gdb: was killed by SIGKILL during the run; process %d runs on: snapctl removed its ", srv.Pid)
	// Or the guardian did, holding gdb at its exit (hold.go).
	byGuardian := fmt.Sprintf("gdb: was killed by SIGKILL during the run; process %d runs on: snapctl's guardian put back the program's code under its ", srv.Pid)
	if err == nil || !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), byGuardian) {
		t.Errorf("error %v, want it to say %q", err, want)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
	for i := 0; i < 20; i++ {
		srv.MustServe(t)
	}
}

// TestAttachKilledAtOnce: the second Ctrl-C (Options.Kill) kills gdb at
// once: snapctl takes the breakpoints out itself, and the server serves
// on.
func TestAttachKilledAtOnce(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	kill := make(chan struct{})
	done := attachInBackground(t, srv.Pid, attachPlan, driver.Options{Kill: kill})
	close(kill)
	err := <-done
	want := fmt.Sprintf("; process %d runs on: snapctl removed its ", srv.Pid)
	byGuardian := fmt.Sprintf("; process %d runs on: snapctl's guardian put back the program's code under its ", srv.Pid)
	if err == nil || !strings.Contains(err.Error(), want) && !strings.Contains(err.Error(), byGuardian) {
		t.Errorf("error %v, want it to say %q", err, want)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
	srv.MustServe(t)
}

// TestAttachGdbStopped: gdb stopped with SIGSTOP while attached to the
// server under load: the run ends as stalled after stop_timeout, snapctl
// continues gdb, which deletes its breakpoints and detaches, and the
// server serves on.
func TestAttachGdbStopped(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	done := attachInBackground(t, srv.Pid, attachPlan, driver.Options{})
	// Requests go through the breakpoint meanwhile.
	for before, deadline := served(t, srv), testenv.NewDeadline(2*time.Minute); served(t, srv)-before < 2; time.Sleep(10 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatal("no request went through the breakpoint in 2 minutes")
		}
	}
	gdb := tracer(srv.Pid)
	if gdb == 0 {
		t.Fatal("the server has no tracer")
	}
	syscall.Kill(gdb, syscall.SIGSTOP)
	err := <-done
	for _, want := range []string{
		// The stall is the agent's stop, or the run's, by where gdb was.
		"gdb: is stopped (it was sent SIGSTOP or SIGTSTP); the ",
		"(stop_timeout 2s); gdb " + strconv.Itoa(gdb) + " stopped;",
		fmt.Sprintf("process %d runs on: snapctl continued the stopped gdb, which deleted the breakpoints and detached", srv.Pid),
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	// The native backend runs neither vgdb nor valgrind.
	if err != nil && (strings.Contains(err.Error(), "vgdb") || strings.Contains(err.Error(), "valgrind")) {
		t.Errorf("error %v names a process the native backend does not run", err)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
	close(stop)
	if answered() == 0 {
		t.Errorf("no request of the load was answered")
	}
	srv.MustServe(t)
}

// TestAttachGdbInternalError: gdb meets an internal error (the plan's
// init commands provoke one) while attached: it writes no core file,
// goes on, deletes its breakpoints and detaches, and the server serves
// on.
func TestAttachGdbInternalError(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	testenv.AllowCores(t)
	srv := testenv.StartServer(t, "../../testdata/native/tcpserver.c")
	cwd := t.TempDir()
	res, err := runSession(t, driver.Options{Attach: driver.Attach{AttachPID: srv.Pid}, Timeouts: driver.Timeouts{Timeout: time.Minute}}, testenv.InternalErrorPlan("native", cwd), "")
	if res == nil {
		t.Fatalf("no run: %v", err)
	}
	want := `gdb init command "maint internal-error snapctl test": gdb: -interpreter-exec console "maint internal-error snapctl test": Command aborted.`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if m := readManifest(t, res.Dir); !m.Native.Detached {
		t.Errorf("gdb did not detach after its internal error")
	}
	testenv.NoCores(t, cwd, res.Dir, ".")
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Fatalf("breakpoints left in the process: %s", strings.Join(ch, "; "))
	}
	srv.MustServe(t)
}

// TestAttachExited: a process that has exited, reaped or not yet (a
// zombie), is no process to attach to: exit code 6, before gdb starts
// or while it attaches, with gdb's words.
func TestAttachExited(t *testing.T) {
	t.Parallel()
	zombie := exec.Command("true")
	if err := zombie.Start(); err != nil {
		t.Fatal(err)
	}
	defer zombie.Wait()
	pid := zombie.Process.Pid
	for deadline := testenv.NewDeadline(5 * time.Second); proc.Alive(pid); time.Sleep(5 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatal("true did not exit")
		}
	}
	err := native.CheckAttach(pid)
	if code, reason := driver.ExitStatus(err); code != driver.ExitNoProcess || reason != native.AttachNoProcess || !strings.Contains(fmt.Sprint(err), "it has exited (a zombie") {
		t.Errorf("a zombie: %v (exit %d, %s)", err, code, reason)
	}
	gdbSays := fmt.Sprintf("Cannot attach to process %d: Operation not permitted (process %d is a zombie - the process has already terminated)", pid, pid)
	err = native.AttachRefused(pid, gdbSays)
	want := fmt.Sprintf("cannot attach to process %d: it exited while gdb attached to it (gdb: %s)", pid, gdbSays)
	if code, _ := driver.ExitStatus(err); code != driver.ExitNoProcess || fmt.Sprint(err) != want {
		t.Errorf("gdb's refusal: %v (exit %d), want %q", err, code, want)
	}
	zombie.Wait()
	if code, _ := driver.ExitStatus(native.AttachRefused(pid, "No such process.")); code != driver.ExitNoProcess {
		t.Errorf("a reaped process: exit %d", code)
	}
}

// TestNativeChildrenRunOn: under the native backend the program's child
// and the daemon it started run on after the run, as they would without
// snapctl.
func TestNativeChildrenRunOn(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/children.c")
	pidFile := filepath.Join(t.TempDir(), "pids")
	res, m, err := runNative(t, driver.Options{}, roundPlan, bin, pidFile, "60")
	var pids [2]int
	if data, rerr := os.ReadFile(pidFile); rerr == nil {
		fmt.Sscan(string(data), &pids[0], &pids[1])
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			// Gone by now (they sleep 60 s), their numbers may be
			// another test's program's (docs/facts.md, fact 158).
			if pid > 0 && strings.HasPrefix(filepath.Base(bin), proc.Name(pid)) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	if err != nil || m.Status != runjson.StatusCompleted || len(m.Stops) != 1 {
		t.Fatalf("run: %v, status %s, %d stops (%s)", err, m.Status, len(m.Stops), res.Dir)
	}
	// Run has ended every process of its own: one it killed has SIGKILL
	// pending or is gone.
	for i, what := range []string{"child", "daemon"} {
		if pids[i] == 0 || !testenv.Lives(pids[i]) {
			t.Errorf("the program's %s (process %d) did not outlive the run", what, pids[i])
		}
	}
}
