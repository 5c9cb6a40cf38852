package main

// Output paths that are not regular files: snapctl writes through them, as
// a shell's redirection would, and never replaces them.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// export -o through a symlink writes the link's target; -o to a FIFO feeds
// its reader; -o /dev/full says the device is full and leaves it a device.
func TestExportThroughNonRegular(t *testing.T) {
	t.Parallel()
	src := recordedMassif + "leak.massif"
	dir := t.TempDir()

	target := filepath.Join(dir, "stacks.folded")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, "", "export", "--format", "folded", src, "-o", link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("export replaced the symlink: %v %v", fi, err)
	}
	folded, err := os.ReadFile(target)
	if err != nil || !strings.Contains(string(folded), "main;") {
		t.Errorf("the symlink's target holds %q (%v), want folded stacks", folded, err)
	}

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		data, _ := os.ReadFile(fifo)
		got <- data
	}()
	if _, err := execute(t, "", "export", "--format", "folded", src, "-o", fifo); err != nil {
		t.Fatal(err)
	}
	if data := <-got; string(data) != string(folded) {
		t.Errorf("the FIFO's reader got %q, want %q", data, folded)
	}

	_, err = execute(t, "", "export", "--format", "folded", src, "-o", "/dev/full")
	if err == nil || !strings.Contains(err.Error(), "writing /dev/full: no space left on device") {
		t.Errorf("export -o /dev/full = %v, want no space left on device", err)
	}
	if fi, err := os.Lstat("/dev/full"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/full is no longer a device: %v %v", fi, err)
	}
}

// run --force into a directory whose run.json and report.md are symlinks
// (to files a CI job collects, say): the run writes the links' targets and
// leaves the links in place.
func TestRunWritesThroughSymlinks(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	out, elsewhere := t.TempDir(), t.TempDir()
	for _, name := range []string{"run.json", "report.md"} {
		if err := os.Symlink(filepath.Join(elsewhere, name), filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	res := parallelRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"exit", "0"}, Out: out, Flags: []string{"--force"}})
	checkExit(t, res, 0, 2)
	for _, name := range []string{"run.json", "report.md"} {
		if fi, err := os.Lstat(filepath.Join(out, name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v %v", name, fi, err)
		}
		if data, err := os.ReadFile(filepath.Join(elsewhere, name)); err != nil || len(data) == 0 {
			t.Errorf("the target of %s holds %d bytes (%v)", name, len(data), err)
		}
	}
}
