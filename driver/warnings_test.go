package driver

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// The warnings about the program's debug information apply only when a
// breakpoint is in the program: libmain.c, built without debug info, loads
// a plugin that has it, as python3 loads a C library through ctypes. With
// the plugin's function as the only breakpoint there is nothing to warn
// about; with one in the program too, the warning is there.
func TestRunWarnsAboutTheBinaryOfTheBreakpoints(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	lib := testenv.Build(t, "../testdata/e2e/libkeep.c", "-shared", "-fPIC")
	plugin := testenv.Build(t, "../testdata/e2e/plugin.c", "-shared", "-fPIC")
	bin := testenv.Build(t, "../testdata/e2e/libmain.c", "-g0", "-Wl,--no-as-needed", lib, "-ldl")
	const pluginBP = "  - name: plugin\n    location: plugin_keep\n    pending: true\n"
	for _, tt := range []struct {
		name, plan string
		warned     bool
	}{
		{"plugin", pluginBP, false},
		{"linked library", "  - name: lib\n    location: lib_keep\n", false},
		{"program too", pluginBP + "  - name: main\n    location: main\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var warn bytes.Buffer
			res, err := runSession(t, Options{Streams: Streams{Warn: &warn}}, "backend: native\nbreakpoints:\n"+tt.plan, bin, plugin, "2")
			if err != nil {
				t.Fatalf("%v\nwarnings:\n%s", err, warn.String())
			}
			if res.Manifest.Breakpoints[0].Snapshots != 2 {
				t.Errorf("breakpoints %+v, want 2 snapshots at the first", res.Manifest.Breakpoints)
			}
			if got := strings.Contains(warn.String(), bin+" has no debug info"); got != tt.warned {
				t.Errorf("warned about the program: %v, want %v; warnings:\n%s", got, tt.warned, warn.String())
			}
		})
	}
}
