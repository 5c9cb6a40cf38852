package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// slowGDB writes a gdb that runs prelude (sh) before it becomes the real
// gdb, except for `gdb --version`, which the checks run.
func slowGDB(t *testing.T, prelude string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gdb")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in\n*--interpreter=mi*) %s;;\nesac\nexec gdb \"$@\"\n", prelude)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestStartDeadline: a gdb that prints no prompt and uses no CPU has hung:
// the run ends after its start's deadline (the command timeout, 2 s here)
// and still writes its run directory, whose run.json says why. (A gdb
// that uses CPU all the while is waited for: mi's TestStartWaitsForProgress.)
func TestStartDeadline(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	bin := testenv.Build(t, "testdata/native/loop.c")
	plan := "backend: native\nbreakpoints:\n  - location: tick\n    max_hits: 2\n"
	t.Run("hung", func(t *testing.T) {
		t.Parallel()
		opts := Options{Tools: Tools{GDB: slowGDB(t, "exec sleep 600")}, Timeouts: Timeouts{CommandTimeout: 2 * time.Second, Timeout: 2 * time.Minute}}
		res, err := runSession(t, opts, plan, bin)
		if code, _ := ExitStatus(err); code != ExitFailure || !strings.Contains(fmt.Sprint(err), "gdb printed no prompt within") ||
			!strings.Contains(fmt.Sprint(err), "made no progress") {
			t.Fatalf("exit %d: %v", code, err)
		}
		if res == nil {
			t.Fatal("no run directory")
		}
		m := readManifest(t, res.Dir)
		if m.Status != runjson.StatusFailed || !strings.Contains(m.Error, "gdb printed no prompt") || m.ExitCode == nil || *m.ExitCode != ExitFailure {
			t.Fatalf("run.json: status %s, exit %v, error %q", m.Status, m.ExitCode, m.Error)
		}
	})
}
