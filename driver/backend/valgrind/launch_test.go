package valgrind

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// vgdb dies with gdb: a vgdb that gdb starts once valgrind has died, and
// before anything reaps it, finds the zombie's pid alive, opens its FIFO
// and waits in that open for ever; a snapctl killed as gdb connects
// left such a vgdb behind (docs/facts.md, fact 161). Here valgrind is
// killed and left a zombie before gdb connects; gdb then dies, and its
// vgdb with it.
func TestVgdbDiesWithGdb(t *testing.T) {
	testenv.MustHave(t, "valgrind", "vgdb", "gdb", "setpriv")
	// The dead vgdb is adopted by the test binary (testenv.Main).
	t.Cleanup(testenv.ReapOrphans)
	vgdbPath, _ := exec.LookPath("vgdb")
	prefix := filepath.Join(t.TempDir(), "vgdb")
	vg := exec.Command("valgrind", "--tool=massif", "--vgdb=yes", "--vgdb-error=0", "--vgdb-prefix="+prefix, "--massif-out-file=/dev/null", "sleep", "60")
	if err := vg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vg.Process.Kill(); vg.Wait() })
	testenv.WaitUntil(t, "valgrind's FIFOs", time.Minute, time.Millisecond, func() bool {
		fifos, _ := filepath.Glob(prefix + "-from-vgdb-to-*")
		return len(fifos) > 0
	})
	vg.Process.Kill()
	testenv.WaitUntil(t, "valgrind to die", time.Minute, time.Millisecond, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", vg.Process.Pid))
		return err == nil && strings.Contains(string(st), ") Z ")
	})
	gdb := exec.Command("gdb", "--nx", "--batch", "-ex", "target remote "+vgdbPipe(vgdbPath, prefix, vg.Process.Pid))
	if err := gdb.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gdb.Process.Kill(); gdb.Wait() })
	vgdb := 0
	testenv.WaitUntil(t, "vgdb to wait in the open of valgrind's FIFO", time.Minute, time.Millisecond, func() bool {
		if vgdb = gdbChild(gdb.Process.Pid); vgdb == 0 {
			return false
		}
		wchan, _ := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", vgdb))
		return string(wchan) == "wait_for_partner"
	})
	t.Cleanup(func() { syscall.Kill(vgdb, syscall.SIGKILL) })
	gdb.Process.Kill()
	gdb.Wait()
	testenv.WaitUntil(t, "vgdb to die with gdb", 5*time.Second, time.Millisecond, func() bool {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", vgdb))
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}
