package preflight

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// capSysPtrace is CAP_SYS_PTRACE's bit in the capability sets of
// /proc/PID/status.
const capSysPtrace = 19

// Ptrace says whether vgdb may ptrace the valgrind process. vgdb needs
// ptrace only to wake a target whose threads are all blocked in a system
// call; without it such a stop is delivered late, when a thread next
// returns to valgrind.
type Ptrace struct {
	// Scope is kernel.yama.ptrace_scope, -1 when the kernel has no Yama
	// (no restriction beyond the usual same-user rule).
	Scope int
	// CapSysPtrace is true when snapctl holds CAP_SYS_PTRACE.
	CapSysPtrace bool
	// Container is true when snapctl seems to run in a container, where
	// ptrace may be filtered unless CAP_SYS_PTRACE was granted.
	Container bool
}

// CheckPtrace reads the Yama ptrace scope and snapctl's capabilities.
func CheckPtrace() Ptrace {
	return checkPtrace("/proc/sys/kernel/yama/ptrace_scope", "/proc/self/status", inContainer())
}

func checkPtrace(scopeFile, statusFile string, container bool) Ptrace {
	p := Ptrace{Scope: -1, Container: container}
	if data, err := os.ReadFile(scopeFile); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			p.Scope = n
		}
	}
	p.CapSysPtrace = hasCap(statusFile, capSysPtrace)
	return p
}

// hasCap reports whether bit is set in CapEff of a /proc status file.
func hasCap(statusFile string, bit uint) bool {
	f, err := os.Open(statusFile)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<bit) != 0
		}
	}
	return false
}

// inContainer guesses whether snapctl runs in a container.
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	if os.Getenv("container") != "" {
		return true
	}
	data, _ := os.ReadFile("/proc/1/cgroup")
	for _, w := range []string{"docker", "kubepods", "containerd", "lxc", "libpod"} {
		if strings.Contains(string(data), w) {
			return true
		}
	}
	return false
}

// Allowed reports whether vgdb can be expected to ptrace the target.
// Scope 1 is fine: valgrind's gdbserver declares any process its tracer.
func (p Ptrace) Allowed() bool {
	switch {
	case p.Scope >= 3:
		return false
	case p.Scope == 2, p.Container:
		return p.CapSysPtrace
	}
	return true
}

// String describes the state in one phrase, for `snapctl doctor`.
func (p Ptrace) String() string {
	var parts []string
	if p.Scope < 0 {
		parts = append(parts, "no Yama ptrace restrictions")
	} else {
		parts = append(parts, fmt.Sprintf("kernel.yama.ptrace_scope=%d", p.Scope))
	}
	if p.Container {
		parts = append(parts, "in a container")
	}
	if p.CapSysPtrace {
		parts = append(parts, "CAP_SYS_PTRACE held")
	} else {
		parts = append(parts, "no CAP_SYS_PTRACE")
	}
	return strings.Join(parts, ", ")
}

// Finding explains why ptrace is restricted and what it costs; ok is false
// when it is allowed.
func (p Ptrace) Finding() (f Finding, ok bool) {
	if p.Allowed() {
		return Finding{}, false
	}
	const cost = "vgdb cannot wake a target blocked in a system call, so a stop may come late " +
		"(when a blocked thread next returns from the kernel) and Ctrl-C may wait for it"
	f = Finding{Check: "ptrace"}
	switch {
	case p.Scope >= 3:
		f.Summary = fmt.Sprintf("ptrace is disabled (kernel.yama.ptrace_scope=%d)", p.Scope)
		f.Explain = []string{cost, "ptrace_scope 3 can only be lowered by a reboot"}
	case p.Scope == 2:
		f.Summary = "ptrace is restricted to administrators (kernel.yama.ptrace_scope=2) and snapctl lacks CAP_SYS_PTRACE"
		f.Explain = []string{cost, "allow it with: sudo sysctl kernel.yama.ptrace_scope=1"}
	default:
		f.Summary = "snapctl runs in a container without CAP_SYS_PTRACE, where ptrace is usually blocked"
		f.Explain = []string{cost, "start the container with --cap-add=SYS_PTRACE"}
	}
	return f, true
}
