package heaptrack

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFailedRecordingEmptiesFIFO: once the recording has failed (here a
// bad mark in the FIFO), the program's writes into the FIFO still go
// through, four times what the FIFO holds, rather than stop the program
// (and gdb's agent, which writes marks there at a stop); and a Snapshot
// says why the recording failed.
func TestFailedRecordingEmptiesFIFO(t *testing.T) {
	t.Parallel()
	tools := needTools(t)
	rec, err := Start(tools, filepath.Join(t.TempDir(), "heaptrack.fifo"))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	w, err := os.OpenFile(rec.FIFO(), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("v 10100 3\n\x00snapctl-mark x\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(bytes.Repeat([]byte("c 1\n"), fifoSize))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the writes into the FIFO blocked: nothing empties it after the recording failed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := rec.Snapshot(ctx, 1); err == nil || !strings.Contains(err.Error(), "bad mark") {
		t.Errorf("Snapshot after the failure: %v, want the bad mark named", err)
	}
}
