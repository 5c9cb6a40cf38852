package main

// Every valgrind, vgdb and gdb a run starts ends with the run, wherever it
// went: a target that daemonizes, a vgdb that was stopped, a snapctl killed
// with SIGKILL, which cannot tear anything down itself.

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// toolsAlive returns the test's own valgrind, vgdb and gdb still alive
// after up to wait.
func toolsAlive(t *testing.T, wait time.Duration) []testenv.Proc {
	t.Helper()
	deadline := testenv.NewDeadline(wait)
	for {
		left := testenv.Mine(t, func(p testenv.Proc) bool { return p.Kind() != "" })
		if len(left) == 0 || deadline.Passed() {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A target that calls daemon() leaves valgrind's process group and session;
// the run still completes, and the daemon's valgrind ends with it.
func TestDaemonTargetEndsWithTheRun(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"daemon", "2"}}, exitOK)
	checkCompleted(t, res)
	if left := toolsAlive(t, 5*time.Second); len(left) > 0 {
		t.Errorf("alive 5s after the run: %+v", left)
	}
}

// A vgdb stopped with SIGSTOP, in a session of its own, ends with a run
// that --timeout ends.
func TestStoppedVgdbEndsWithTheRun(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	r := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"slow", "100"},
		Flags: []string{"--timeout", "5s"}, Limit: time.Minute})
	vgdb := testenv.WaitFor(t, testenv.Vgdb, 30*time.Second)
	if err := syscall.Kill(vgdb.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	res := r.wait()
	if res.Code != exitTimeout {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitTimeout, res.Stderr)
	}
	if left := toolsAlive(t, 5*time.Second); len(left) > 0 {
		t.Errorf("alive 5s after the run: %+v", left)
	}
}

// snapctl killed with SIGKILL at start-up (valgrind waits for gdb), between
// stops (the target runs), and during around_call's finish (the call never
// returns): no valgrind, vgdb or gdb of the run is alive 5 s later, and
// none left a core file behind.
func TestSnapctlKilled(t *testing.T) {
	t.Parallel()
	for _, m := range []moment{atStartup, atRunning, "finish"} {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			var r *running
			if m == "finish" {
				bin := testenv.Build(t, fixtures+"faults.c")
				plan := "breakpoints:\n  - name: stuck\n    location: stuck\n    around_call: true\n"
				r = startSnapctl(t, session{Plan: plan, Bin: bin, Args: []string{"hang", "1"}, Limit: time.Minute})
				// At the hit, the stop's finish runs the call, which
				// blocks in pause().
				waitFile(t, r, filepath.Join(r.out, "snapshots"), 30*time.Second)
				vg := testenv.WaitFor(t, testenv.Valgrind, 30*time.Second)
				testenv.WaitForProc(t, "valgrind in pause()", func(p testenv.Proc) bool {
					return p.PID == vg.PID && testenv.InSyscall(p.PID, "pause")
				}, 30*time.Second)
			} else {
				r = reach(t, m)
			}
			r.signal(syscall.SIGKILL)
			r.cmd.Wait()
			if left := toolsAlive(t, 5*time.Second); len(left) > 0 {
				t.Errorf("alive 5s after snapctl was killed: %+v", left)
			}
			// gdb, left without snapctl, may end in an internal error:
			// it dumps no core into the user's directory (snapctl's and
			// the program's working directory).
			if cores, _ := filepath.Glob(filepath.Join(r.dir, "core*")); len(cores) > 0 {
				t.Errorf("core files after snapctl was killed: %v", cores)
			}
		})
	}
}

// snapctl killed with SIGKILL while its gdb waits on vgdb (stopped here
// with SIGSTOP as soon as it runs, so that whatever gdb sends through it,
// the connection, a resume or its own exit's kill, goes unanswered): gdb
// ends with snapctl, as valgrind does, rather than wait out its
// remotetimeout, which snapctl sets above its own deadlines; vgdb, let
// go, finds gdb gone and ends too.
func TestSnapctlKilledGdbWaitingOnVgdb(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	r := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"slow", "100"}, Limit: time.Minute})
	vgdb := testenv.WaitFor(t, testenv.Vgdb, 30*time.Second)
	if err := syscall.Kill(vgdb.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(vgdb.PID, syscall.SIGCONT)
	r.signal(syscall.SIGKILL)
	r.cmd.Wait()
	deadline := testenv.NewDeadline(5 * time.Second)
	for {
		gdb := testenv.Mine(t, func(p testenv.Proc) bool { return p.Kind() == testenv.Gdb })
		if len(gdb) == 0 {
			break
		}
		if deadline.Passed() {
			t.Fatalf("gdb alive %s after snapctl was killed: %+v", deadline, gdb)
		}
		time.Sleep(50 * time.Millisecond)
	}
	syscall.Kill(vgdb.PID, syscall.SIGCONT)
	if left := toolsAlive(t, 5*time.Second); len(left) > 0 {
		t.Errorf("alive 5s after vgdb was let go: %+v", left)
	}
}

// The private directory of a snapctl killed with SIGKILL stays in TMPDIR;
// the next run removes it.
func TestNextRunSweepsDeadRun(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"faults.c")
	tmp := t.TempDir()
	env := []string{"TMPDIR=" + tmp}
	r := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"slow", "100"}, Env: env, Limit: time.Minute})
	testenv.WaitFor(t, testenv.Vgdb, 30*time.Second)
	r.signal(syscall.SIGKILL)
	r.cmd.Wait()
	if left := toolsAlive(t, 5*time.Second); len(left) > 0 {
		t.Fatalf("alive 5s after snapctl was killed: %+v", left)
	}
	if dead, _ := filepath.Glob(filepath.Join(tmp, "snapctl-*")); len(dead) == 0 {
		t.Fatal("a killed snapctl left no private directory: nothing to sweep")
	}
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"1"}, Env: env}, exitOK)
	checkCompleted(t, res)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("TMPDIR holds %v after the next run", left)
	}
}
