package main

// Output paths that are not regular files: snapctl writes through them, as
// a shell's redirection would, and never replaces them.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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

// A massif file whose name holds # can be given bare; FILE#N still picks a
// snapshot of a file whose name does not exist as written.
func TestHashInFileName(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(recordedMassif + "leak.massif")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "massif#1.out")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bare, err := execute(t, "", "show", path)
	if err != nil {
		t.Fatalf("show %s: %v", path, err)
	}
	want, err := execute(t, "", "show", recordedMassif+"leak.massif")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ReplaceAll(bare, path, recordedMassif+"leak.massif") != want {
		t.Errorf("show of the file with # in its name differs from the original")
	}
	if _, err := execute(t, "", "diff", path, path+"#peak"); err != nil {
		t.Errorf("diff %s %s#peak: %v", path, path, err)
	}
}

// show --threshold NaN is a usage error, as any value outside 0..100.
func TestShowThresholdNaN(t *testing.T) {
	t.Parallel()
	_, err := execute(t, "", "show", "--threshold", "NaN", recordedMassif+"leak.massif")
	if code, _ := describe(err); code != exitUsage {
		t.Errorf("show --threshold NaN = %v (exit %d), want a usage error", err, code)
	}
}

// diff of files with 18-digit byte counts: an error naming the line, not
// sums that wrapped around.
func TestDiffHugeCounts(t *testing.T) {
	t.Parallel()
	file := "desc: x\ncmd: x\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=0\nmem_heap_B=0\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n" +
		"n2: 900000000000000000 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n" +
		" n0: 450000000000000000 0x1: f (a.c:1)\n n0: 450000000000000000 0x2: g (a.c:2)\n"
	path := filepath.Join(t.TempDir(), "huge.massif")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := execute(t, "", "diff", path, path)
	if err == nil || !strings.Contains(err.Error(), "huge.massif:12: byte count 900000000000000000 is more than any 64-bit address space holds") {
		t.Errorf("diff = %v, want the line of the huge count", err)
	}
}

// A full TMPDIR, where massif writes each snapshot before snapctl moves it
// into the run directory, from the start (valgrind's gdbserver cannot make
// its FIFOs' shared memory there) and from the middle of a run: the run
// fails saying the file system is full, and no file is left in
// snapshots/ that run.json does not list. The full file system is a small
// tmpfs (the test skips where it cannot mount one).
func TestFullTmpdir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		atStart bool
	}{{"at start", true}, {"mid-run", false}} {
		t.Run(tt.name, func(t *testing.T) {
			bin := testenv.Build(t, fixtures+"faults.c")
			tmp := testenv.SmallFS(t, "1m")
			t.Parallel()
			testenv.NoLeftovers(t)
			if tt.atStart {
				testenv.KeepFull(t, tmp)
			}
			r := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Args: []string{"slow", "10"}, Env: []string{"TMPDIR=" + tmp}, Limit: time.Minute})
			if !tt.atStart {
				waitFile(t, r, filepath.Join(r.out, "snapshots"), 30*time.Second)
				testenv.KeepFull(t, tmp)
			}
			res := r.wait()
			if res.Code != exitFailure {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
			}
			if msg := oneLine(t, res.Stderr); !strings.HasPrefix(msg, "snapctl: no space left on device in "+tmp+": ") {
				t.Errorf("message %q does not say that %s is full", msg, tmp)
			}
			min := 1
			if tt.atStart {
				min = 0
			}
			checkPartial(t, res, "failed", min)
			if res.Run != nil && !strings.HasPrefix(res.Run.Error, "no space left on device") {
				t.Errorf("run.json error %q does not say the disk is full", res.Run.Error)
			}
		})
	}
}
