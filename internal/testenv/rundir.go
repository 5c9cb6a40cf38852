package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Reports are the texts of a run directory's report.md and report.html.
func Reports(t testing.TB, dir string) (md, html string) {
	t.Helper()
	a, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	return string(a), string(b)
}

// InternalErrorPlan is a plan for backend whose gdb meets an internal
// error as it sets up (its init commands provoke one), the target's
// working directory cwd, where gdb would write its core file, and a
// breakpoint at handle_request (tcpserver.c's).
func InternalErrorPlan(backend, cwd string) string {
	return fmt.Sprintf("backend: %s\ntarget:\n  cwd: %s\ngdb:\n  init: [\"maint internal-error snapctl test\"]\nbreakpoints:\n  - location: handle_request\n", backend, cwd)
}
