package driver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/snapctl/snapctl/driver/mi"
)

// signalNames are the names of the signals a child is likely to die of.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSYS: "SIGSYS", syscall.SIGXCPU: "SIGXCPU", syscall.SIGXFSZ: "SIGXFSZ",
}

func signalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}

// describeState says how a child process ended: "was killed by SIGKILL",
// "exited with status 1".
func describeState(st *os.ProcessState) string {
	if st == nil {
		return "ended"
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "was killed by " + signalName(ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// childState returns the state in a Wait error, nil when there is none.
func childState(err error) *os.ProcessState {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ProcessState
	}
	return nil
}

// gdbExit describes how gdb went, from the client's error.
func gdbExit(err error) (string, string) {
	var ee *mi.ExitError
	if errors.As(err, &ee) {
		if ee.State != nil {
			return describeState(ee.State) + " during the run", ee.Stderr
		}
		return "exited during the run", ee.Stderr
	}
	return "exited during the run", ""
}
