package native

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestTrapHandler: snapctl's SIGTRAP handler, in a process whose tracer
// dies without collecting a trap (docs/facts.md, fact 113). A thread
// that ran into an int3 the tracer then took out runs on once the table
// names its address; without the table it dies of SIGTRAP, as it would
// without the handler; a single step the tracer set is cleared. Each
// mode 5 times: the kernel's timing varies, the outcome must not.
func TestTrapHandler(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, "../../testdata/native/traptrap.c")
	code := filepath.Join(t.TempDir(), "code")
	if err := os.WriteFile(code, trapCode, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, want string }{
		{"armed", "survived 42\nexit 0\n"},
		{"unarmed", "signal 5\n"},
		{"step", "survived 42\nexit 0\n"},
	} {
		for i := range 5 {
			cmd := exec.Command(bin, code, fmt.Sprintf("%x", trapTable), c.mode)
			cmd.Dir = t.TempDir() // a core file of the unarmed child lands there
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != c.want {
				t.Errorf("%s, run %d: %q (%v), want %q", c.mode, i+1, out, err, strings.TrimSpace(c.want))
			}
		}
	}
}
