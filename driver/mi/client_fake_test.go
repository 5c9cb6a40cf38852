package mi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/driver/mi"
)

// answer runs f as the fake gdb in the background; the test fails if f
// fails.
func answer(t *testing.T, f func() error) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(); err != nil {
			t.Errorf("fake gdb: %v", err)
		}
	}()
	return done
}

func quickCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSendPassesArgumentsIntact(t *testing.T) {
	var trace bytes.Buffer
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	c := mi.NewClient(outR, inW, &syncWriter{w: &trace})
	defer c.Close()
	fk := &fakeGDB{cmds: bufio.NewReader(inR), out: outW, in: inR}

	var got string
	done := answer(t, func() error {
		var err error
		if got, err = fk.command(); err != nil {
			return err
		}
		return fk.print(`&"relaying data between gdb and process 42\n"`, `1^connected`, `(gdb) `)
	})
	r, err := c.Send(quickCtx(t), "-target-select", "remote", `"| vgdb --pid=42 --vgdb-prefix=/tmp/a b/vgdb"`)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if want := `1-target-select remote "| vgdb --pid=42 --vgdb-prefix=/tmp/a b/vgdb"`; got != want {
		t.Errorf("gdb read %q, want %q", got, want)
	}
	if r.Class != "connected" || r.Log() != "relaying data between gdb and process 42\n" {
		t.Errorf("result = %+v", r)
	}
	outW.Close()
	<-c.Done()
	if want := "-> " + got + "\n&\"relaying data between gdb and process 42\\n\"\n1^connected\n(gdb) \n"; trace.String() != want {
		t.Errorf("trace:\n%s\nwant:\n%s", trace.String(), want)
	}
}

// syncWriter makes a bytes.Buffer safe to read after the client is done.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

func TestSendWithoutArgs(t *testing.T) {
	c, fk := newFake(t)
	var got string
	done := answer(t, func() error {
		var err error
		got, err = fk.command()
		if err != nil {
			return err
		}
		return fk.print(`1^done`)
	})
	if _, err := c.Send(quickCtx(t), "-exec-interrupt"); err != nil {
		t.Fatal(err)
	}
	<-done
	if got != "1-exec-interrupt" {
		t.Errorf("gdb read %q", got)
	}
}

func TestSendRejectsLineBreaks(t *testing.T) {
	c, _ := newFake(t)
	for _, arg := range []string{"a\nb", "a\rb"} {
		if _, err := c.Send(quickCtx(t), "-break-condition", "1", arg); err == nil {
			t.Errorf("Send accepted %q", arg)
		}
	}
}

func TestStreamsBelongToTheirCommand(t *testing.T) {
	c, fk := newFake(t)
	done := answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`~"con"`, `@"error: x\n"`, `&"log"`, `~"sole\n"`, `=thread-created,id="2"`, `1^done,value="1"`, `(gdb) `, `~"after"`)
	})
	r, err := c.Send(quickCtx(t), "-interpreter-exec", "console", `"monitor x"`)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	want := []mi.Stream{{Type: mi.TypeConsole, Text: "con"}, {Type: mi.TypeTarget, Text: "error: x\n"}, {Type: mi.TypeLog, Text: "log"}, {Type: mi.TypeConsole, Text: "sole\n"}}
	if diff := cmp.Diff(want, r.Streams); diff != "" {
		t.Errorf("streams (-want +got):\n%s", diff)
	}
	if r.Console() != "console\n" || r.Target() != "error: x\n" || r.Log() != "log" || r.String("value") != "1" {
		t.Errorf("result = %+v", r)
	}
	// The notify record and the stream printed with no command pending are
	// events.
	e1, e2 := <-c.Events(), <-c.Events()
	if e1.Class != "thread-created" || e2.Type != mi.TypeConsole || e2.Text != "after" {
		t.Errorf("events = %s, %s", e1.MI(), e2.MI())
	}
}

func TestErrorResult(t *testing.T) {
	c, fk := newFake(t)
	done := answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`~"partial"`, `1^error,msg="Undefined MI command: nope",code="undefined-command"`)
	})
	_, err := c.Send(quickCtx(t), "-nope", "x")
	<-done
	var e *mi.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *mi.Error", err)
	}
	want := &mi.Error{Command: "-nope x", Msg: "Undefined MI command: nope", Code: "undefined-command"}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	if err.Error() != "gdb: -nope x: Undefined MI command: nope" {
		t.Errorf("message = %q", err)
	}
}

// TestReaderNeverWaitsForEvents floods the client with events nobody reads,
// then expects a command to be answered: the reader queues events without
// bound instead of blocking.
func TestReaderNeverWaitsForEvents(t *testing.T) {
	c, fk := newFake(t)
	const n = 5000
	done := answer(t, func() error {
		var lines []string
		for i := 0; i < n; i++ {
			lines = append(lines, `=thread-created,id="`+strconv.Itoa(i)+`",group-id="i1"`)
		}
		if err := fk.print(lines...); err != nil {
			return err
		}
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`1^done`)
	})
	if _, err := c.Send(quickCtx(t), "-list-thread-groups"); err != nil {
		t.Fatal(err)
	}
	<-done
	for i := 0; i < n; i++ {
		e := <-c.Events()
		if e.String("id") != strconv.Itoa(i) {
			t.Fatalf("event %d has id %q: out of order", i, e.String("id"))
		}
	}
}

// TestSendFromEventHandler sends a command for each event while handling
// it, as the driver does at every stop.
func TestSendFromEventHandler(t *testing.T) {
	c, fk := newFake(t)
	const stops = 50
	done := answer(t, func() error {
		for i := 0; i < stops; i++ {
			if err := fk.print(`*stopped,reason="breakpoint-hit",bkptno="1",thread-id="1"`, `=breakpoint-modified,bkpt={number="1"}`); err != nil {
				return err
			}
			cmd, err := fk.command()
			if err != nil {
				return err
			}
			tok := strings.TrimSuffix(cmd, "-stack-list-frames")
			if err := fk.print(tok+`^done,stack=[frame={level="0",func="grow"}]`, `(gdb) `); err != nil {
				return err
			}
		}
		return fk.out.Close()
	})
	hits := 0
	for e := range c.Events() {
		if e.Class != "stopped" {
			continue
		}
		r, err := c.Send(quickCtx(t), "-stack-list-frames")
		if err != nil {
			t.Fatal(err)
		}
		if r.String("stack.0.func") != "grow" {
			t.Fatalf("frames = %s", r.Results.MI())
		}
		hits++
	}
	<-done
	if hits != stops {
		t.Errorf("handled %d stops, want %d", hits, stops)
	}
}

func TestContextEndsSendAndLateResultIsDropped(t *testing.T) {
	c, fk := newFake(t)
	cmds := make(chan string, 2)
	release := make(chan struct{})
	done := answer(t, func() error {
		first, err := fk.command()
		if err != nil {
			return err
		}
		cmds <- first
		<-release
		if err := fk.print(`1^done,value="late"`, `(gdb) `); err != nil {
			return err
		}
		second, err := fk.command()
		if err != nil {
			return err
		}
		cmds <- second
		return fk.print(`~"mine"`, `2^done,value="mine"`, `(gdb) `)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Send(ctx, "-data-evaluate-expression", "slow()")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "-data-evaluate-expression slow()") {
		t.Fatalf("err = %v, want a deadline error naming the command", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Send returned after %v", d)
	}
	close(release)
	r, err := c.Send(quickCtx(t), "-data-evaluate-expression", "1")
	<-done
	if err != nil || r.String("value") != "mine" || r.Console() != "mine" {
		t.Fatalf("second Send = %+v, %v", r, err)
	}
	if a, b := <-cmds, <-cmds; a != "1-data-evaluate-expression slow()" || b != "2-data-evaluate-expression 1" {
		t.Errorf("commands %q %q", a, b)
	}
	select {
	case e := <-c.Events():
		t.Errorf("unexpected event %s", e.MI())
	case <-time.After(50 * time.Millisecond):
	}
}

// A command abandoned on timeout may still print streams before its late
// result, after the next command was sent: they are the abandoned command's
// and must not reach the next one, where a late @"error: ..." would fail
// it.
func TestLateStreamsOfAbandonedCommandAreDropped(t *testing.T) {
	c, fk := newFake(t)
	sent := make(chan string, 1)
	done := answer(t, func() error {
		first, err := fk.command()
		if err != nil {
			return err
		}
		sent <- first
		// gdb reads the next command while still busy with the first.
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`@"error: late\n"`, `&"late log\n"`, `1^error,msg="late"`, `(gdb) `,
			`~"mine"`, `2^done,value="mine"`, `(gdb) `)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Send(ctx, "-data-evaluate-expression", "slow()"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first Send: err = %v, want a deadline error", err)
	}
	<-sent
	r, err := c.Send(quickCtx(t), "-data-evaluate-expression", "1")
	<-done
	if err != nil {
		t.Fatalf("second Send: %v", err)
	}
	want := []mi.Stream{{Type: mi.TypeConsole, Text: "mine"}}
	if diff := cmp.Diff(want, r.Streams); diff != "" {
		t.Errorf("second command's streams (-want +got):\n%s", diff)
	}
	select {
	case e := <-c.Events():
		t.Errorf("unexpected event %s", e.MI())
	case <-time.After(50 * time.Millisecond):
	}
}

func TestCanceledContext(t *testing.T) {
	c, fk := newFake(t)
	go fk.command()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Send(ctx, "-gdb-version"); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

func TestResultsNobodyAskedForAreEvents(t *testing.T) {
	c, fk := newFake(t)
	answer(t, func() error { return fk.print(`^done,note="tokenless"`, `99^done`) })
	e := <-c.Events()
	if e.Type != mi.TypeResult || e.String("note") != "tokenless" {
		t.Errorf("event = %s", e.MI())
	}
	if e := <-c.Events(); e.Token != "99" {
		t.Errorf("event = %s", e.MI())
	}
}

func TestOutputEndFailsPendingAndLaterSends(t *testing.T) {
	c, fk := newFake(t)
	answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.out.Close()
	})
	_, err := c.Send(quickCtx(t), "-exec-continue")
	var ee *mi.ExitError
	if !errors.Is(err, mi.ErrExited) || !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("err = %v, want an ExitError", err)
	}
	if !strings.Contains(err.Error(), "-exec-continue") {
		t.Errorf("error %q does not name the command", err)
	}
	<-c.Done()
	if !errors.Is(c.Err(), mi.ErrExited) {
		t.Errorf("Err() = %v", c.Err())
	}
	start := time.Now()
	if _, err := c.Send(quickCtx(t), "-gdb-version"); !errors.Is(err, mi.ErrExited) || time.Since(start) > time.Second {
		t.Errorf("later Send: %v after %v", err, time.Since(start))
	}
	if _, ok := <-c.Events(); ok {
		t.Error("events still open after gdb's output ended")
	}
}

// TestHugeResultThroughClient: a 10 MB record (a deep stack's
// -stack-list-frames) read by the client and parsed whole, to its last
// frame and the last argument's value: no line-length limit.
func TestHugeResultThroughClient(t *testing.T) {
	c, fk := newFake(t)
	line, frames := hugeRecord(10 << 20)
	answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print("1"+line, "(gdb) ")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Send(ctx, "-stack-list-frames")
	if err != nil {
		t.Fatal(err)
	}
	stack := r.List("stack")
	if len(stack) != frames {
		t.Fatalf("%d frames, want %d", len(stack), frames)
	}
	last := stack[len(stack)-1]
	if got, want := last.String("level"), itoa(frames-1); got != want {
		t.Errorf("last level = %q, want %q", got, want)
	}
	if got := last.String("args.0.value"); got != `"`+strings.Repeat("ab", 50)+`"` {
		t.Errorf("last arg = %q", got)
	}
}

func TestFakeCloseTwiceAndSendAfterClose(t *testing.T) {
	c, _ := newFake(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	if _, err := c.Send(quickCtx(t), "-gdb-version"); !errors.Is(err, mi.ErrClosed) || !errors.Is(err, mi.ErrExited) {
		t.Errorf("Send after Close = %v", err)
	}
	if c.Pid() != 0 {
		t.Errorf("Pid = %d", c.Pid())
	}
}

// Running follows gdb's word on the program: a ^running result sets it
// before the command's caller has the result, *running sets it, *stopped
// clears it, and other results and records leave it.
func TestRunning(t *testing.T) {
	c, fk := newFake(t)
	if c.Running() {
		t.Fatal("running before gdb said anything")
	}
	done := answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`1^running`, `*running,thread-id="all"`, `(gdb) `)
	})
	if _, err := c.Send(quickCtx(t), "-exec-continue"); err != nil {
		t.Fatal(err)
	}
	<-done
	if !c.Running() {
		t.Error("not running after ^running")
	}
	event := func(class string) {
		t.Helper()
		for {
			select {
			case rec := <-c.Events():
				if rec.Class == class {
					return
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s record", class)
			}
		}
	}
	for _, step := range []struct {
		lines   []string
		class   string // the record the step ends with
		running bool
	}{
		{[]string{`*stopped,reason="breakpoint-hit",bkptno="1",thread-id="1"`}, "stopped", false},
		{[]string{`=thread-created,id="2",group-id="i1"`}, "thread-created", false},
		{[]string{`*running,thread-id="all"`}, "running", true},
		{[]string{`=breakpoint-modified,bkpt={number="1"}`}, "breakpoint-modified", true},
		{[]string{`*stopped,reason="signal-received",signal-name="SIGINT"`}, "stopped", false},
	} {
		if err := fk.print(step.lines...); err != nil {
			t.Fatal(err)
		}
		event(step.class)
		if c.Running() != step.running {
			t.Errorf("after %s: Running() = %v, want %v", step.lines[0], c.Running(), step.running)
		}
	}
	done = answer(t, func() error {
		if _, err := fk.command(); err != nil {
			return err
		}
		return fk.print(`2^done,value="1"`, `(gdb) `)
	})
	if _, err := c.Send(quickCtx(t), "-data-evaluate-expression", "1"); err != nil {
		t.Fatal(err)
	}
	<-done
	if c.Running() {
		t.Error("running after a ^done while stopped")
	}
}
