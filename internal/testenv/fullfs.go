package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// KeepFull fills the file system of dir and keeps it full until the test
// ends, taking back within a millisecond any room freed, as a log or
// another program writing there would: snapctl removes each staged
// snapshot once it is kept, and without this the next one would fit in
// the room that freed.
func KeepFull(t testing.TB, dir string) {
	t.Helper()
	fill, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	block := make([]byte, 4096)
	for {
		if _, err := fill.Write(block); err != nil {
			break
		}
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			for {
				if _, err := fill.Write(block[:512]); err != nil {
					break
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(done)
		<-stopped
		fill.Close()
	})
}

// SmallFS mounts a tmpfs of size (mount's size=, "2m") on a new temporary
// directory, unmounted when the test ends, and returns the directory. The
// test is skipped where no tmpfs can be mounted (mounting needs root).
func SmallFS(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}
