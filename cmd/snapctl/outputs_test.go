package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/snapshots"
)

// A run directory on a read-only file system cannot be used: snapctl says
// so before anything starts, with exit code 5 as README's table has it,
// and starts no tool.
func TestReadOnlyOut(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, fixtures+"leak.c")
	ro := readOnlyDir(t)
	for _, out := range []string{filepath.Join(ro, "run"), ro} {
		res := runSnapctl(t, session{Plan: requestPlan, Bin: bin, Out: out})
		if res.Code != exitInput {
			t.Errorf("--out %s: exit code %d, want %d\nstderr:\n%s", out, res.Code, exitInput, res.Stderr)
		}
		if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "output directory") || !strings.Contains(msg, "read-only file system") {
			t.Errorf("--out %s: message %q does not say the directory is on a read-only file system", out, msg)
		}
	}
}

// readOnlyDir returns an empty directory on a read-only file system: a
// tmpfs mounted read-only where the test may mount (root), otherwise a
// directory without write permission.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err == nil {
		t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
		return dir
	}
	if os.Geteuid() == 0 {
		t.Skip("root without mount: no directory here is read-only to snapctl")
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o755) })
	return dir
}

// A source file whose name holds escape sequences (by #line, as a code
// generator may write it), and an argument that does: the text report, the
// verdict line and the report.md print them with their control characters
// escaped, and run.json keeps the name byte for byte.
func TestEscapesInDebugNames(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	const evil = "\x1b[31mevil\x1b]0;pwned\x07.c"
	src, err := os.ReadFile(fixtures + "leak.c")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "escapes.c")
	text := "#line 1 \"\\033[31mevil\\033]0;pwned\\007.c\"\n" + string(src)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := testenv.Build(t, path)
	// The program ignores its second argument, which the report's
	// header quotes.
	res := mustRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"5", "\x1b[2J"}}, exitOK)
	const shown = `\x1b[31mevil\x1b]0;pwned\x07.c`
	for _, want := range []string{shown, `5 \x1b[2J`} {
		if !strings.Contains(res.Stdout, want) {
			t.Errorf("the text report does not show the escaped %s:\n%s", want, res.Stdout)
		}
	}
	md, err := os.ReadFile(filepath.Join(res.Out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for what, out := range map[string][]byte{"stdout": []byte(res.Stdout), "stderr": []byte(res.Stderr), "report.md": md} {
		if i := bytes.IndexAny(out, "\x1b\x07"); i >= 0 {
			t.Errorf("%s has a raw control character at byte %d:\n%q", what, i, out)
		}
	}
	found := false
	for _, s := range res.Run.Suspects {
		found = found || s.Frame.File == evil
	}
	if !found {
		t.Errorf("run.json has no suspect in %q: %+v", evil, res.Run.Suspects)
	}

	// show prints massif's own lines the same way.
	snaps := snapshotFiles(t, res.Out)
	if len(snaps) == 0 {
		t.Fatal("no snapshot kept")
	}
	out, err := exec.Command(snapctlBinary(t), "show", snaps[len(snaps)-1]).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(shown)) || bytes.IndexAny(out, "\x1b\x07") >= 0 {
		t.Errorf("show: %v, want the name escaped:\n%q", err, out)
	}
}

// The warnings and the error message escape control characters but keep
// their lines; a reader stopped by a signal maps to exit code 130.
func TestMessagesEscapeControlCharacters(t *testing.T) {
	var buf bytes.Buffer
	in := []byte("warning: lib\x1b[31m.so\tno debug info\n")
	if n, err := snapshots.PrintableWriter(&buf).Write(in); err != nil || n != len(in) {
		t.Errorf("Write = %d, %v", n, err)
	}
	if got, want := buf.String(), "warning: lib\\x1b[31m.so\tno debug info\n"; got != want {
		t.Errorf("warning %q, want %q", got, want)
	}
	code, msg := describe(errors.New("target crashed in f\x1b]0;x\x07 (a.c:3)\nline two"))
	if code != exitFailure || msg != "target crashed in f\\x1b]0;x\\x07 (a.c:3)\nline two" {
		t.Errorf("describe = %d %q", code, msg)
	}
	if code, _ := describe(fmt.Errorf("reading massif file x: %w", &fsutil.InterruptedError{Err: context.Canceled})); code != exitInterrupted {
		t.Errorf("a cancelled read exits %d, want %d", code, exitInterrupted)
	}
}
