package native

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// gdb's answers to starting a program. "During startup program
// terminated with signal SIGKILL" is gdb 13.1's under --sites beside two
// busy loops, the target killed in the wrapper gdb starts it through (the
// fault matrix's "kill -9 target/start-up [sites]", which exited 1 with
// it before); ESRCH's is its answer natively. Each is the target's death,
// exit 12, not snapctl's failure; a program that exited as it started is
// not a kill.
func TestKilledStarting(t *testing.T) {
	for _, c := range []struct {
		msg    string
		signal string
		ok     bool
	}{
		{"gdb: -exec-run: During startup program terminated with signal SIGKILL, Killed.", "SIGKILL", true},
		{"gdb: -exec-run: During startup program terminated with signal SIGSEGV, Segmentation fault.", "SIGSEGV", true},
		{"gdb: -exec-run: Couldn't get CS register: No such process.", "SIGKILL", true},
		{"gdb: -exec-run: During startup program exited with code 127.", "", false},
		{"gdb: -exec-run: No executable file specified.", "", false},
	} {
		sig, ok := killedStarting(errors.New(c.msg))
		if sig != c.signal || ok != c.ok {
			t.Errorf("killedStarting(%q) = %q, %v; want %q, %v", c.msg, sig, ok, c.signal, c.ok)
		}
	}
}

// A program gdb was starting, dead though gdb's error says otherwise
// ("Cannot access memory at address ..." as --sites enables the plan's
// breakpoints): a zombie gives its signal, one gone (gdb reaped it) died
// of SIGKILL, one alive or one that exited is no death at start. Before
// readPid has found it, gdb's children are looked at.
func TestDeadAtStart(t *testing.T) {
	t.Parallel()
	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	check := func(what string, b *Launch, signal string, ok bool) {
		t.Helper()
		if sig, dead := b.deadAtStart(); sig != signal || dead != ok {
			t.Errorf("%s: deadAtStart() = %q, %v; want %q, %v", what, sig, dead, signal, ok)
		}
	}

	// The program readPid found, as the test's own child.
	prog := start("sleep", "1000")
	b := &Launch{pid: prog.Process.Pid}
	check("alive", b, "", false)
	prog.Process.Signal(syscall.SIGTERM)
	testenv.WaitUntil(t, "a zombie", 10*time.Second, time.Millisecond, func() bool { return proc.Stat(b.pid).State == 'Z' })
	check("a zombie killed by SIGTERM", b, "SIGTERM", true)
	prog.Wait()
	check("reaped", b, "SIGKILL", true)

	exited := start("true")
	testenv.WaitUntil(t, "a zombie", 10*time.Second, time.Millisecond, func() bool { return proc.Stat(exited.Process.Pid).State == 'Z' })
	check("a zombie that exited", &Launch{pid: exited.Process.Pid}, "", false)

	// Not found yet: gdb's child. The stand-in for gdb is a shell that
	// starts the program in the background and becomes a sleep, which
	// never reaps it.
	gdbLike := start("sh", "-c", "sleep 1000 & exec sleep 1001")
	var kids []int
	testenv.WaitUntil(t, "the shell's exec and child", 10*time.Second, time.Millisecond, func() bool {
		kids, _ = children(gdbLike.Process.Pid)
		return len(kids) == 1 && proc.Name(gdbLike.Process.Pid) == "sleep"
	})
	b = &Launch{gdb: gdb.NewConn(nil, gdbLike.Process.Pid, time.Second, nil)}
	check("gdb's child alive", b, "", false)
	syscall.Kill(kids[0], syscall.SIGKILL)
	testenv.WaitUntil(t, "a zombie", 10*time.Second, time.Millisecond, func() bool { return proc.Stat(kids[0]).State == 'Z' })
	check("gdb's child a zombie", b, "SIGKILL", true)
}
