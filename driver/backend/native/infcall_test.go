package native

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	p := attachSignalled(t)
	if err := callVoid(p.ctx, p.c, "call (void) slow()"); err != nil {
		t.Errorf("call (void) slow(): %v", err)
	}
	if n, err := dummyFrames(p.ctx, p.c); err != nil || len(n) != 0 {
		t.Errorf("gdb's calls left: %d %v, want none", n, err)
	}
	if n := p.value("calls"); n != 1 {
		t.Errorf("slow() returned %d times, want 1", n)
	}
	if !t.Failed() {
		// A call whose result is wanted: gdb's message, and
		// errCallAbandoned, which says that gdb gave the call up (the
		// signal did come).
		_, err := gdbCall(p.ctx, p.c, gdb.Evaluate("(int) slow_value()"))
		if !errors.Is(err, errCallAbandoned) || !strings.Contains(err.Error(), "signal in another thread") {
			t.Errorf("slow_value(): %v, want gdb's abandonment and errCallAbandoned", err)
		}
		if n, err := dummyFrames(p.ctx, p.c); err != nil || len(n) != 0 {
			t.Errorf("gdb's calls left: %d %v, want none", n, err)
		}
		if n := p.value("calls"); n != 2 {
			t.Errorf("slow() returned %d times, want 2", n)
		}
	}
	p.detachRunsOn()
}

// signalled is driver/testdata/native/callsignal.c running under a gdb
// attached to it: its other thread raises SIGUSR1 every 10 ms, and
// counts them at raisedAt.
type signalled struct {
	t        *testing.T
	pid      int
	raisedAt uint64
	exited   chan error
	ctx      context.Context
	c        *gdb.Conn
	closeGDB func() // ends gdb, once
}

// attachSignalled starts callsignal.c, attaches a gdb to it, and ends
// both with the test.
func attachSignalled(t *testing.T) *signalled {
	t.Helper()
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
	p := &signalled{t: t, exited: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "%d %v", &p.pid, &p.raisedAt); err != nil || serr != nil {
		go func() { p.exited <- cmd.Wait() }()
		t.Fatalf("the program's first line %q: %v %v", line, err, serr)
	}
	go func() { p.exited <- cmd.Wait() }()
	p.ctx, p.c, p.closeGDB = attachAgent(t, p.pid)
	return p
}

// attachAgent starts a gdb with snapctl's agent loaded, as the native
// backend's, attaches it to process pid and gives it 2 minutes; it
// returns the deadline's context, the connection and the function that
// ends gdb, once, which the test's cleanup calls too.
func attachAgent(t *testing.T, pid int) (context.Context, *gdb.Conn, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	client, err := mi.Start(ctx, mi.Options{Env: append(os.Environ(), testenv.ScopeEnv(t)), Async: true})
	if err != nil {
		t.Fatal(err)
	}
	c := gdb.Open(client, nil, 30*time.Second, nil)
	var once sync.Once
	closeGDB := func() {
		once.Do(func() {
			if reap := c.Close(true); reap != nil {
				reap()
			}
		})
	}
	t.Cleanup(closeGDB)
	loadAgent(t, ctx, c)
	if _, err := c.Do(ctx, gdb.Attach(pid)); err != nil {
		t.Fatal(err)
	}
	return ctx, c, closeGDB
}

// value is the program's int variable name.
func (p *signalled) value(name string) int {
	p.t.Helper()
	r, err := p.c.Do(p.ctx, gdb.Evaluate(name))
	if err != nil {
		p.t.Fatal(err)
	}
	n, _ := strconv.Atoi(r.String("value"))
	return n
}

// raised is the number of signals the other thread has raised, -1 when
// it cannot be read.
func (p *signalled) raised() int {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", p.pid))
	if err != nil {
		return -1
	}
	defer mem.Close()
	b := make([]byte, 4)
	if _, err := mem.ReadAt(b, int64(p.raisedAt)); err != nil {
		return -1
	}
	return int(binary.LittleEndian.Uint32(b))
}

// detachRunsOn has gdb detach and end, and checks that the program runs
// on untraced, every thread as before: its other thread raises 20 more
// signals, 200 ms or more of the main thread free to return from any
// call of gdb's left in it. A thread given another thread's registers
// raises none however long it is given (docs/facts.md, fact 147).
func (p *signalled) detachRunsOn() {
	t := p.t
	t.Helper()
	if _, err := p.c.Do(p.ctx, gdb.Detach()); err != nil {
		t.Fatal(err)
	}
	p.closeGDB()
	from := p.raised()
	for p.raised() < from+20 {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("the program died after gdb detached: %v", err)
		case <-p.ctx.Done():
			t.Fatalf("the program did not run on: %d signals raised since gdb detached, state %c, its threads' system calls:\n%s", p.raised()-from, proc.Stat(p.pid).State, taskSyscalls(p.pid))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := proc.Stat(p.pid); !st.Alive() {
		t.Errorf("the program is gone after gdb detached (state %c)", st.State)
	}
}

// stuckProgram is driver/testdata/native/stuckcall.c running under a gdb
// attached to it.
type stuckProgram struct {
	t                         *testing.T
	pid                       int
	raisedAt, workAt, release uint64
	c                         *gdb.Conn
	ctx                       context.Context
	exited                    chan error
	// wait starts the wait for the program's end, which then reaches
	// exited. Not while the test traces the program itself: a wait of
	// its parent's takes the program's ptrace stops too.
	wait func()
}

// startStuck starts stuckcall.c (five threads), attaches a gdb to it,
// and ends both with the test.
func startStuck(t *testing.T) *stuckProgram {
	t.Helper()
	testenv.MustHave(t, "gdb")
	p := startStuckAlone(t)
	p.wait()
	client, err := mi.Start(p.ctx, mi.Options{Env: append(os.Environ(), testenv.ScopeEnv(t)), Async: true})
	if err != nil {
		t.Fatal(err)
	}
	p.c = gdb.Open(client, nil, 30*time.Second, nil)
	t.Cleanup(func() { p.closeGDB() })
	loadAgent(t, p.ctx, p.c)
	if _, err := p.c.Do(p.ctx, gdb.Attach(p.pid)); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadAgent loads the agent and its native part into c, as every gdb of
// the backend's has them: where gdb cannot write a thread's vector
// registers, the agent puts them back after each call (agent/calls.py,
// _Vectors).
func loadAgent(t *testing.T, ctx context.Context, c *gdb.Conn) {
	t.Helper()
	dir := t.TempDir()
	if python, why, err := c.LoadAgent(ctx, dir); err != nil || !python || why != "" {
		t.Fatalf("loading the agent: python %v, %q, %v", python, why, err)
	}
	if why, err := c.LoadScripts(ctx, dir, "native", Python); err != nil || why != "" {
		t.Fatalf("loading the agent's native part: %q, %v", why, err)
	}
}

// startStuckAlone starts stuckcall.c, no tracer attached, and ends it
// with the test.
func startStuckAlone(t *testing.T) *stuckProgram {
	t.Helper()
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "../../testdata/native/stuckcall.c")
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &stuckProgram{t: t, exited: make(chan error, 1)}
	var once sync.Once
	p.wait = func() { once.Do(func() { go func() { p.exited <- cmd.Wait() }() }) }
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.wait()
		<-p.exited
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "%d %v %v %v", &p.pid, &p.raisedAt, &p.workAt, &p.release); err != nil || serr != nil {
		t.Fatalf("the program's first line %q: %v %v", line, err, serr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	p.ctx = ctx
	return p
}

func (p *stuckProgram) closeGDB() {
	if p.c != nil {
		if reap := p.c.Close(true); reap != nil {
			reap()
		}
		p.c = nil
	}
}

// word reads the int at addr through /proc/PID/mem (-1 when it cannot).
func (p *stuckProgram) word(addr uint64) int {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", p.pid))
	if err != nil {
		return -1
	}
	defer mem.Close()
	b := make([]byte, 4)
	if _, err := mem.ReadAt(b, int64(addr)); err != nil {
		return -1
	}
	return int(binary.LittleEndian.Uint32(b))
}

// eval is gdb's value of expr.
func (p *stuckProgram) eval(expr string) string {
	p.t.Helper()
	r, err := p.c.Do(p.ctx, gdb.Evaluate(expr))
	if err != nil {
		p.t.Fatalf("%s: %v", expr, err)
	}
	return r.String("value")
}

// runsOn detaches gdb, releases any stuck() or dup3() still waiting, and
// checks that the program runs on untraced: 20 more signals raised and
// every worker's count grown, the process alive. A call of gdb's left in
// it returns onto its dummy frame's return address once released, and
// the process dies of SIGSEGV.
func (p *stuckProgram) runsOn() {
	t := p.t
	t.Helper()
	if _, err := p.c.Do(p.ctx, gdb.Detach()); err != nil {
		t.Fatal(err)
	}
	p.closeGDB()
	p.livesOn()
}

// livesOn releases any stuck() or dup3() still waiting in the program,
// which no tracer holds, and checks that it runs on: 20 more signals
// raised and every worker's count grown, the process alive.
func (p *stuckProgram) livesOn() {
	t := p.t
	t.Helper()
	p.wait()
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", p.pid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = mem.WriteAt([]byte{1, 0, 0, 0}, int64(p.release))
	mem.Close()
	if err != nil {
		t.Fatalf("releasing the program's waits: %v", err)
	}
	from := p.word(p.raisedAt)
	var work [3]int
	for i := range work {
		work[i] = p.word(p.workAt + uint64(8*i))
	}
	grown := func() bool {
		for i := range work {
			if p.word(p.workAt+uint64(8*i)) <= work[i] {
				return false
			}
		}
		return p.word(p.raisedAt) >= from+20
	}
	for !grown() {
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("the program died after gdb detached: %v", err)
		case <-p.ctx.Done():
			t.Fatalf("the program did not run on: %d signals raised since gdb detached, state %c", p.word(p.raisedAt)-from, proc.Stat(p.pid).State)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if st := proc.Stat(p.pid); !st.Alive() {
		t.Errorf("the program is gone after gdb detached (state %c)", st.State)
	}
}

// shortPatience is a patience of 500 ms without progress and 2 s in
// all (stretched by the machine's load as the product's own), for calls
// that do not return.
var shortPatience = patience{Idle: 500 * time.Millisecond, Limit: 2 * time.Second}

// TestStuckCallIsTakenBack: gdb attached to a 5-thread program calls
// stuck(), which a signal in another thread makes gdb abandon
// (docs/facts.md, fact 137) and which then sleeps until released, past
// the call's patience: gdbCall interrupts the process and pops the call's
// frames and gdb's dummy frame, the main thread back where it was (its
// pc and stack pointer as before the call), no call of gdb's listed.
// Then gdb detaches and the program is released: stuck() is no longer
// running, nothing returns onto the dummy frame's return address, and
// the program runs on. Left inside stuck() (the product before this
// change, after its minute), the main thread returns there once
// released and the process dies of SIGSEGV.
func TestStuckCallIsTakenBack(t *testing.T) {
	t.Parallel()
	p := startStuck(t)
	p.ctx = withCallPatience(p.ctx, shortPatience)
	if _, err := p.c.Do(p.ctx, gdb.SelectThread("1")); err != nil {
		t.Fatal(err)
	}
	pc, sp := p.eval("$pc"), p.eval("$sp")
	err := callVoid(p.ctx, p.c, "call (void) stuck()")
	if err == nil || !strings.Contains(err.Error(), "put back where it was") {
		t.Errorf("call (void) stuck(): %v, want the call taken back", err)
	}
	if n, err := dummyFrames(p.ctx, p.c); err != nil || len(n) != 0 {
		t.Errorf("gdb's calls left: %v %v, want none", n, err)
	}
	if _, err := p.c.Do(p.ctx, gdb.SelectThread("1")); err != nil {
		t.Fatal(err)
	}
	if got, gotSP := p.eval("$pc"), p.eval("$sp"); got != pc || gotSP != sp {
		t.Errorf("the main thread is at pc %s, sp %s; before the call %s, %s", got, gotSP, pc, sp)
	}
	if n := p.eval("calls"); n != "0" {
		t.Errorf("stuck() returned %s times, want 0", n)
	}
	// A call that returns in time is not cut short: the patience is
	// the thread's, not the caller's deadline.
	_, err = gdbCall(p.ctx, p.c, gdb.Evaluate("(int) getpid()"))
	if err != nil && !errors.Is(err, errCallAbandoned) {
		t.Errorf("getpid(): %v", err)
	}
	p.runsOn()
}

// TestDescriptorMoveWhateverTheCall: heaptrack's descriptor moves
// (moveDescriptor) in a 5-thread program whose own dup3 (gdb's call
// finds it) is given up by gdb and then ends (modes 1 and 2: before or
// after the dup), or does not end in time and is taken back (mode 3:
// after the dup; mode 4: before it). /proc/PID/fd before and after: the
// descriptor moved (the number at held_fd written, the old one closed)
// or all as it was, never a duplicate left. Before this change an
// abandoned dup3 failed the move and left the copy in the program.
func TestDescriptorMoveWhateverTheCall(t *testing.T) {
	t.Parallel()
	p := startStuck(t)
	p.ctx = withCallPatience(p.ctx, shortPatience)
	heldAt, err := strconv.ParseUint(regexp.MustCompile(`0x[0-9a-f]+`).FindString(p.eval("&held_fd")), 0, 64)
	if err != nil {
		t.Fatalf("&held_fd: %v", err)
	}
	for _, tc := range []struct {
		mode  int
		moved bool
	}{{0, true}, {1, true}, {2, true}, {3, true}, {4, false}} {
		// mode 4 is last: its dup3, taken back before the dup, waits
		// for the release still.
		before := descriptors(t, p.pid)
		from, _ := strconv.Atoi(p.eval("held_fd"))
		to := 900 + tc.mode
		p.eval(fmt.Sprintf("mode = %d", tc.mode))
		err := moveDescriptor(p.ctx, p.c, p.pid, fdMove{fd: from, addr: heldAt}, to)
		after := descriptors(t, p.pid)
		want := maps.Clone(before)
		if tc.moved {
			want[to] = want[from]
			delete(want, from)
			if err != nil {
				t.Errorf("mode %d: moving descriptor %d to %d: %v", tc.mode, from, to, err)
			}
		} else if err == nil {
			t.Errorf("mode %d: the move of a dup3 taken back before the dup succeeded", tc.mode)
		}
		if diff := cmp.Diff(want, after); diff != "" {
			t.Errorf("mode %d: the program's descriptors (-want +got):\n%s", tc.mode, diff)
		}
		wantHeld := from
		if tc.moved {
			wantHeld = to
		}
		if got := p.eval("held_fd"); got != strconv.Itoa(wantHeld) {
			t.Errorf("mode %d: held_fd = %s, want %d", tc.mode, got, wantHeld)
		}
		if n, err := dummyFrames(p.ctx, p.c); err != nil || len(n) != 0 {
			t.Errorf("mode %d: gdb's calls left: %v %v, want none", tc.mode, n, err)
		}
	}
	p.runsOn()
}

// descriptors maps process pid's descriptors to what they are open on
// (/proc/PID/fd).
func descriptors(t *testing.T, pid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	fds := map[int]string{}
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds[n], _ = os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, n))
	}
	return fds
}

// TestPlaceStringsLiteral: the literals placeStrings puts into the
// process are read back as cQuote and heaptrack's quoting write them.
func TestPlaceStringsLiteral(t *testing.T) {
	for _, s := range []string{"", "snapctl", `/tmp/a "b"\c`, "LD_PRELOAD=/x.so /y.so", "\x01\x7f\xfftab\there"} {
		text := cQuote(s) + ", 1)"
		got, n, err := cLiteral(text)
		if err != nil || string(got) != s || text[n:] != ", 1)" {
			t.Errorf("cLiteral(%q) = %q, %d, %v; want %q and the rest %q", text, got, n, err, s, ", 1)")
		}
	}
	if _, _, err := cLiteral(`"open`); err == nil {
		t.Errorf(`cLiteral("\"open") took an unterminated literal`)
	}
}
