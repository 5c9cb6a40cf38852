package testenv

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Tool names one of the three processes a snapctl session supervises.
type Tool string

// The processes of a session, as the fault-injection tests name them.
const (
	Valgrind Tool = "valgrind" // valgrind's tool process, which runs the target
	Vgdb     Tool = "vgdb"     // the relay between gdb and valgrind's gdbserver
	Gdb      Tool = "gdb"
)

// Kind says which of the session's processes p is, or "" for none.
func (p Proc) Kind() Tool {
	fields := strings.Fields(p.Cmdline)
	if len(fields) == 0 {
		return ""
	}
	switch base := filepath.Base(fields[0]); {
	case base == "gdb":
		return Gdb
	case base == "vgdb":
		return Vgdb
	case strings.HasPrefix(base, "massif-"), strings.Contains(p.Cmdline, "--tool="):
		// Debian's launcher is /usr/bin/valgrind.bin, which execs the tool
		// binary (massif-amd64-linux) but keeps its own argv. A valgrind
		// without a tool (valgrind --version, as preflight runs it) runs
		// no program and is not the run's valgrind.
		return Valgrind
	}
	return ""
}

// BuildCommand builds the Go main package in dir (as `go build`) once per
// test binary and returns the path of the executable. It lives in the same
// cache as the C fixtures and is removed with it by Main. When the tests
// themselves run with -race, so does the command, so that end-to-end runs
// also look for data races in the code under test; with -trimpath, so does
// the command, whose packages the go command's cache then holds already,
// built for the tests.
func BuildCommand(t testing.TB, dir string) string {
	t.Helper()
	cacheOnce.Do(func() { cacheDir, cacheErr = os.MkdirTemp("", "snapctl-fixtures-") })
	if cacheErr != nil {
		t.Fatalf("fixture cache: %v", cacheErr)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(cacheDir, "go-"+filepath.Base(abs))

	defer lockBuild(out)()
	if _, err := os.Stat(out); err == nil {
		return out
	}
	args := []string{"build", "-o", out}
	for _, flag := range []string{"-race", "-trimpath"} {
		if buildSetting(flag) == "true" {
			args = append(args, flag)
		}
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = abs
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", abs, err, stderr.String())
	}
	return out
}

// DescendantsWhere returns the live processes descended from the test binary,
// of any command, for which match is true. The fault-injection tests use it
// to see where a run is (gdb running a breakpoint's `shell sleep` command
// means the run is at a stop) and to check that such helpers are gone too.
func DescendantsWhere(match func(Proc) bool) []Proc {
	var out []Proc
	for _, p := range readProcs() {
		if p.State != "Z" && match(p) {
			out = append(out, p)
		}
	}
	return out
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool { return buildSetting("-race") == "true" }

// buildSetting returns the value of the build setting key (such as -race)
// the test binary was built with, or "".
func buildSetting(key string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range bi.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// ReapOrphans waits for the zombie valgrind, vgdb and gdb processes whose
// parent is the test binary: children of a killed snapctl or gdb that Main's
// subreaper adopted and that have since exited. Nothing else waits for
// them, and once the test binary exits they would become zombies of a PID 1
// that may never reap them. Only such adopted tools are reaped, never a
// process an exec.Cmd of the test is waiting for.
func ReapOrphans() {
	self := os.Getpid()
	for _, p := range readProcs() {
		if p.PPID != self || p.State != "Z" {
			continue
		}
		// A zombie has no command line left; its comm names it.
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "comm"))
		name := strings.TrimSpace(string(comm))
		switch {
		case name == "vgdb", name == "gdb", strings.HasPrefix(name, "valgrind"),
			strings.HasPrefix(name, "massif-"), strings.HasPrefix(name, "memcheck-"):
			var ws syscall.WaitStatus
			syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil)
		}
	}
}
