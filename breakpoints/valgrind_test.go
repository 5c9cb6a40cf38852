package breakpoints

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestValgrindAcceptsArgs runs the real valgrind with the options of a
// plan that sets every valgrind key, so a misspelt option would fail here
// rather than in a user's run.
func TestValgrindAcceptsArgs(t *testing.T) {
	testenv.MustHave(t, "valgrind")
	testenv.NoLeftovers(t)
	p, err := Load(filepath.Join("..", "testdata", "plans", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "massif.out")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A private vgdb prefix: valgrind's FIFOs stay out of /tmp, where other
	// runs look for their own.
	args := append([]string{"--tool=massif", "--massif-out-file=" + out, "--vgdb-prefix=" + filepath.Join(t.TempDir(), "vgdb")}, p.ValgrindArgs()...)
	args = append(args, "/bin/true")
	cmd := exec.CommandContext(ctx, "valgrind", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("valgrind %q: %v\n%s", args, err, stderr.String())
	}
}

func TestCheckValgrindArg(t *testing.T) {
	for arg, want := range map[string]string{
		"--max-snapshots=100":  "",
		"-q":                   "",
		"--trace-children=yes": "",
		"--vgdb":               "--vgdb is set by snapctl and cannot be passed: snapctl runs valgrind's gdbserver itself",
		"--vgdb-poll=10":       "--vgdb-poll is set by snapctl and cannot be passed: snapctl runs valgrind's gdbserver itself",
		"--log-fd=3":           "--log-fd is set by snapctl and cannot be passed: snapctl reads valgrind's log to know when its gdbserver is ready",
		"--version":            "--version is set by snapctl and cannot be passed: it would make valgrind print its version and exit",
		"--stacks=yes":         "--stacks has a plan key: use valgrind.stacks",
		"--":                   `"--" is not a valgrind option (they start with "--"); the program's arguments go in target.args`,
	} {
		if got := checkValgrindArg(arg); got != want {
			t.Errorf("checkValgrindArg(%q) = %q, want %q", arg, got, want)
		}
	}
}
