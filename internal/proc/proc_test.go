package proc

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// TestSelf: the test's own process reads as itself.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	st := Stat(pid)
	// The process's state is its main thread's, which may sleep while
	// another thread of the test runs this (a loaded machine showed S).
	if !st.OK || st.Pid != pid || st.PPid != os.Getppid() || st.State != 'R' && st.State != 'S' || !st.Alive() {
		t.Errorf("Stat(self) = %+v, want running or sleeping, parent %d", st, os.Getppid())
	}
	status, err := Status(pid)
	if err != nil || status["Pid"] != strconv.Itoa(pid) || status["TracerPid"] != "0" {
		t.Errorf("Status(self) = %v, %v", status["Pid"], err)
	}
	if name := Name(pid); name != "proc.test" {
		t.Errorf("Name(self) = %q, want proc.test", name)
	}
}

// TestZombieAndGone: an exited child not yet waited for is a zombie, not
// alive; once reaped it is gone, its name unknown.
func TestZombieAndGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); Stat(pid).State != 'Z'; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d never became a zombie: %+v", pid, Stat(pid))
		}
	}
	if Alive(pid) {
		t.Errorf("zombie %d reads as alive", pid)
	}
	cmd.Wait()
	if st := Stat(pid); st.OK || Alive(pid) || Name(pid) != "unknown" {
		t.Errorf("reaped child %d: %+v, name %q", pid, st, Name(pid))
	}
	if _, err := Status(pid); err == nil {
		t.Errorf("Status of reaped child %d: no error", pid)
	}
	if st := Stat(0); st.OK {
		t.Errorf("Stat(0) = %+v", st)
	}
}
