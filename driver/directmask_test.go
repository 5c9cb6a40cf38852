package driver

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestAgentDirectCallMask: a direct call given up while a signal handler
// runs in it (its timeout, here shortened, against a handler that never
// returns) puts the thread back with the signals it had blocked, not with
// the handler's mask, in which the handler's own signal is blocked: the
// program finds SIGALRM unblocked after the stop, as before it. With a
// 50 us timer on a loaded machine the handlers delivered into mallinfo2()
// outlasted its timeout, and SIGALRM stayed blocked in the program.
func TestAgentDirectCallMask(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "testdata/native/stuckhandler.c")
	dir := t.TempDir()
	script, output := filepath.Join(dir, gdb.AgentScript), filepath.Join(dir, "output")
	if err := os.WriteFile(script, []byte(gdb.AgentSource), 0o600); err != nil {
		t.Fatal(err)
	}
	py := `python
import json, os, signal
gdb.execute("break probe")
gdb.execute("run > " + ` + gdb.PyString(output) + `)
pid, tid = gdb.selected_inferior().pid, gdb.selected_thread().ptid[1]
def blocked():
    with open("/proc/%d/task/%d/status" % (pid, tid)) as f:
        return [l.split()[1] for l in f if l.startswith("SigBlk:")][0]
out = {"before": blocked()}
# Pending while the thread is stopped, SIGALRM is delivered as the call
# begins, and its handler spins until the call is given up.
os.kill(pid, signal.SIGALRM)
CALL_TIMEOUT["mallinfo2"] = 0.5
try:
    direct_call("mallinfo2", result=80)
    out["call"] = "returned"
except CallFailed as e:
    out["call"] = str(e)
out["after"] = blocked()
gdb.execute("continue")
print(json.dumps(out))
end
`
	cmds := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmds, []byte(py), 0o600); err != nil {
		t.Fatal(err)
	}
	// The deadline ends a program whose handler was left spinning: a
	// failure, not a figure.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gdb", "-batch", "-nx", "-x", script, "-x", cmds, bin)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	var got struct{ Before, After, Call string }
	if err := json.Unmarshal([]byte(gdb.LastLine(string(out))), &got); err != nil {
		t.Fatalf("agent's answer %q: %v", out, err)
	}
	if !strings.Contains(got.Call, "mallinfo2() did not return within 0.5 s") {
		t.Errorf("the call: %q, want it given up", got.Call)
	}
	if got.After != got.Before {
		t.Errorf("the thread's blocked signals: %s before the call, %s after it", got.Before, got.After)
	}
	if b, err := os.ReadFile(output); err != nil || string(b) != "blocked 0 began 1\n" {
		t.Errorf("program's output %q (%v), want blocked 0 began 1", b, err)
	}
}
