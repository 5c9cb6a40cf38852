package driver

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/preflight"
)

// AttachError says why snapctl attach cannot attach to a process. Kind
// picks the exit code: each cause has its own (see ExitStatus).
type AttachError struct {
	Pid  int
	Kind string // AttachNoProcess, AttachNotPermitted or AttachTraced
	Msg  string
}

// The kinds of AttachError.
const (
	AttachNoProcess    = "no-such-process"
	AttachNotPermitted = "attach-not-permitted"
	AttachTraced       = "already-traced"
)

func (e *AttachError) Error() string {
	return fmt.Sprintf("cannot attach to process %d: %s", e.Pid, e.Msg)
}

// CheckAttach finds, before gdb starts, what would keep it from attaching
// to pid: no such process, a process of another user, one that a debugger
// or tracer already traces, or ptrace restrictions (as snapctl doctor
// explains them). It returns nil when attaching should work.
func CheckAttach(pid int) error {
	if pid <= 0 {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "not a process id"}
	}
	status, err := procStatus(pid)
	if err != nil {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "no such process"}
	}
	if uid := strings.Fields(status["Uid"]); len(uid) > 0 && uid[0] != strconv.Itoa(os.Getuid()) && os.Geteuid() != 0 {
		return &AttachError{Pid: pid, Kind: AttachNotPermitted, Msg: fmt.Sprintf("the process belongs to user id %s, not to you (%d); run snapctl attach as that user", uid[0], os.Getuid())}
	}
	if t := strings.TrimSpace(status["TracerPid"]); t != "" && t != "0" {
		tracer, _ := strconv.Atoi(t)
		// TracerPid is the tracing thread; its process is named.
		if ts, err := procStatus(tracer); err == nil {
			if tg, err := strconv.Atoi(ts["Tgid"]); err == nil {
				tracer = tg
			}
		}
		return &AttachError{Pid: pid, Kind: AttachTraced, Msg: fmt.Sprintf("it is already traced by process %d (%s): a process has one tracer; detach that debugger first", tracer, procName(tracer))}
	}
	return nil
}

// attachError explains gdb's refusal to attach (msg), as doctor explains
// ptrace restrictions.
func attachError(pid int, msg string) error {
	if err := CheckAttach(pid); err != nil {
		return err
	}
	p := preflight.CheckPtrace()
	switch {
	case p.Scope == 1 && !p.CapSysPtrace:
		msg += "; kernel.yama.ptrace_scope=1 lets a process trace only its own descendants: allow attaching with `sudo sysctl kernel.yama.ptrace_scope=0`, or run snapctl with CAP_SYS_PTRACE"
	case !p.Allowed():
		msg += "; " + p.Problem()
	}
	return &AttachError{Pid: pid, Kind: AttachNotPermitted, Msg: "gdb: " + msg}
}

// procStatus reads /proc/PID/status into its fields.
func procStatus(pid int) (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}

func procName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}
