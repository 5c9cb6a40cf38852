package mi

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestStartWaitsForProgress: a gdb busy for four times its start's
// deadline before its prompt (a slow machine) is waited for; one that
// sleeps is given up after the deadline with a StartTimeoutError.
func TestStartWaitsForProgress(t *testing.T) {
	if _, err := exec.LookPath("gdb"); err != nil {
		t.Skip("gdb is not installed")
	}
	t.Parallel()
	script := func(prelude string) string {
		path := filepath.Join(t.TempDir(), "gdb")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+prelude+"\nexec gdb \"$@\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		busy := script("end=$(($(date +%s) + 4)); while [ $(date +%s) -lt $end ]; do :; done")
		c, err := Start(context.Background(), Options{Path: busy, StartTimeout: time.Second})
		if err != nil {
			t.Fatalf("a gdb busy before its prompt: %v", err)
		}
		c.Close()
	})
	t.Run("asleep", func(t *testing.T) {
		t.Parallel()
		asleep := script("sleep 600")
		start := time.Now()
		_, err := Start(context.Background(), Options{Path: asleep, StartTimeout: time.Second})
		var st *StartTimeoutError
		if !errors.As(err, &st) {
			t.Fatalf("a gdb asleep: %v", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("given up after %v", d)
		}
	})
}
