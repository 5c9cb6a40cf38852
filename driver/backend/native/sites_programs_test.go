package native_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/preflight"
	"github.com/snapctl/snapctl/snapshots"
)

// TestSitesCtypes: python3 loads a C library with ctypes (dlopen, after
// heaptrack's preload has been recording since the start) and calls it
// from four Python threads. The breakpoint, pending until the library
// loads, stops at every other round_done, six times; the suspect is the
// library's keep_record, in the threads' stacks, with its exact bytes and
// blocks per hit (every: 2 divides the two rounds of each interval), and
// use_scratch, which allocates as much and frees it, is no suspect.
func TestSitesCtypes(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	python := interpreter(t)
	lib := testenv.Build(t, "../../testdata/sites/ctlib.c", "-shared", "-fPIC")
	script, err := filepath.Abs("../../testdata/sites/threads.py")
	if err != nil {
		t.Fatal(err)
	}
	const plan = "backend: native\nnative:\n  sites: true\nbreakpoints:\n  - name: round\n    location: round_done\n    pending: true\n    every: 2\n    max_hits: 11\n"
	var out testenv.Buffer
	_, m, err := runNative(t, driver.Options{Streams: driver.Streams{Stdout: &out}}, plan, python, script, lib, "12")
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if m.Native == nil || !m.Native.Sites || len(m.Stops) != 6 {
		t.Fatalf("native %+v, %d stops; events %+v", m.Native, len(m.Stops), m.Events)
	}
	for i, s := range m.Stops {
		if s.Hit != 2*i+1 || s.Snapshot == "" {
			t.Errorf("stop %d: hit %d, snapshot %q, want hit %d with a snapshot", s.Seq, s.Hit, s.Snapshot, 2*i+1)
		}
	}
	line := testenv.LineOf(t, "../../testdata/sites/ctlib.c", "/* the leak */")
	want := map[string]string{"keep_record": fmt.Sprintf("ctlib.c:%d 4000 B/hit 4 blocks/hit 40000 B in all over 5 intervals", line)}
	if diff := cmp.Diff(want, siteFigures(m)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s\nevents %+v", diff, m.Events)
	}
	// keep_record is called from the Python threads, not the main one.
	if len(m.Suspects) == 1 && !slices.ContainsFunc(m.Suspects[0].Stack, func(f snapshots.Frame) bool { return f.Function == "start_thread" }) {
		t.Errorf("the suspect's stack is not a thread's: %+v", m.Suspects[0].Stack)
	}
}

// interpreter returns the path of the python3 interpreter itself (not a
// shim script, pyenv's, that runs it), or skips the test.
func interpreter(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if info, err := preflight.InspectBinary(path); err == nil {
			if real, err := filepath.EvalSymlinks(info.Path); err == nil {
				return real
			}
		}
	}
	t.Skip("no python3 interpreter that is a compiled program")
	return ""
}

// TestSitesAVX512: a program that executes AVX-512 instructions, which
// valgrind does not decode, so the massif backend cannot run it (checked
// first, where valgrind is installed, as the reason sites exist);
// natively with sites its leak is found, figure for figure.
func TestSitesAVX512(t *testing.T) {
	t.Parallel()
	if !cpuHas(t, "avx512f") {
		t.Skip("the CPU lacks avx512f")
	}
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/sites/avx512.c", "-mavx512f")
	if _, err := exec.LookPath("valgrind"); err == nil {
		valgrindStops(t, bin, "1")
	}
	const plan = "backend: native\nnative:\n  sites: true\nbreakpoints:\n  - name: round\n    location: round_done\n"
	_, m, err := runNative(t, driver.Options{}, plan, bin, "6")
	if err != nil {
		t.Fatal(err)
	}
	if m.Native == nil || !m.Native.Sites || len(m.Stops) != 6 {
		t.Fatalf("native %+v, %d stops; events %+v", m.Native, len(m.Stops), m.Events)
	}
	line := testenv.LineOf(t, "../../testdata/sites/avx512.c", "malloc(LANES")
	want := map[string]string{"keep_lanes": fmt.Sprintf("avx512.c:%d 640 B/hit 1 blocks/hit 3200 B in all over 5 intervals", line)}
	if diff := cmp.Diff(want, siteFigures(m)); diff != "" {
		t.Errorf("suspects (-want +got):\n%s\nevents %+v", diff, m.Events)
	}
}

// valgrindStops checks that valgrind cannot run bin: it stops at an
// instruction it does not decode and ends the program, and itself, with
// SIGILL.
func valgrindStops(t *testing.T, bin string, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command("valgrind", append([]string{"--tool=none", bin}, args...)...)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("valgrind ran %s: %v\n%s", bin, err, stderr.String())
	}
	ws, _ := exit.Sys().(syscall.WaitStatus)
	if !strings.Contains(stderr.String(), "unhandled instruction bytes") || ws.Signal() != syscall.SIGILL {
		t.Errorf("valgrind did not stop at an unknown instruction: %v\n%s", err, stderr.String())
	}
}

// cpuHas tells whether /proc/cpuinfo lists flag for the CPU.
func cpuHas(t *testing.T, flag string) bool {
	t.Helper()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo: %v", err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(name) == "flags" {
			return strings.Contains(" "+value+" ", fmt.Sprintf(" %s ", flag))
		}
	}
	return false
}
