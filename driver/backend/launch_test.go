package backend

import (
	"testing"

	"github.com/snapctl/snapctl/plan"
)

// TestLibraryDebugInfoUnused: gdb skips the libraries' separate debug
// files only where nothing of a stop reads them, under every backend.
func TestLibraryDebugInfoUnused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		bp       string
		resolved bool
		want     bool
	}{
		{"a plain stop", "", true, true},
		{"a location the early gdb did not find", "", false, false},
		{"pending", "    pending: true\n", true, false},
		{"threads: current", "    threads: current\n", true, false},
		{"threads: all", "    threads: all\n", true, false},
		{"around_call", "    around_call: true\n", true, false},
		{"commands", "    commands: [\"bt\"]\n", true, false},
	} {
		for _, b := range []string{"massif", "memcheck", "native"} {
			text := "backend: " + b + "\nbreakpoints:\n  - name: work\n    location: work\n" + tc.bp
			p, err := plan.Parse("plan.yaml", []byte(text))
			if err != nil {
				// around_call is the native backend's alone.
				if tc.name == "around_call" && b != "native" {
					continue
				}
				t.Fatalf("%s, %s: %v", tc.name, b, err)
			}
			if got := LibraryDebugInfoUnused(p, tc.resolved); got != tc.want {
				t.Errorf("%s, %s: LibraryDebugInfoUnused = %v, want %v", tc.name, b, got, tc.want)
			}
		}
	}
}
