package native_test

import (
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

// directCallScript runs gdb with the agent on the program built from
// source, stopped at probe() with SIGALRM sent to it, and the Python
// lines call, which make a direct call and fill out; it returns out
// (with the thread's blocked signals before and after the call, "before"
// and "after") and the program's output.
func directCallScript(t *testing.T, source, call string, out any) string {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skip("the direct call is x86-64's")
	}
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, source)
	dir := t.TempDir()
	script, output := nativeAgent(t, dir), filepath.Join(dir, "output")
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
# begins.
os.kill(pid, signal.SIGALRM)
` + call + `
out["after"] = blocked()
gdb.execute("continue")
print(json.dumps(out))
end
`
	cmds := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmds, []byte(py), 0o600); err != nil {
		t.Fatal(err)
	}
	// The deadline ends a program left spinning: a failure, not a figure.
	ctx, cancel := testenv.Context(2 * time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "gdb", "-batch", "-nx", "-x", script, "-x", cmds, bin)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, b)
	}
	if err := json.Unmarshal([]byte(gdb.LastLine(string(b))), out); err != nil {
		t.Fatalf("agent's answer %q: %v", b, err)
	}
	prog, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	return string(prog)
}

// TestAgentDirectCallMask: a direct call given up while a signal handler
// runs in it (its timeout, here shortened, against a handler that never
// returns) puts the thread back with the signals it had blocked, not with
// the handler's mask, in which the handler's own signal is blocked: the
// program finds SIGALRM unblocked after the stop, as before it.
func TestAgentDirectCallMask(t *testing.T) {
	t.Parallel()
	var got struct{ Before, After, Call string }
	prog := directCallScript(t, "../../testdata/native/stuckhandler.c", `CALL_TIMEOUT["mallinfo2"] = 0.5
try:
    direct_call("mallinfo2", result=80)
    out["call"] = "returned"
except CallFailed as e:
    out["call"] = str(e)`, &got)
	if !strings.Contains(got.Call, "mallinfo2() did not return within 0.5 s") {
		t.Errorf("the call: %q, want it given up", got.Call)
	}
	if got.After != got.Before {
		t.Errorf("the thread's blocked signals: %s before the call, %s after it", got.Before, got.After)
	}
	if prog != "blocked 0 began 1\n" {
		t.Errorf("program's output %q, want blocked 0 began 1", prog)
	}
}

// TestAgentDirectCallRepeatedSignal: a signal gdb passes quietly that
// comes again and again during a direct call (a handler that raises its
// own signal, as a timer faster than a ptrace stop's round trip does) is
// delivered into the call once; the next is held until the call ends
// and delivered as the program goes on (the handler, told then to raise
// no more, runs a second time). Delivered every time, it would leave
// mallinfo2() no turn to run: the call would be given up at its timeout.
func TestAgentDirectCallRepeatedSignal(t *testing.T) {
	t.Parallel()
	var got struct {
		Before, After, Call string
		Runs                int
	}
	prog := directCallScript(t, "../../testdata/native/reraise.c", `try:
    out["call"] = "returned %s" % type(direct_call("mallinfo2", result=80)).__name__
except CallFailed as e:
    out["call"] = str(e)
out["runs"] = int(gdb.parse_and_eval("runs"))
gdb.execute("set var again = 0")`, &got)
	if got.Call != "returned bytes" || got.Runs != 1 {
		t.Errorf("the call: %q, the handler ran %d times in it; want returned bytes, 1", got.Call, got.Runs)
	}
	if got.After != got.Before {
		t.Errorf("the thread's blocked signals: %s before the call, %s after it", got.Before, got.After)
	}
	if prog != "runs 2 blocked 0\n" {
		t.Errorf("program's output %q, want runs 2 blocked 0", prog)
	}
}
