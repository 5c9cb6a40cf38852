package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDoctorGdbserver: gdbserver found is an OK line with its version;
// missing from PATH, a warning that names Debian's package and no failure,
// since snapctl attach runs without it.
func TestDoctorGdbserver(t *testing.T) {
	if _, err := exec.LookPath("gdbserver"); err == nil {
		var out bytes.Buffer
		r := &doctorReport{w: &out}
		checkGdbserver(context.Background(), r)
		if !strings.HasPrefix(out.String(), "OK    gdbserver   GNU gdbserver ") || len(r.failed) != 0 {
			t.Errorf("with gdbserver on PATH: %q, failed %v", out.String(), r.failed)
		}
	}
	t.Setenv("PATH", t.TempDir())
	var out bytes.Buffer
	r := &doctorReport{w: &out}
	checkGdbserver(context.Background(), r)
	want := []string{
		"WARN  gdbserver   not found on PATH: snapctl attach runs without it, gdb tracing the process: a process it attached to dies of SIGTRAP if gdb is killed while the process runs into a breakpoint",
		"                  install it with: sudo apt-get install gdbserver",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
		t.Errorf("without gdbserver (-want +got):\n%s", diff)
	}
	if len(r.failed) != 0 {
		t.Errorf("a missing gdbserver failed doctor: %v", r.failed)
	}
	// A gdbserver that is not one: a warning too.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gdbserver"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	out.Reset()
	checkGdbserver(context.Background(), r)
	if !strings.HasPrefix(out.String(), "WARN  gdbserver   at "+dir+"/gdbserver does not run") || len(r.failed) != 0 {
		t.Errorf("a broken gdbserver: %q, failed %v", out.String(), r.failed)
	}
}

// TestDoctorHeaptrack: heaptrack found is an OK line with its directory;
// missing, a warning that names what is missing and Debian's package, and
// no failure, since only --sites needs it.
func TestDoctorHeaptrack(t *testing.T) {
	var out bytes.Buffer
	r := &doctorReport{w: &out}
	if _, err := os.Stat("/usr/lib/heaptrack/libheaptrack_preload.so"); err == nil {
		checkHeaptrack(context.Background(), r, "")
		if got := out.String(); got != "OK    heaptrack   /usr/lib/heaptrack\n" || len(r.failed) != 0 {
			t.Errorf("with heaptrack installed: %q, failed %v", got, r.failed)
		}
	}
	dir := t.TempDir()
	out.Reset()
	checkHeaptrack(context.Background(), r, dir)
	want := []string{
		"WARN  heaptrack   not installed (" + dir + "/libheaptrack_preload.so is missing): the native backend's per-site recording (--sites, native.sites) needs it; runs without sites do not",
		"                  install it with: sudo apt-get install heaptrack",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
		t.Errorf("without heaptrack (-want +got):\n%s", diff)
	}
	if len(r.failed) != 0 {
		t.Errorf("a missing heaptrack failed doctor: %v", r.failed)
	}
}

// TestDoctorHeaptrackBrokenInterpreter: heaptrack's libraries beside an
// interpreter that exits at once, as a broken install's does: not OK for
// --sites, in heaptrack's line, with the interpreter's own words.
func TestDoctorHeaptrackBrokenInterpreter(t *testing.T) {
	dir := fakeHeaptrack(t, "echo 'heaptrack_interpret: error while loading shared libraries: libdw.so.1' >&2; exit 127")
	var out bytes.Buffer
	r := &doctorReport{w: &out}
	checkHeaptrack(context.Background(), r, dir)
	want := []string{
		"WARN  heaptrack   " + dir + "/libexec/heaptrack_interpret does not work: it failed (exit status 127, saying \"heaptrack_interpret: error while loading shared libraries: libdw.so.1\"): not OK for --sites, whose runs would record no call site (they exit 1)",
		"                  reinstall it with: sudo apt-get install --reinstall heaptrack",
	}
	if diff := cmp.Diff(want, strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// fakeHeaptrack is a copy of the installed heaptrack's libraries with an
// interpreter that is the shell script body.
func fakeHeaptrack(t *testing.T, body string) string {
	t.Helper()
	const lib = "/usr/lib/heaptrack"
	if _, err := os.Stat(lib + "/libheaptrack_preload.so"); err != nil {
		t.Skip("heaptrack is not installed (Debian: heaptrack)")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/libexec", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, so := range []string{"libheaptrack_preload.so", "libheaptrack_inject.so"} {
		data, err := os.ReadFile(lib + "/" + so)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+so, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(dir+"/libexec/heaptrack_interpret", []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
