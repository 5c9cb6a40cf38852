package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
)

// startMarked starts `sleep 60` in a session of its own (as a daemon would
// be) carrying the mark of the run whose private directory is priv.
func startMarked(t *testing.T, priv string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), runMark(priv))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// exitedWithin waits for cmd to end and reports whether it did in time.
func exitedWithin(cmd *exec.Cmd, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// A private directory whose lock nobody holds belongs to a dead snapctl:
// its marked processes are killed and it is removed. One whose session is
// alive, and the processes of that session, are left alone.
func TestSweepDeadRuns(t *testing.T) {
	tmp := t.TempDir()
	dead, err := makePrivateDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	release, err := lockPrivateDir(dead)
	if err != nil {
		t.Fatal(err)
	}
	release() // as the kernel does when snapctl dies
	live, err := makePrivateDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	releaseLive, err := lockPrivateDir(live)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseLive()
	orphan := startMarked(t, dead)
	other := startMarked(t, live)

	sweepDeadRuns(tmp)

	if !exitedWithin(orphan, 5*time.Second) {
		t.Error("the dead run's process is alive after the sweep")
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead run's directory is still there (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(live, privateLock)); err != nil {
		t.Errorf("the live run's directory was touched: %v", err)
	}
	if !proc.Alive(other.Process.Pid) {
		t.Error("the live run's process was killed")
	}
}

// sweep kills a marked process even when it is stopped, and only those
// with the exact mark.
func TestSweepKillsStoppedMarked(t *testing.T) {
	priv := t.TempDir()
	stopped := startMarked(t, priv)
	if err := syscall.Kill(stopped.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	prefixed := startMarked(t, priv+"x") // a mark that merely starts the same
	if got := sweepMarked(runMark(priv), 5*time.Second); len(got) != 1 || got[0].pid != stopped.Process.Pid {
		t.Errorf("sweep killed %v, want [%d]", got, stopped.Process.Pid)
	}
	if !exitedWithin(stopped, 5*time.Second) {
		t.Error("the stopped process survived the sweep")
	}
	if !proc.Alive(prefixed.Process.Pid) {
		t.Error("a process with another mark was killed")
	}
}
