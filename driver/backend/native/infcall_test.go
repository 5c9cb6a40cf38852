package native

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestAbandonedCallRunsToItsEnd: gdb attached to a 2-thread program
// calls slow(), and the other thread's SIGUSR1 comes during every call
// (driver/testdata/native/callsignal.c): gdb abandons the call, leaving
// the main thread inside slow() above its dummy frame (docs/facts.md,
// fact 137). gdbCall runs the process on until slow() has returned,
// so that no call is left: gdb detaches, the process runs on untraced
// (its other thread raises 20 more signals) and lives, each call counted
// once. A call left abandoned returns onto its dummy frame's return
// address, on its thread's stack, once gdb has detached, and the process
// dies of SIGSEGV.
func TestAbandonedCallRunsToItsEnd(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "../../testdata/native/callsignal.c")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		cmd.Process.Kill()
		<-exited
	}()
	var pid int
	var raisedAt uint64
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "%d %v", &pid, &raisedAt); err != nil || serr != nil {
		t.Fatalf("the program's first line %q: %v %v", line, err, serr)
	}
	go func() { exited <- cmd.Wait() }()
	raised := func() int {
		mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
		if err != nil {
			return -1
		}
		defer mem.Close()
		b := make([]byte, 4)
		if _, err := mem.ReadAt(b, int64(raisedAt)); err != nil {
			return -1
		}
		return int(binary.LittleEndian.Uint32(b))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := mi.Start(ctx, mi.Options{Env: append(os.Environ(), testenv.ScopeEnv(t)), Async: true})
	if err != nil {
		t.Fatal(err)
	}
	c := gdb.Open(client, nil, 30*time.Second, nil)
	closed := false
	closeGDB := func() {
		if !closed {
			closed = true
			if reap := c.Close(true); reap != nil {
				reap()
			}
		}
	}
	defer closeGDB()
	if _, err := c.Do(ctx, gdb.Attach(pid)); err != nil {
		t.Fatal(err)
	}
	calls := func() int {
		t.Helper()
		r, err := c.Do(ctx, gdb.Evaluate("calls"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(r.String("value"))
		return n
	}
	if err := callVoid(ctx, c, "call (void) slow()"); err != nil {
		t.Errorf("call (void) slow(): %v", err)
	}
	if n, err := dummyFrames(ctx, c); err != nil || n != 0 {
		t.Errorf("gdb's calls left: %d %v, want none", n, err)
	}
	if n := calls(); n != 1 {
		t.Errorf("slow() returned %d times, want 1", n)
	}
	if !t.Failed() {
		// A call whose result is wanted: gdb's message, and
		// errCallAbandoned, which says that gdb gave the call up (the
		// signal did come).
		_, err = gdbCall(ctx, c, gdb.Evaluate("(int) slow_value()"))
		if !errors.Is(err, errCallAbandoned) || !strings.Contains(err.Error(), "signal in another thread") {
			t.Errorf("slow_value(): %v, want gdb's abandonment and errCallAbandoned", err)
		}
		if n, err := dummyFrames(ctx, c); err != nil || n != 0 {
			t.Errorf("gdb's calls left: %d %v, want none", n, err)
		}
		if n := calls(); n != 2 {
			t.Errorf("slow() returned %d times, want 2", n)
		}
	}
	if _, err := c.Do(ctx, gdb.Detach()); err != nil {
		t.Fatal(err)
	}
	closeGDB()
	// Untraced, the program runs on: its other thread raises 20 more
	// signals, 200 ms or more of the main thread free to return from
	// any call of gdb's left in it.
	from := raised()
	for raised() < from+20 {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("the program died after gdb detached: %v", err)
		case <-ctx.Done():
			t.Fatalf("the program did not run on: %d signals raised since gdb detached, state %c", raised()-from, proc.Stat(pid).State)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := proc.Stat(pid); !st.Alive() {
		t.Errorf("the program is gone after gdb detached (state %c)", st.State)
	}
}
