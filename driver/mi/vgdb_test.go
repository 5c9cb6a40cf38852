package mi_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

// monitor sends a command to valgrind's gdbserver.
func monitor(t *testing.T, c *mi.Client, cmd string) *mi.Result {
	t.Helper()
	return send(t, c, "-interpreter-exec", "console", mi.Quote("monitor "+cmd))
}

// TestVGDBSnapshot is the session snapctl runs, reduced to its MI: connect
// to valgrind massif through vgdb, stop at a breakpoint, take a detailed
// snapshot, read the monitor's answers, run to the end.
func TestVGDBSnapshot(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	prog := fixture(t, "prog.c")
	v := startValgrind(t, prog)
	c := startGDB(t, mi.Options{Async: true})
	send(t, c, "-file-exec-and-symbols", prog)

	conn := send(t, c, "-target-select", "remote", v.Target())
	if conn.Class != "connected" || !strings.Contains(conn.Log(), "relaying data between gdb and process") {
		t.Fatalf("connect: %+v", conn)
	}
	if first := waitEvent(t, c, mi.TypeExec, "stopped"); first.String("thread-id") != "1" {
		t.Errorf("first stop = %s", first.MI())
	}

	early := filepath.Join(v.Dir, "early.massif")
	r := monitor(t, c, "detailed_snapshot "+early)
	if r.Class != "done" || r.Target() != "error: cannot take snapshot before execution has started\n" {
		t.Errorf("early snapshot: %q %q", r.Class, r.Target())
	}
	if _, err := os.Stat(early); err == nil {
		t.Errorf("a failed snapshot left %s", early)
	}
	r = monitor(t, c, "no_such_command")
	if !strings.HasPrefix(r.Target(), "command 'no_such_command' not recognised\n") {
		t.Errorf("bad monitor command: %q", r.Target())
	}

	send(t, c, "-break-insert", "grow")
	send(t, c, "-exec-continue")
	waitEvent(t, c, mi.TypeExec, "running")
	hit := waitEvent(t, c, mi.TypeExec, "stopped")
	if hit.String("reason") != "breakpoint-hit" || hit.String("frame.func") != "grow" || hit.String("frame.args.0.value") != "16" {
		t.Fatalf("hit = %s", hit.MI())
	}

	snap := filepath.Join(v.Dir, "hit1.massif")
	r = monitor(t, c, "detailed_snapshot "+snap)
	if r.Class != "done" || len(r.Streams) != 0 {
		t.Errorf("snapshot answered %q with streams %v, want done and silence", r.Class, r.Streams)
	}
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatalf("snapshot file: %v", err)
	}
	for _, want := range []string{"desc: --massif-out-file=", "snapshot=0\n", "heap_tree=detailed\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("snapshot lacks %q:\n%s", want, data)
		}
	}

	ti := send(t, c, "-thread-info")
	if th := ti.List("threads"); len(th) != 1 || !strings.HasPrefix(th[0].String("target-id"), "Thread ") ||
		!strings.HasPrefix(th[0].String("details"), "tid 1 ") {
		t.Errorf("threads = %s", ti.Results.MI())
	}

	send(t, c, "-break-delete", "1")
	send(t, c, "-exec-continue")
	waitEvent(t, c, mi.TypeExec, "running")
	if end := waitEvent(t, c, mi.TypeExec, "stopped"); end.MI() != `*stopped,reason="exited-normally"` {
		t.Errorf("end = %s", end.MI())
	}
	if code := v.Wait(t); code != 0 {
		t.Errorf("valgrind exited with %d", code)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

// TestVGDBInterrupt stops a target that valgrind runs, through vgdb.
func TestVGDBInterrupt(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	prog := fixture(t, "prog.c")
	v := startValgrind(t, prog, "spin")
	c := startGDB(t, mi.Options{Async: true})
	send(t, c, "-file-exec-and-symbols", prog)
	send(t, c, "-target-select", "remote", v.Target())
	waitEvent(t, c, mi.TypeExec, "stopped")
	send(t, c, "-break-insert", "usleep")
	send(t, c, "-exec-continue")
	waitEvent(t, c, mi.TypeExec, "running")
	waitEvent(t, c, mi.TypeExec, "stopped")
	send(t, c, "-break-delete", "1")
	send(t, c, "-exec-continue")
	waitEvent(t, c, mi.TypeExec, "running")
	// gdb answers ^running before it has sent the continue packet, and an
	// interrupt that reaches vgdb together with that packet is lost
	// ("$c#63\003" in vgdb -d's log). Interrupt again until the target
	// stops, as the driver must.
	// Each try waits twice as long as the last (up to 8 s): on a loaded
	// machine vgdb takes seconds to deliver one.
	var stop *mi.Record
	deadline := time.Now().Add(eventTimeout)
	for wait := time.Second; stop == nil; wait = min(2*wait, 8*time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("the target did not stop within %v of interrupts", eventTimeout)
		}
		send(t, c, "-exec-interrupt")
		stop = nextEvent(t, c, mi.TypeExec, "stopped", wait)
	}
	// valgrind's gdbserver reports an interrupt as SIGTRAP, not SIGINT.
	if stop.String("reason") != "signal-received" || stop.String("signal-name") != "SIGTRAP" {
		t.Errorf("stop = %s", stop.MI())
	}
	r := send(t, c, "-stack-list-frames")
	inMain := false
	for _, fr := range r.List("stack") {
		inMain = inMain || fr.String("func") == "main"
	}
	if !inMain {
		t.Errorf("main is not on the stack: %s", r.Results.MI())
	}
	// A snapshot works at an interrupt as at a breakpoint.
	snap := filepath.Join(v.Dir, "interrupt.massif")
	if r := monitor(t, c, "detailed_snapshot "+snap); len(r.Streams) != 0 {
		t.Errorf("snapshot: %v", r.Streams)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Error(err)
	}
}
