package testenv

import (
	"os"
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
