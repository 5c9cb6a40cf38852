package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// AllowCores skips the test where the hard core size limit is 0: there no
// process can dump core, and a test that none did proves nothing. Below
// a hard limit above 0 a process may dump core whatever its soft limit:
// gdb raises its own soft limit to the hard one to dump core on an
// internal error (docs/facts.md, fact 33).
func AllowCores(t testing.TB) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_CORE, &lim); err != nil || lim.Max == 0 {
		t.Skipf("core files are off for good here (hard limit 0): %v", err)
	}
}

// NoCores fails the test for a core file in any of dirs.
func NoCores(t testing.TB, dirs ...string) {
	t.Helper()
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "core") {
				t.Errorf("a core file: %s", filepath.Join(dir, e.Name()))
			}
		}
	}
}
