package native_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestSitesAttachRefusesInjection: a program that is not PIE and takes
// the address of malloc and free (as Debian's python3 does) dies of
// SIGSEGV when heaptrack is injected into it, as `heaptrack -p` does it;
// snapctl attach --sites refuses before gdb starts, with exit code 14 and
// what to do instead, and leaves the process untouched. Debian's python3
// is refused alike, where it is such a program.
func TestSitesAttachRefusesInjection(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/native/mallocaddr.c", "-fno-pie", "-no-pie")
	start := func(t *testing.T, argv ...string) int {
		cmd := testenv.StartFixture(t, argv[0], argv[1:]...)
		for deadline := testenv.NewDeadline(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)); len(tasks) >= 4 {
				return cmd.Process.Pid
			}
			if deadline.Passed() {
				t.Fatal("the program did not start its threads")
			}
		}
	}
	refused := func(t *testing.T, pid int, program string) {
		plan := "backend: native\nbreakpoints:\n  - location: free\n    max_hits: 3\n"
		_, err := runSession(t, driver.Options{Measure: driver.Measure{Sites: true}, Attach: driver.Attach{AttachPID: pid}, Timeouts: driver.Timeouts{Timeout: time.Minute}}, plan, "")
		code, reason := driver.ExitStatus(err)
		if code != driver.ExitNoInject || reason != "inject-refused" || !strings.Contains(fmt.Sprint(err), program) ||
			!strings.Contains(fmt.Sprint(err), "not PIE") || !strings.Contains(fmt.Sprint(err), "snapctl run --sites") {
			t.Fatalf("exit %d (%s): %v", code, reason, err)
		}
		st, _ := proc.Status(pid)
		maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if !proc.Alive(pid) || st["TracerPid"] != "0" || strings.Contains(string(maps), "heaptrack") {
			t.Fatalf("the process after the refusal: alive %v, tracer %s, heaptrack loaded %v", proc.Alive(pid), st["TracerPid"], strings.Contains(string(maps), "heaptrack"))
		}
	}
	t.Run("refused", func(t *testing.T) {
		refused(t, start(t, bin), filepath.Base(bin))
	})
	t.Run("python3", func(t *testing.T) {
		python := "/usr/bin/python3"
		if real, err := filepath.EvalSymlinks(python); err == nil {
			python = real
		}
		if err := native.CheckInjectable(os.Getpid()); err != nil {
			t.Fatalf("the test binary is refused: %v", err)
		}
		pid := start(t, python, "-c", "import threading, time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\ntime.sleep(600)")
		if native.CheckInjectable(pid) == nil {
			t.Skipf("%s is a PIE program: heaptrack can be injected", python)
		}
		refused(t, pid, filepath.Base(python))
	})
	// What the refusal spares the program: heaptrack's injection, as
	// `heaptrack -p` makes it, ends it with SIGSEGV.
	t.Run("injected", func(t *testing.T) {
		tools, err := heaptrack.FindTools("")
		if err != nil {
			t.Fatal(err)
		}
		cmd := testenv.StartFixture(t, bin)
		for deadline := testenv.NewDeadline(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid)); len(tasks) >= 4 {
				break
			}
			if deadline.Passed() {
				t.Fatal("the program did not start its threads")
			}
		}
		args := []string{"-q", "-batch", "-nx", "-p", fmt.Sprint(cmd.Process.Pid)}
		for _, c := range tools.InjectCommands(filepath.Join(t.TempDir(), "out")) {
			args = append(args, "-ex", c)
		}
		inject := exec.Command("gdb", args...)
		inject.Env = append(os.Environ(), testenv.ScopeEnv(t))
		out, _ := inject.CombinedOutput()
		if bytes.Contains(out, []byte("Couldn't write extended state status")) {
			// gdb before 14 on a CPU with AMX (docs/facts.md, fact
			// 149): its calls fail, and heaptrack -p loads nothing.
			t.Skipf("gdb cannot restore registers after its calls on this CPU, so heaptrack's own injection never runs:\n%s", out)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if !strings.Contains(fmt.Sprint(err), "segmentation fault") {
				t.Fatalf("the program ended: %v\n%s", err, out)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done // the fixture's cleanup waits only after this Wait
			t.Fatalf("the program survived the injection: the refusal is not needed\n%s", out)
		}
	})
}

// TestAttachSaysProcessDiedInInjection: a process that dies while
// snapctl's calls inject heaptrack into it (diesoninject.c raises SIGSEGV
// once the library is mapped, as the process runs during gdb's calls)
// stays a zombie until its parent reaps it. attach --sites ends with
// exit code 12, the target crashed, and says that the process was killed
// by SIGSEGV as heaptrack was being started in it, not that a thread is
// still inside gdb's call or that the process may die at the next
// breakpoint, which it cannot. Through gdbserver (guard) gdb never
// reported the death while it ran the process on.
func TestAttachSaysProcessDiedInInjection(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/native/diesoninject.c")
	for _, guard := range []bool{true, false} {
		t.Run(fmt.Sprintf("guard=%v", guard), func(t *testing.T) {
			t.Parallel()
			pid := testenv.StartFixture(t, bin).Process.Pid
			testenv.WaitUntil(t, "the program's threads", 10*time.Second, 10*time.Millisecond, func() bool {
				tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
				return len(tasks) >= 6
			})
			plan := "backend: native\nbreakpoints:\n  - location: free\n    max_hits: 3\n"
			_, err := runSession(t, driver.Options{Measure: driver.Measure{Sites: true}, Attach: driver.Attach{AttachPID: pid, Guard: guard}, Timeouts: driver.Timeouts{Timeout: time.Minute}}, plan, "")
			if fate, _ := proc.Fate(pid); fate != "was killed by SIGSEGV" {
				t.Fatalf("the program %q after the attach: %v", fate, err)
			}
			msg := fmt.Sprint(err)
			if code, _ := driver.ExitStatus(err); code != driver.ExitCrashed || !strings.HasPrefix(msg, "target crashed with SIGSEGV: starting heaptrack") ||
				!strings.Contains(msg, fmt.Sprintf("process %d was killed by SIGSEGV", pid)) || strings.Contains(msg, "may die") || strings.Contains(msg, "still inside") {
				t.Errorf("attach: exit %d, %v; want exit %d saying that process %d was killed by SIGSEGV", code, err, driver.ExitCrashed, pid)
			}
		})
	}
}
