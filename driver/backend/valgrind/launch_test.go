package valgrind

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// The stall watch finds vgdb whether gdb's shell execs it or forks it
// (docs/facts.md, fact 30): a shell stands for gdb, and runs a program
// named vgdb as its child, or behind a shell of its own that forks (a
// command follows).
func TestGdbChildBehindShell(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	vgdb := filepath.Join(t.TempDir(), "vgdb")
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vgdb, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, gdb string }{
		{"child", vgdb + " 30; true"},
		{"grandchild", "/bin/sh -c '" + vgdb + " 30; true'; true"},
	} {
		gdb := exec.Command("/bin/sh", "-c", tt.gdb)
		gdb.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := gdb.Start(); err != nil {
			t.Fatal(err)
		}
		var got int
		for deadline := testenv.NewDeadline(10 * time.Second); got == 0 && !deadline.Passed(); time.Sleep(10 * time.Millisecond) {
			got = gdbChild(gdb.Process.Pid)
		}
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", got))
		syscall.Kill(-gdb.Process.Pid, syscall.SIGKILL)
		gdb.Wait()
		if got == 0 || string(comm) != "vgdb\n" {
			t.Errorf("%s: vgdb not found (got pid %d, %q)", tt.name, got, comm)
		}
	}
}
