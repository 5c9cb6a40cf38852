package driver

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/runjson"
)

// runMarkVar names the environment variable that marks every process a
// session starts: valgrind with the target, and gdb with the vgdb it runs.
// Its value is the session's private directory. A process keeps its
// environment through fork, exec, setsid and daemon(), so the mark finds
// the session's processes that left the process groups teardown signals (a
// target that daemonized, a vgdb in a session of its own), and lets a later
// run find those of a snapctl that was killed before it could tear down.
// The target sees the variable; a program that empties its environment
// loses the mark.
const runMarkVar = "SNAPCTL_RUN"

// unmarkProgram are the arguments of a gdb that starts the native
// backend's program: the program, and so what it forks or daemonizes,
// does not carry the mark. docs/native.md promises that the program's own
// children run on after a native run, as they would without snapctl.
var unmarkProgram = []string{"-iex", "unset environment " + runMarkVar}

// runMark is the environment entry that marks the processes of the session
// whose private directory is priv.
func runMark(priv string) string { return runMarkVar + "=" + priv }

// EventLeftoversEnded is the event that names the processes snapctl
// ended at the end of a run because they carried its mark: under massif,
// what the program forked or daemonized, which runs under valgrind.
const EventLeftoversEnded runjson.EventKind = "leftovers-ended"

// swept is a process that sweep killed.
type swept struct {
	pid  int
	name string // its command name, /proc/PID/comm
}

// leftovers lists the processes that carry the session's mark and are
// none of its tools (gdb and what gdb runs, vgdb, valgrind with the
// program): what the program forked or daemonized, which under massif
// runs under valgrind. Teardown ends them; sweepAtEnd says so.
func (s *session) leftovers() []swept {
	if s.priv == "" {
		return nil
	}
	tools := []int{os.Getpid(), s.gdb.Pid()}
	for _, p := range s.launcher.Processes(s.gdb.Pid()) {
		tools = append(tools, p.Pid)
	}
	var out []swept
	for _, pid := range marked(runMark(s.priv)) {
		if slices.Contains(tools, pid) || readProcState(pid).ppid == s.gdb.Pid() {
			continue
		}
		if name := procName(pid); name != "vgdb" {
			out = append(out, swept{pid, name})
		}
	}
	return out
}

// sweepAtEnd kills what carries the session's mark at the end of the run
// (skip excepted) and records an event that names each of the program's
// leftovers (found before teardown began) that is gone now, and why.
func (s *session) sweepAtEnd(left []swept, skip ...int) {
	if s.priv == "" {
		return
	}
	sweep(runMark(s.priv), s.opts.Grace, skip...)
	var names []string
	for _, k := range left {
		if !alive(k.pid) {
			names = append(names, fmt.Sprintf("%d (%s)", k.pid, k.name))
		}
	}
	if len(names) == 0 {
		return
	}
	why := "they outlived the run, and nothing snapctl starts may"
	if w := s.launcher.Leftovers(); w != "" {
		why = w
	}
	s.event(runjson.Event{Kind: EventLeftoversEnded, Message: fmt.Sprintf("snapctl ended process %s with SIGKILL at the end of the run: %s", strings.Join(names, ", "), why)})
}

// marked lists the processes whose environment carries mark, snapctl
// excepted. Processes whose environment cannot be read (another user's)
// are not looked at.
func marked(mark string) []int {
	want := []byte(mark)
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, entry := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(entry, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// sweep sends SIGKILL to every process whose environment carries mark and
// waits up to grace for them to be gone. It returns the processes it
// killed. Processes whose environment cannot be read (another user's),
// and skip, are not looked at.
func sweep(mark string, grace time.Duration, skip ...int) []swept {
	var killed []swept
	for _, pid := range marked(mark) {
		if slices.Contains(skip, pid) {
			continue
		}
		name := procName(pid)
		// A stopped process dies of SIGKILL too.
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, swept{pid, name})
		}
	}
	deadline := time.Now().Add(grace)
	for _, k := range killed {
		for alive(k.pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return killed
}

// alive reports whether pid is a process that has not exited: a zombie
// waiting for its parent counts as gone.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// privateLock names the file in a private directory that its session holds
// locked while it runs: the kernel drops the lock when the session's
// process dies, however it dies.
const privateLock = "lock"

// lockPrivateDir locks dir's lock file for the session's life and returns
// the function that releases it. The file is locked under another name and
// then renamed, so that no sweeper can open it unlocked.
func lockPrivateDir(dir string) (release func(), err error) {
	tmp := filepath.Join(dir, privateLock+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, privateLock)); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// sweepDeadRuns ends what a snapctl killed before its teardown left behind:
// for every private directory in tmp (the user's own, named snapctl-*)
// whose lock nobody holds, it kills the processes that carry that run's
// mark and removes the directory.
func sweepDeadRuns(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "snapctl-*"))
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, privateLock), os.O_RDWR, 0)
		if err != nil {
			continue // not a session's private directory, or one from before locks
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue // its session is alive
		}
		sweep(runMark(dir), 2*time.Second)
		os.RemoveAll(dir)
		f.Close()
	}
}

// procName is a process's command name, /proc/PID/comm.
func procName(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}
