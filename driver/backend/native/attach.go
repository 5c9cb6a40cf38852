package native

import (
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/preflight"
)

// AttachError says why snapctl attach cannot attach to a process. Kind
// picks the exit code: each cause has its own (see ExitStatus).
type AttachError struct {
	Pid  int
	Kind string // AttachNoProcess, AttachNotPermitted, AttachTraced or AttachNoInject
	Msg  string
}

// The kinds of AttachError.
const (
	AttachNoProcess    = "no-such-process"
	AttachNotPermitted = "attach-not-permitted"
	AttachTraced       = "already-traced"
	AttachNoInject     = "inject-refused"
)

func (e *AttachError) Error() string {
	return fmt.Sprintf("cannot attach to process %d: %s", e.Pid, e.Msg)
}

// CheckAttach finds, before gdb starts, what would keep it from attaching
// to pid and can be told from /proc without the kernel's say: no such
// process, or one that a debugger or tracer already traces (a process has
// one tracer). It returns nil when attaching may work; whether snapctl
// may ptrace the process is the kernel's decision (CheckAccess).
func CheckAttach(pid int) error {
	if pid <= 0 {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "not a process id"}
	}
	status, err := proc.Status(pid)
	if err != nil {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "no such process"}
	}
	if st := status["State"]; strings.HasPrefix(st, "Z") || strings.HasPrefix(st, "X") {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "it has exited (a zombie: its parent has not reaped it yet)"}
	}
	if t := strings.TrimSpace(status["TracerPid"]); t != "" && t != "0" {
		tracer, _ := strconv.Atoi(t)
		// TracerPid is the tracing thread; its process is named.
		if ts, err := proc.Status(tracer); err == nil {
			if tg, err := strconv.Atoi(ts["Tgid"]); err == nil {
				tracer = tg
			}
		}
		return &AttachError{Pid: pid, Kind: AttachTraced, Msg: fmt.Sprintf("it is already traced by process %d (%s): a process has one tracer; detach that debugger first", tracer, proc.Name(tracer))}
	}
	return nil
}

// CheckAccess asks the kernel whether snapctl may ptrace pid, and returns
// the program it runs. Reading /proc/PID/exe passes the kernel's ptrace
// access check (the same user, real, effective and saved ids alike, or
// CAP_SYS_PTRACE; a dumpable process), all of attaching's but Yama's,
// which gdb meets: a refusal is explained by notPermitted.
func CheckAccess(pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	switch {
	case err == nil:
		return exe, nil
	case errors.Is(err, fs.ErrPermission):
		return "", notPermitted(pid, "the kernel refuses snapctl ptrace access to it", false)
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := proc.Status(pid); serr != nil {
			return "", &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "no such process"}
		}
		return "", &AttachError{Pid: pid, Kind: AttachNotPermitted, Msg: "it runs no program (a kernel thread, or a process exiting)"}
	}
	return "", &AttachError{Pid: pid, Kind: AttachNotPermitted, Msg: fmt.Sprintf("cannot read its executable: %v", err)}
}

// injectHooks are the functions heaptrack's injected library replaces in
// the relocation table of every module of a running process
// (heaptrack_inject.cpp in heaptrack 1.4).
var injectHooks = []string{"malloc", "free", "calloc", "cfree", "realloc", "posix_memalign", "valloc", "aligned_alloc", "dlopen", "dlclose"}

// CheckInjectable refuses, before gdb starts, to inject heaptrack into
// process pid where the injection is known to crash it: a
// position-dependent program (not PIE) that takes the address of one of
// the functions heaptrack replaces. The function's address, the same in
// every module, is then the program's own PLT entry, which jumps through
// the slot of the program's table that heaptrack replaces: its hook, whose
// "original" function is that PLT entry, calls itself until the thread's
// stack overflows (SIGSEGV inside libheaptrack_inject.so: Debian's
// python3, docs/facts.md, fact 81). heaptrack's preload library
// (snapctl run --sites) interposes by symbol instead and is not affected.
// It returns nil when the program cannot be read.
func CheckInjectable(pid int) error {
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	f, err := elf.Open(exe)
	if err != nil {
		return nil
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC {
		return nil
	}
	syms, err := elfsym.Read(f, elfsym.Dynamic)
	if err != nil {
		return nil
	}
	var taken []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF && s.Value != 0 && elf.ST_TYPE(s.Info) == elf.STT_FUNC &&
			slices.Contains(injectHooks, s.Name) && !slices.Contains(taken, s.Name) {
			taken = append(taken, s.Name)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	path, _ := os.Readlink(exe)
	return &AttachError{Pid: pid, Kind: AttachNoInject, Msg: fmt.Sprintf(
		"heaptrack cannot be injected into it without crashing it: %s is a position-dependent program (not PIE) that takes the address of %s, "+
			"and heaptrack's injected library, which replaces those functions in every module's relocation table, would then call itself until the process dies of SIGSEGV. "+
			"Start the program under `snapctl run --sites` (heaptrack preloaded), or attach without --sites for the native figures; the process was not touched",
		path, strings.Join(taken, ", "))}
}

// AttachRefused explains gdb's refusal to attach (msg): the process ended
// (exit code 6, as for a process that was never there) or got a tracer
// meanwhile, or ptrace was refused.
func AttachRefused(pid int, msg string) error {
	if err := CheckAttach(pid); err != nil {
		var ae *AttachError
		if errors.As(err, &ae) && ae.Kind == AttachNoProcess {
			ae.Msg = "it exited while gdb attached to it (gdb: " + msg + ")"
		}
		return err
	}
	if strings.Contains(msg, "zombie") {
		return &AttachError{Pid: pid, Kind: AttachNoProcess, Msg: "it exited while gdb attached to it (gdb: " + msg + ")"}
	}
	return notPermitted(pid, "gdb: "+msg, true)
}

// notPermitted explains a refused ptrace access to pid (cause says who
// refused) as snapctl doctor explains ptrace: whose the process is and
// whose snapctl is, whether the process is dumpable, and the state doctor
// reports. A refused attach (attaching) may also be Yama's doing, or a
// container's, which do not restrict reading /proc/PID/exe.
func notPermitted(pid int, cause string, attaching bool) error {
	p := preflight.CheckPtrace()
	var why []string
	if !p.CapSysPtrace {
		st, _ := proc.Status(pid)
		if owner := otherOwner(st); owner != "" {
			why = append(why, owner)
		} else if !dumpable(pid, st) {
			why = append(why, "the process is not dumpable (it called prctl(PR_SET_DUMPABLE, 0), or runs a setuid or file-capability program): only a tracer with CAP_SYS_PTRACE may attach to it; run snapctl attach as root with CAP_SYS_PTRACE")
		}
		switch {
		case !attaching:
		case p.Scope == 1:
			why = append(why, "kernel.yama.ptrace_scope=1 lets a process trace only its own descendants: allow attaching with `sudo sysctl kernel.yama.ptrace_scope=0`, or run snapctl with CAP_SYS_PTRACE")
		case p.Scope == 2:
			why = append(why, "kernel.yama.ptrace_scope=2 lets only a tracer with CAP_SYS_PTRACE attach: run snapctl as root, or allow it with `sudo sysctl kernel.yama.ptrace_scope=1`")
		case p.Container:
			why = append(why, "snapctl runs in a container without CAP_SYS_PTRACE, where ptrace is usually blocked: start the container with --cap-add=SYS_PTRACE")
		}
	}
	if attaching && p.Scope >= 3 {
		why = append(why, fmt.Sprintf("kernel.yama.ptrace_scope=%d disables attaching altogether; only a reboot lowers it", p.Scope))
	}
	msg := cause
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	msg += " (ptrace here: " + p.String() + ", as snapctl doctor reports it)"
	return &AttachError{Pid: pid, Kind: AttachNotPermitted, Msg: msg}
}

// otherOwner says whose the process with status st is, when its user or
// group ids (real, effective and saved) are not all snapctl's real ones:
// the kernel then lets only a tracer with CAP_SYS_PTRACE attach. It
// returns "" when they are.
func otherOwner(st map[string]string) string {
	uids, gids := strings.Fields(st["Uid"]), strings.Fields(st["Gid"])
	if len(uids) < 3 || len(gids) < 3 {
		return ""
	}
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	mismatch := func(ids []string, own string) bool {
		return ids[0] != own || ids[1] != own || ids[2] != own
	}
	switch {
	case mismatch(uids, uid):
		return fmt.Sprintf("it runs as %s and snapctl as %s: a process may trace only processes of its own user (real, effective and saved ids alike) unless it holds CAP_SYS_PTRACE; run snapctl attach as that user, or as root with CAP_SYS_PTRACE",
			userName(uids[1]), userName(uid))
	case mismatch(gids, gid):
		return fmt.Sprintf("it runs with group id %s (effective) and snapctl with %s: a process may trace only processes of its own user and group (real, effective and saved ids alike) unless it holds CAP_SYS_PTRACE; run snapctl attach as root with CAP_SYS_PTRACE",
			gids[1], gid)
	}
	return ""
}

// userName is "user id N (name)", or "user id N" when the name is not
// known.
func userName(id string) string {
	if u, err := user.LookupId(id); err == nil {
		return fmt.Sprintf("user id %s (%s)", id, u.Username)
	}
	return "user id " + id
}

// dumpable reports whether the process is dumpable, as the kernel tells
// it: the files under /proc/PID of a process that is not belong to root,
// not to its effective user (the directory itself keeps its owner). A
// process of root's own cannot be told.
func dumpable(pid int, st map[string]string) bool {
	uids := strings.Fields(st["Uid"])
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil || len(uids) < 2 {
		return true
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || strconv.Itoa(int(sys.Uid)) == uids[1]
}
