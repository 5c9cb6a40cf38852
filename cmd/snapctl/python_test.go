package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/preflight"
)

// A C library that python3 calls through ctypes, on both backends: the
// breakpoint is pending until ctypes loads the library, then stops at
// every call with its exact bytes, and no warning speaks of python3's
// debug information, which no breakpoint is in (Debian ships python3
// stripped, its debug info and symbols in a package of their own).
func TestPythonCtypesLibrary(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "python3")
	// The interpreter itself, not a shim script (pyenv's) that runs it.
	var python string
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil {
			if info, err := preflight.InspectBinary(path); err == nil {
				python, _ = filepath.EvalSymlinks(info.Path)
				break
			}
		}
	}
	if python == "" {
		t.Skip("no python3 interpreter that is a compiled program")
	}
	lib := testenv.Build(t, fixtures+"ctypeslib.c", "-shared", "-fPIC")
	script, err := filepath.Abs(fixtures + "callclib.py")
	if err != nil {
		t.Fatal(err)
	}
	const plan = "breakpoints:\n  - name: keep\n    location: keep_item\n    pending: true\n"
	for _, backend := range []string{"massif", "native"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testenv.NoLeftovers(t)
			res := mustRun(t, session{Plan: plan, Bin: python, Args: []string{script, lib, "4"}, Flags: []string{"--backend", backend}}, exitOK)
			if res.Run.Status != "completed" {
				t.Errorf("status %q, want completed", res.Run.Status)
			}
			if got := len(res.Run.stopsOf("keep")); got != 4 {
				t.Errorf("%d stops at keep, want 4", got)
			}
			if strings.Contains(res.Stderr, "warning: "+python) {
				t.Errorf("a warning about %s, where no breakpoint is:\n%s", python, res.Stderr)
			}
			if backend != "massif" {
				return
			}
			if len(res.Run.Suspects) == 0 || res.Run.Suspects[0].Frame.Function != "keep_item" || res.Run.Suspects[0].GrowthPerHit != 40 || res.Run.Suspects[0].TotalGrowth != 120 {
				t.Errorf("suspects %+v, want keep_item at 40 B per hit, 120 B in all", res.Run.Suspects)
			}
		})
	}
}
