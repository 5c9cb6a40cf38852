// Package testenv supports snapctl's tests against the real tools: it
// compiles C and C++ fixtures at test time, skips a test only when a tool is
// truly absent, and checks the process table so that no valgrind, vgdb or gdb
// outlives the test that started it.
//
// A test package that starts processes calls Main from its TestMain. Main
// makes the test binary a child subreaper, so a vgdb or valgrind orphaned by
// a dead parent is re-parented to the test binary instead of to init and is
// still found by NoLeftovers. Tests that start processes may run in
// parallel when every process they start carries their mark (ScopeEnv):
// NoLeftovers and WaitFor look only at the test's own processes.
package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	cacheOnce sync.Once
	cacheDir  string
	cacheErr  error
	// buildLocks holds a mutex per cached binary: the tests that want the
	// same fixture wait for one build of it, and different fixtures build
	// at once (a C++ fixture on OpenFST takes tens of seconds on a loaded
	// machine, which every other test's build used to wait for).
	buildLocks sync.Map // path of the binary -> *sync.Mutex
)

// lockBuild takes the lock of the binary at out and returns its unlock.
func lockBuild(out string) (unlock func()) {
	m, _ := buildLocks.LoadOrStore(out, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Main runs a test package's tests with the test binary as child subreaper,
// removes the fixture cache afterwards and fails the package if any process
// the tests started is still alive. A test binary built with -race exits
// without the race runtime's second of sleep (noRaceExitSleep).
func Main(m *testing.M) int {
	noRaceExitSleep()
	// The tests against the real tools mostly wait: for valgrind to start,
	// for a target's sleeps, for a stop_timeout to pass. Unless -parallel
	// is given, twice as many run at once as there are processors (at
	// least 4): on two cores that halves cmd/snapctl's time.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", strconv.Itoa(max(4, 2*runtime.GOMAXPROCS(0))))
	}
	// gdb runs vgdb through $SHELL (docs/facts.md, fact 30). Sessions
	// and CI machines often have no SHELL, so gdb falls back to /bin/sh:
	// the tests run with that, the shell that does not exec a lone
	// command, wherever they are started from.
	os.Setenv("SHELL", "/bin/sh")
	// PR_SET_CHILD_SUBREAPER = 36.
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, 36, 1, 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "testenv: cannot become child subreaper: %v\n", errno)
	}
	code := m.Run()
	if left := waitDescendants(5 * time.Second); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: processes left behind by the tests:\n%s", describeProcs(left))
		killProcs(left)
		if code == 0 {
			code = 1
		}
	}
	if cacheDir != "" {
		os.RemoveAll(cacheDir)
	}
	return code
}

// noRaceExitSleep runs the test binary again, in its own place (exec,
// the same process), with atexit_sleep_ms=0 added to GORACE when it was
// built with -race and GORACE does not set that option. The race
// runtime sleeps a second at every exit of a program built with it, for
// goroutines still running to report a race: a second at the end of each
// package's tests, and one at the end of every run of the -race snapctl
// the end-to-end tests start (more than 400 of them), which inherit the
// variable. When the tests have ended, nothing is left running to
// report.
func noRaceExitSleep() {
	gorace := os.Getenv("GORACE")
	if !raceEnabled() || strings.Contains(gorace, "atexit_sleep_ms") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	env := []string{"GORACE=" + strings.TrimSpace(gorace+" atexit_sleep_ms=0")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	err = syscall.Exec(exe, os.Args, env)
	fmt.Fprintf(os.Stderr, "testenv: running the tests again without the race runtime's sleep at exit: %v\n", err)
}

// MustHave skips the test when one of the named tools is not on PATH. CI
// installs them all, so there the tests always run.
func MustHave(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
}

// Build compiles one C or C++ source file (by its extension: .c with gcc,
// anything else with g++) with `-g -O0 -pthread` and extra flags, and returns
// the path of the binary. Builds are cached per source content and flags for
// the life of the test binary.
func Build(t testing.TB, src string, flags ...string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("reading fixture: %v", err)
	}
	compiler := "g++"
	if filepath.Ext(src) == ".c" {
		compiler = "gcc"
	}
	MustHave(t, compiler)
	args := append([]string{"-g", "-O0", "-pthread"}, flags...)
	h := sha256.New()
	h.Write(data)
	fmt.Fprint(h, compiler, args)
	key := hex.EncodeToString(h.Sum(nil))[:16]

	cacheOnce.Do(func() { cacheDir, cacheErr = os.MkdirTemp("", "snapctl-fixtures-") })
	if cacheErr != nil {
		t.Fatalf("fixture cache: %v", cacheErr)
	}
	name := strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	out := filepath.Join(cacheDir, name+"-"+key)

	defer lockBuild(out)()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	abs, err := filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	cmdArgs := append(append([]string{}, args...), "-o", out, abs)
	cmd := exec.Command(compiler, cmdArgs...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", compiler, strings.Join(cmdArgs, " "), err, stderr.String())
	}
	return out
}

// NoLeftovers registers a cleanup that fails the test if any valgrind, vgdb
// or gdb the test started (carrying its mark, or no mark at all) is still
// alive once the test has ended. It gives them a few seconds to exit, then
// kills what remains so one failing test does not poison the next.
func NoLeftovers(t testing.TB) {
	t.Helper()
	ScopeEnv(t) // the mark outlives the test's own cleanups
	t.Cleanup(func() {
		left := waitFor(5*time.Second, func() []Proc { return leftovers(t) })
		if len(left) == 0 {
			return
		}
		t.Errorf("processes left behind:\n%s", describeProcs(left))
		killProcs(left)
	})
}

// Descendants returns the live processes (not zombies) descended from the
// test binary whose command is valgrind, vgdb, gdb or a valgrind tool.
func Descendants() []Proc { return DescendantsWhere(isTool) }

// Proc is one entry of the process table.
type Proc struct {
	PID, PPID int
	State     string
	Cmdline   string
}

func isTool(p Proc) bool {
	fields := strings.Fields(p.Cmdline)
	if len(fields) == 0 {
		return false
	}
	base := filepath.Base(fields[0])
	switch {
	case base == "valgrind", base == "vgdb", base == "gdb":
		return true
	case strings.HasPrefix(base, "memcheck-"), strings.HasPrefix(base, "massif-"):
		return true // valgrind's tool binary, which replaces valgrind by exec
	}
	// A valgrind'ed target keeps valgrind's launcher in argv[0]'s place only
	// sometimes; the tool name is the reliable mark.
	return strings.Contains(p.Cmdline, "--tool=massif") || strings.Contains(p.Cmdline, "vgdb --")
}

func waitDescendants(grace time.Duration) []Proc { return waitFor(grace, Descendants) }

// waitFor polls list until it is empty or grace has passed, and returns
// what it last listed.
func waitFor(grace time.Duration, list func() []Proc) []Proc {
	deadline := time.Now().Add(grace)
	for {
		left := list()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func killProcs(ps []Proc) {
	for _, p := range ps {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	// Reap those of them that were re-parented to us, so no zombie stays
	// in the table; only those: a child that another test, running
	// beside this one, is waiting for is that test's to reap.
	self := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	for left := ps; len(left) > 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var next []Proc
		for _, p := range left {
			if p.PPID != self {
				continue // its parent reaps it
			}
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil); pid == 0 && err == nil {
				next = append(next, p)
			}
		}
		left = next
	}
}

func describeProcs(ps []Proc) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  pid %d (ppid %d, %s): %s\n", p.PID, p.PPID, p.State, p.Cmdline)
	}
	return b.String()
}

// readProcs lists the test binary's live and zombie descendants. Every
// process's stat is read, for its parent, and only the descendants' command
// lines: the waits of the tests list them every few milliseconds, beside
// the other work of a shared machine, and reading every process's command
// line made each listing twice the work.
func readProcs() []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var all []Proc
	parent := make(map[int]int, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		parent[pid] = ppid
		all = append(all, Proc{PID: pid, PPID: ppid, State: f[0]})
	}
	self := os.Getpid()
	var out []Proc
	for _, p := range all {
		if !descends(p.PPID, self, parent) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "cmdline"))
		p.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		out = append(out, p)
	}
	return out
}

// descends reports whether ppid is root or one of its descendants, by the
// parents of the process table.
func descends(ppid, root int, parent map[int]int) bool {
	for q, n := ppid, 0; q > 1 && n < 64; q, n = parent[q], n+1 {
		if q == root {
			return true
		}
	}
	return false
}

// LineOf returns the number of the only line of the fixture src that
// contains marker, so tests do not hard-code line numbers. It fails the
// test when no line or more than one does.
func LineOf(t testing.TB, src, marker string) int {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for n, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, marker) {
			if found != 0 {
				t.Fatalf("%s: %q on lines %d and %d", src, marker, found, n+1)
			}
			found = n + 1
		}
	}
	if found == 0 {
		t.Fatalf("%s: no line contains %q", src, marker)
	}
	return found
}
