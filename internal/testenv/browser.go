package testenv

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/child"
)

// Chromium returns the path of a Chromium browser (Debian package
// chromium). Without one the test is skipped, unless the CI environment
// variable is set: .ci/run installs chromium, so there a missing browser is
// a failure, not a skip.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed (Debian package chromium); CI must install it")
	}
	t.Skip("chromium is not installed (Debian package chromium)")
	return ""
}

// LoadPage opens the HTML file at path in headless Chromium and returns the
// document as the browser built it and every message the page wrote to
// the browser's console (script errors, refused requests, ...). The
// browser gets a fresh profile and its whole process group is killed when
// it is done.
func LoadPage(t testing.TB, path string) (dom string, console []string) {
	t.Helper()
	browser := Chromium(t)
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--user-data-dir="+t.TempDir(),
		"--enable-logging=stderr", "--v=0", "--dump-dom", "file://"+abs)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if cmd.Process != nil {
		child.SignalLeft(cmd.Process.Pid, syscall.SIGKILL) // helpers that outlived the browser
		reapBrowser(cmd.Process.Pid)
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", abs, err, stderr.String())
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	return stdout.String(), console
}

// reapBrowser reaps the helpers of the browser whose process group is
// pgid that the test binary adopted as child subreaper (see Main) once they
// have died. It waits for no other process: a browser another test runs
// beside this one is that test's to reap, and the browser itself is
// cmd.Wait's.
func reapBrowser(pgid int) {
	self := os.Getpid()
	deadline := time.Now().Add(2 * time.Second)
	for {
		left := false
		for _, p := range readProcs() {
			if p.PPID != self || p.PID == pgid {
				continue
			}
			if g, err := syscall.Getpgid(p.PID); err != nil || g != pgid {
				continue
			}
			if p.State != "Z" {
				left = true
				continue
			}
			var ws syscall.WaitStatus
			syscall.Wait4(p.PID, &ws, syscall.WNOHANG, nil)
		}
		if !left || time.Now().After(deadline) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
