package child_test

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		kill syscall.Signal
		want string
	}{
		{[]string{"true"}, 0, "exited with status 0"},
		{[]string{"sh", "-c", "exit 3"}, 0, "exited with status 3"},
		{[]string{"sleep", "60"}, syscall.SIGKILL, "was killed by SIGKILL"},
		{[]string{"sleep", "60"}, syscall.SIGTERM, "was killed by SIGTERM"},
		{[]string{"sleep", "60"}, syscall.Signal(40), "was killed by signal 40"},
	} {
		p, err := child.Start("tool", exec.Command(tc.argv[0], tc.argv[1:]...), child.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if tc.kill != 0 {
			p.Signal(tc.kill)
		}
		p.Wait()
		if got := p.Ended(); got != tc.want {
			t.Errorf("%v, %v: %q, want %q", tc.argv, tc.kill, got, tc.want)
		}
		if got := child.Describe(child.StateOf(p.Wait())); tc.want != "exited with status 0" && got != tc.want {
			t.Errorf("%v: from Wait's error %q, want %q", tc.argv, got, tc.want)
		}
	}
	if got := child.Describe(nil); got != "ended" {
		t.Errorf("Describe(nil) = %q", got)
	}
}

// Stop goes on to the next signal only when the child outlives the grace
// period, and ends with the whole group killed: a grandchild that ignores
// SIGTERM goes too.
func TestStopEscalates(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sh", "-c", "trap '' TERM; echo ready; sleep 60 & wait")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := child.Start("tool", cmd, child.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 6)); err != nil { // the trap is set
		t.Fatal(err)
	}
	start := time.Now()
	p.Stop(200*time.Millisecond, syscall.SIGTERM, syscall.SIGKILL)
	if !p.Exited() || !strings.Contains(p.Ended(), "SIGKILL") {
		t.Errorf("after Stop: exited %v, %s", p.Exited(), p.Ended())
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("SIGKILL came after %v, before the grace period", d)
	}
	groupGone(t, p)
}

// groupGone waits for every member of p's process group to be dead: a
// zombie at most, which init reaps in its own time (seconds, in some
// containers).
func groupGone(t *testing.T, p *child.Process) {
	t.Helper()
	for deadline := testenv.NewDeadline(5 * time.Second); liveMembers(p.Pid()) > 0; time.Sleep(10 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatalf("process group %d still has live members after %s", p.Pid(), deadline)
		}
	}
}

// liveMembers counts the processes of group pgid that are not zombies.
func liveMembers(pgid int) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		// state ppid pgrp ...
		if f := strings.Fields(string(data[i+1:])); len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

// A Group kills every child's process group at once.
func TestGroupKill(t *testing.T) {
	t.Parallel()
	var g child.Group
	var procs []*child.Process
	for range 2 {
		p, err := child.Start("tool", exec.Command("sh", "-c", "sleep 60 & wait"), child.Options{DieWithParent: true})
		if err != nil {
			t.Fatal(err)
		}
		g.Add(p)
		procs = append(procs, p)
	}
	g.Kill()
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(testenv.Scaled(10 * time.Second)):
			t.Fatalf("pid %d still runs after Kill", p.Pid())
		}
		groupGone(t, p)
	}
}

// A child that dies with snapctl outlives the thread whose goroutine
// started it: Go ends a thread whose goroutine exits locked to it, as
// native's ptrace goroutines do, and the kernel sends the parent-death
// signal when the forking thread ends.
func TestDieWithParentOutlivesStartingThread(t *testing.T) {
	type started struct {
		p   *child.Process
		tid int
		err error
	}
	ch := make(chan started)
	var s started
	for {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			if syscall.Gettid() == os.Getpid() {
				// Go parks the main thread instead of ending it; the
				// next goroutine runs on another.
				ch <- started{tid: syscall.Gettid()}
				return
			}
			p, err := child.Start("tool", exec.Command("sleep", "60"), child.Options{DieWithParent: true})
			ch <- started{p, syscall.Gettid(), err}
		}()
		if s = <-ch; s.tid != os.Getpid() {
			break
		}
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	defer s.p.Wait()
	task := fmt.Sprintf("/proc/self/task/%d", s.tid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(task); os.IsNotExist(err) {
			break // the kernel has sent whatever the thread's end sends
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d has not ended", s.tid)
		}
	}
	// A parent-death SIGKILL, sent before this SIGTERM, would win.
	s.p.Signal(syscall.SIGTERM)
	s.p.Wait()
	if got := s.p.Ended(); got != "was killed by SIGTERM" {
		t.Errorf("the child %s once the thread that started Start's call ended; want killed by our SIGTERM", got)
	}
}

// Once a child has been reaped, its signals reach the members left in its
// group, and nothing when none is left and the kernel has given the
// child's number to a new process that leads a group of its own, as every
// program gdb starts does: a run that ends minutes after its workload,
// with the cycle of process ids come round, must not kill that program.
func TestSignalAfterReap(t *testing.T) {
	t.Parallel()
	t.Run("left", func(t *testing.T) {
		t.Parallel()
		// A pipe of the test's own: Wait closes StdoutPipe's.
		out, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		cmd := exec.Command("sh", "-c", "sleep 60 >/dev/null & echo $!")
		cmd.Stdout = w
		p, err := child.Start("tool", cmd, child.Options{})
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		var sleeper int
		fmt.Fscan(out, &sleeper)
		p.Wait()
		if sleeper == 0 || !p.Exited() {
			t.Fatalf("no sleep started (pid %d)", sleeper)
		}
		p.Kill()
		groupGone(t, p)
	})
	t.Run("reused", func(t *testing.T) {
		t.Parallel()
		const lastPid = "/proc/sys/kernel/ns_last_pid"
		if f, err := os.OpenFile(lastPid, os.O_WRONLY, 0); err != nil {
			t.Skipf("the next process id cannot be chosen: %v", err)
		} else {
			f.Close()
		}
		// Other processes fork too: try until the new program gets
		// the reaped child's number.
		for try := 0; ; try++ {
			if try == 50 {
				t.Skip("50 tries and the number went to another process each time")
			}
			p, err := child.Start("tool", exec.Command("true"), child.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p.Wait()
			if err := os.WriteFile(lastPid, []byte(strconv.Itoa(p.Pid()-1)), 0); err != nil {
				t.Fatal(err)
			}
			other := exec.Command("sleep", "60")
			other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := other.Start(); err != nil {
				t.Fatal(err)
			}
			if other.Process.Pid != p.Pid() {
				other.Process.Kill()
				other.Wait()
				continue
			}
			// Stopped, the other program keeps a signal pending
			// where it can be read at once.
			other.Process.Signal(syscall.SIGSTOP)
			testenv.WaitUntil(t, "the other program stopped", 10*time.Second, time.Millisecond, func() bool {
				return procState(other.Process.Pid) == "T"
			})
			p.Signal(syscall.SIGTERM)
			p.Kill()
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", other.Process.Pid))
			other.Process.Kill()
			other.Wait()
			for _, line := range strings.Split(string(st), "\n") {
				if pending, ok := strings.CutPrefix(line, "ShdPnd:\t"); ok && pending != "0000000000000000" {
					t.Fatalf("the program that got number %d after the child was reaped has signals %s pending", p.Pid(), pending)
				}
			}
			if !strings.Contains(string(st), "\nShdPnd:\t") {
				t.Fatalf("no ShdPnd in the other program's status:\n%s", st)
			}
			return
		}
	})
}

// procState is process pid's state letter, "" when it is gone.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return ""
	}
	return string(data[i+2])
}
