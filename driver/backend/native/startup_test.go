package native

import (
	"errors"
	"testing"
)

// gdb's answers to starting a program. "During startup program
// terminated with signal SIGKILL" is gdb 13.1's under --sites beside two
// busy loops, the target killed in the wrapper gdb starts it through (the
// fault matrix's "kill -9 target/start-up [sites]", which exited 1 with
// it before); ESRCH's is its answer natively. Each is the target's death,
// exit 12, not snapctl's failure; a program that exited as it started is
// not a kill.
func TestKilledStarting(t *testing.T) {
	for _, c := range []struct {
		msg    string
		signal string
		ok     bool
	}{
		{"gdb: -exec-run: During startup program terminated with signal SIGKILL, Killed.", "SIGKILL", true},
		{"gdb: -exec-run: During startup program terminated with signal SIGSEGV, Segmentation fault.", "SIGSEGV", true},
		{"gdb: -exec-run: Couldn't get CS register: No such process.", "SIGKILL", true},
		{"gdb: -exec-run: During startup program exited with code 127.", "", false},
		{"gdb: -exec-run: No executable file specified.", "", false},
	} {
		sig, ok := killedStarting(errors.New(c.msg))
		if sig != c.signal || ok != c.ok {
			t.Errorf("killedStarting(%q) = %q, %v; want %q, %v", c.msg, sig, ok, c.signal, c.ok)
		}
	}
}
