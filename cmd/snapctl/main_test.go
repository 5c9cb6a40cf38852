package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMain makes the test binary the subreaper of the snapctl runs the
// end-to-end tests start, so no valgrind, vgdb or gdb can outlive them.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestVersion(t *testing.T) {
	root := newRootCmd("1.2.3")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "1.2.3") {
		t.Errorf("--version printed %q, want it to contain 1.2.3", got)
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	root := newRootCmd("dev")
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"--no-such-flag"})
	err := root.Execute()
	if code, _ := describe(err); code != exitUsage {
		t.Errorf("exit code for %v = %d, want %d", err, code, exitUsage)
	}
}
