package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Tests that start processes run in parallel, so the process table holds the
// tools of several tests at once. Each test marks the processes it starts
// with an environment variable of its own (ScopeEnv); gdb, vgdb, valgrind and
// the target inherit it, and it stays with a process that re-parents to the
// subreaper or moves to a session of its own. The checks below look only at
// the processes carrying the test's mark, and at tool processes carrying no
// mark at all: those can only belong to a test that does not run in
// parallel, and so to the one running now.

// scopeVar names the environment variable that marks a test's processes.
const scopeVar = "SNAPCTL_TEST_SCOPE"

var (
	scopes   sync.Map // testing.TB -> string, the test's mark
	scopeSeq atomic.Int64
)

// ScopeEnv returns the environment entry (NAME=VALUE) that marks the
// processes t starts as t's own. Give it to every process a test starts:
// to snapctl, to gdb, to valgrind.
func ScopeEnv(t testing.TB) string {
	if m, ok := scopes.Load(t); ok {
		return m.(string)
	}
	m := fmt.Sprintf("%s=%d.%d", scopeVar, os.Getpid(), scopeSeq.Add(1))
	if prev, loaded := scopes.LoadOrStore(t, m); loaded {
		return prev.(string)
	}
	t.Cleanup(func() { scopes.Delete(t) })
	return m
}

// Mine returns the live descendants of the test binary, of any command,
// that carry t's mark and for which match is true.
func Mine(t testing.TB, match func(Proc) bool) []Proc {
	mark := []byte(ScopeEnv(t))
	return DescendantsWhere(func(p Proc) bool {
		return match(p) && envHas(p.PID, func(entry []byte) bool { return bytes.Equal(entry, mark) })
	})
}

// leftovers returns the tool processes that are t's own or nobody's.
func leftovers(t testing.TB) []Proc {
	mark := []byte(ScopeEnv(t))
	prefix := []byte(scopeVar + "=")
	return DescendantsWhere(func(p Proc) bool {
		if !isTool(p) {
			return false
		}
		marked, mine, read := false, false, false
		envHas(p.PID, func(entry []byte) bool {
			read = true
			if bytes.HasPrefix(entry, prefix) {
				marked, mine = true, bytes.Equal(entry, mark)
				return true
			}
			return false
		})
		// An environment that reads empty is a process that exited, or
		// one in the middle of an exec (valgrind's launcher becoming
		// its tool): nobody's leftover, and perhaps another test's.
		return mine || read && !marked
	})
}

// envHas reports whether one entry of pid's environment satisfies match. A
// process whose environment cannot be read or reads empty (it exited
// meanwhile, or is in the middle of an exec) has none.
func envHas(pid int, match func(entry []byte) bool) bool {
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil || len(env) == 0 {
		return false
	}
	for _, e := range bytes.Split(env, []byte{0}) {
		if match(e) {
			return true
		}
	}
	return false
}

// WaitFor polls the test's own processes until one of kind is alive and
// returns it; it fails the test once a Deadline of timeout has passed.
func WaitFor(t testing.TB, kind Tool, timeout time.Duration) Proc {
	t.Helper()
	return WaitForProc(t, string(kind), func(p Proc) bool { return p.Kind() == kind }, timeout)
}

// WaitForProc polls the test's own processes until one matches and returns
// it; it fails the test, naming what, once a Deadline of timeout has
// passed (timeout on a quiet machine, longer on a loaded one).
func WaitForProc(t testing.TB, what string, match func(Proc) bool, timeout time.Duration) Proc {
	t.Helper()
	deadline := NewDeadline(timeout)
	// A look at the process table reads every process's stat, about 8 ms
	// of processor time in a test binary built with -race: the look
	// comes every 20 ms at first and every 100 ms once the wait is long,
	// so that the tests waiting for gdb or valgrind to start do not keep a
	// processor busy looking.
	interval := 20 * time.Millisecond
	for {
		if ps := Mine(t, match); len(ps) > 0 {
			return ps[0]
		}
		if deadline.Passed() {
			t.Fatalf("no %s started within %v", what, deadline)
		}
		time.Sleep(interval)
		interval = min(interval*5/4, 100*time.Millisecond)
	}
}

// syscallNumbers are the numbers of the system calls tests wait in.
var syscallNumbers = map[string]map[string]string{
	"amd64": {"nanosleep": "35", "clock_nanosleep": "230", "pause": "34", "openat": "257", "waitid": "247"},
	"arm64": {"nanosleep": "101", "clock_nanosleep": "115", "openat": "56", "waitid": "95"},
}

// Sleeping reports whether a thread of process pid is blocked in nanosleep
// or clock_nanosleep. Under valgrind the target's threads make their system
// calls from valgrind's own threads, so a test can see that the target runs
// its own code between two stops (and sleeps there), rather than guess it.
func Sleeping(pid int) bool { return InSyscall(pid, "nanosleep", "clock_nanosleep") }

// InSyscall reports whether a thread of process pid is in one of the named
// system calls.
func InSyscall(pid int, names ...string) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "syscall"))
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		nr, _, _ := bytes.Cut(data, []byte(" "))
		for _, name := range names {
			if want, ok := syscallNumbers[runtime.GOARCH][name]; ok && string(nr) == want {
				return true
			}
		}
	}
	return false
}
