package fsutil

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func writeString(s string) func(io.Writer) error {
	return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
}

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A new file is created with perm, an existing regular file replaced with
// its own permissions kept, and no temporary file is left.
func TestRegularFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	if err := WriteFile(path, 0o644, writeString("one")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, 0o644, writeString("two")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "two" || fi.Mode() != 0o600 {
		t.Errorf("file holds %q with mode %v, want \"two\" with -rw-------", got, fi.Mode())
	}
	// A failed write keeps the old file whole.
	boom := errors.New("boom")
	if err := WriteFile(path, 0o644, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("WriteFile = %v, want boom", err)
	}
	if got := readString(t, path); got != "two" {
		t.Errorf("after a failed write the file holds %q, want \"two\"", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%d files in the directory, want 1", len(entries))
	}
}

// A symbolic link is written through: its target changes, the link stays,
// and a dangling link creates its target.
func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, 0o644, writeString("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi, err)
	}
	if got := readString(t, target); got != "new" {
		t.Errorf("target holds %q, want \"new\"", got)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "sub-target"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, 0o644, writeString("created")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, filepath.Join(dir, "sub-target")); got != "created" {
		t.Errorf("dangling link's target holds %q, want \"created\"", got)
	}
}

// A FIFO's reader gets the data, and the FIFO stays a FIFO.
func TestFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		data, _ := os.ReadFile(fifo)
		got <- string(data)
	}()
	if err := WriteFile(fifo, 0o644, writeString("through")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through" {
		t.Errorf("reader got %q, want \"through\"", s)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi, err)
	}
}

// A device is written in place: /dev/full says it is full, and stays a
// device; /dev/null takes anything.
func TestDevice(t *testing.T) {
	err := WriteFile("/dev/full", 0o644, writeString("x"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing /dev/full = %v, want no space left on device", err)
	}
	if fi, err := os.Lstat("/dev/full"); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("/dev/full is no longer a device: %v %v", fi, err)
	}
	if err := WriteFile("/dev/null", 0o644, writeString("x")); err != nil {
		t.Errorf("writing /dev/null: %v", err)
	}
	if err := WriteFile(t.TempDir(), 0o644, writeString("x")); err == nil {
		t.Error("writing a directory succeeded")
	}
}
