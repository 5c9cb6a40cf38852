package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestFate tells a process killed by a signal from one that exited, from
// its zombie's wait status, before and after its parent reaps it.
func TestFate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		kill bool
		want string
	}{
		{name: "killed", args: []string{"sleep", "60"}, kill: true, want: "was killed by SIGKILL"},
		{name: "exited", args: []string{"sh", "-c", "exit 3"}, want: "exited with status 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.args[0], tc.args[1:]...)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			if fate, ended := Fate(pid); tc.kill && (fate != "" || ended) {
				t.Errorf("running: Fate = %q, %v; want \"\", false", fate, ended)
			}
			if tc.kill {
				cmd.Process.Kill()
			}
			// A zombie until reaped: wait for it without reaping.
			if _, _, e := syscall.Syscall6(syscall.SYS_WAITID, 1 /* P_PID */, uintptr(pid), uintptr(0), syscall.WEXITED|0x01000000 /* WNOWAIT */, 0, 0); e != 0 {
				t.Fatal(e)
			}
			if fate, ended := Fate(pid); fate != tc.want || !ended {
				t.Errorf("zombie: Fate = %q, %v; want %q, true", fate, ended, tc.want)
			}
			cmd.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for {
				fate, ended := Fate(pid)
				if fate == "has exited" && ended {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("reaped: Fate = %q, %v; want \"has exited\", true", fate, ended)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
