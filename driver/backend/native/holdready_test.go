package native

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestWaitHoldReady: snapctl's wait for its guardian's hold (fact 133)
// ends when the guardian has marked it, gives up as soon as the guardian
// has ended without marking it, and otherwise at its limit.
func TestWaitHoldReady(t *testing.T) {
	dir := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid

	if waitHoldReady(dir, pid, 50*time.Millisecond) {
		t.Error("ready with no mark")
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		holdReady(dir)
	}()
	if !waitHoldReady(dir, pid, time.Minute) {
		t.Error("not ready once the guardian marked it")
	}

	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if waitHoldReady(t.TempDir(), ended.Process.Pid, time.Minute) {
		t.Error("ready for a guardian that ended without marking it")
	}
	if d := time.Since(start); d > testenv.Scaled(10*time.Second) {
		t.Errorf("waited %v for a guardian that had ended", d)
	}
	if _, err := os.Stat(filepath.Join(dir, holdReadyFile)); err != nil {
		t.Error(err)
	}
}
