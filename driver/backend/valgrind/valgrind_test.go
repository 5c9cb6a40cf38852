package valgrind

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// waitReady waits past valgrind's banner until valgrind holds open the
// FIFO vgdb writes to: valgrind prints the banner before it makes its
// FIFOs (docs/facts.md, fact 11). A shell plays valgrind: it writes the
// banner, and only 0.3 s later makes the FIFO and opens it.
func TestWaitReadyWaitsForTheFIFO(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "valgrind.log")
	prefix := filepath.Join(dir, "vgdb")
	fifo := prefix + "-from-vgdb-to-1-by-me-on-here"
	script := fmt.Sprintf(`echo '==1== %s: start GDB like this' > %s; sleep 0.3; mkfifo %s; exec 3<>%s; exec sleep 30`, readyBanner, log, fifo, fifo)
	p, err := startValgrind(valgrindConfig{Path: "/bin/sh", Args: []string{"-c", script}, Stdout: io.Discard, Stderr: io.Discard, Log: log, VgdbPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop(time.Second, false)
	if err := p.waitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fifo); err != nil {
		t.Errorf("ready before valgrind made its FIFO: %v", err)
	}
}
