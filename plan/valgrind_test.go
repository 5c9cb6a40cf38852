package plan

import (
	"testing"
)

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
