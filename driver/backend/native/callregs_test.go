package native

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestCallsKeepVectorRegisters: gdb's calls at a stop where the stopped
// thread's vector and general registers are live (callregs.c, six
// threads and one that comes and goes, signals every 5 ms) give every
// register back, whichever way the call ends: it returns (its value
// read), gdb abandons it at another thread's signal and it runs to its
// end, or it never returns and is taken back. gdb before 14 cannot write
// the XSAVE area of a CPU with AMX at all (docs/facts.md, fact 149): its
// calls failed and left the function's vector registers in the thread;
// there the agent puts the area back (agent/calls.py, _Vectors). The
// program, run on, finds its registers intact and says so before it
// stops in checked().
func TestCallsKeepVectorRegisters(t *testing.T) {
	t.Parallel()
	if runtime.GOARCH != "amd64" {
		t.Skip("the fixture is x86-64 assembly")
	}
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "../../testdata/native/callregs.c")
	verdict := filepath.Join(t.TempDir(), "verdict")
	ctx, cancel := testenv.Context(2 * time.Minute)
	defer cancel()
	client, err := mi.Start(ctx, mi.Options{Args: []string{"--args", bin, verdict}, Env: append(os.Environ(), testenv.ScopeEnv(t)), Async: true, StartsProgram: true})
	if err != nil {
		t.Fatal(err)
	}
	c := gdb.Open(client, nil, 30*time.Second, nil)
	defer func() {
		if reap := c.Close(true); reap != nil {
			reap()
		}
	}()
	loadAgent(t, ctx, c)
	bp, err := c.Send(ctx, "-break-insert", "*probe")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "-exec-run"); err != nil {
		t.Fatal(err)
	}
	for {
		stop, err := c.WaitStopped(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stop.String("reason") == "breakpoint-hit" {
			break
		}
		if stop.String("reason") != "signal-received" {
			t.Fatalf("gdb stopped with %s before the probe", stop.MI())
		}
		if _, err := c.Send(ctx, "-exec-continue"); err != nil {
			t.Fatal(err)
		}
	}
	// Returned: a signal may come during one, which gdb then abandons.
	returned := 0
	for range 20 {
		r, err := gdbCall(ctx, c, gdb.Evaluate("(int) clobber()"))
		switch {
		case err == nil && r.String("value") == "7":
			returned++
		case !errors.Is(err, errCallAbandoned):
			t.Fatalf("clobber(): %v %v, want 7", r, err)
		}
	}
	if returned == 0 {
		t.Error("gdb abandoned each of 20 calls of clobber(): none returned")
	}
	// Abandoned, then run to its end.
	if _, err := gdbCall(ctx, c, gdb.Evaluate("(int) clobber_slow()")); !errors.Is(err, errCallAbandoned) {
		t.Errorf("clobber_slow(): %v, want errCallAbandoned", err)
	}
	if r, err := c.Do(ctx, gdb.Evaluate("slow_returns")); err != nil || r.String("value") != "1" {
		t.Errorf("clobber_slow() returned %v times (%v), want 1", r, err)
	}
	// Taken back.
	if _, err := gdbCall(withCallPatience(ctx, shortPatience), c, gdb.Evaluate("(int) clobber_stuck()")); !errors.Is(err, errCallUnwound) {
		t.Errorf("clobber_stuck(): %v, want errCallUnwound", err)
	}
	if n, err := dummyFrames(ctx, c); err != nil || len(n) != 0 {
		t.Errorf("gdb's calls left: %v %v, want none", n, err)
	}
	// Nothing of the agent's left: no area kept, no breakpoint in at a
	// call's return address, on the thread's stack.
	if r, err := c.Do(ctx, gdb.Console(gdb.PythonLine("print(VECTORS.left())"))); err != nil || strings.TrimSpace(r.Console()) != "(0, 0)" {
		t.Errorf("the agent's areas and breakpoints left: %v %v, want (0, 0)", r.Console(), err)
	}
	if _, err := c.Send(ctx, "-break-delete", bp.String("bkpt.number")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "-break-insert", "checked"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, gdb.Console("handle SIGUSR1 nostop noprint pass")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "-exec-continue"); err != nil {
		t.Fatal(err)
	}
	stop, err := c.WaitStopped(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(verdict)
	if stop.String("reason") != "breakpoint-hit" || string(out) != "intact\n" {
		t.Errorf("the program stopped with %s, saying %q; want a stop in checked(), intact", stop.MI(), out)
	}
}
