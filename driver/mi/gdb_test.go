package mi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

// alive reports whether pid is a live process (not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(s[i+1:], " Z")
}

// gone fails the test if pid is still alive after a short grace.
func gone(t *testing.T, what string, pid int) {
	t.Helper()
	for deadline := testenv.NewDeadline(3 * time.Second); alive(pid); {
		if deadline.Passed() {
			t.Errorf("%s (pid %d) is still alive", what, pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runSpinning starts prog's endless loop under gdb and returns the
// inferior's pid once it runs.
func runSpinning(t *testing.T, c *mi.Client) int {
	t.Helper()
	send(t, c, "-file-exec-and-symbols", fixture(t, "prog.c"))
	send(t, c, "-exec-arguments", "spin")
	send(t, c, "-exec-run")
	g := waitEvent(t, c, mi.TypeNotify, "thread-group-started")
	pid, err := g.Int("pid")
	if err != nil {
		t.Fatal(err)
	}
	waitEvent(t, c, mi.TypeExec, "running")
	return pid
}

func TestGDBBreakRunStop(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{})
	prog := fixture(t, "prog.c")
	send(t, c, "-file-exec-and-symbols", prog)
	bp := send(t, c, "-break-insert", "grow")
	if bp.String("bkpt.number") != "1" || bp.String("bkpt.line") != "15" {
		t.Fatalf("bkpt = %s", bp.Results.MI())
	}
	if r := send(t, c, "-exec-run"); r.Class != "running" {
		t.Fatalf("-exec-run: %q", r.Class)
	}
	stop := waitEvent(t, c, mi.TypeExec, "stopped")
	if stop.String("reason") != "breakpoint-hit" || stop.String("frame.func") != "grow" || stop.String("frame.args.0.value") != "16" {
		t.Fatalf("stop = %s", stop.MI())
	}
	frames := send(t, c, "-stack-list-frames").List("stack")
	if len(frames) != 2 || frames[0].String("func") != "grow" || frames[1].String("func") != "main" || frames[1].String("line") != "36" {
		t.Errorf("frames = %v", frames)
	}
	ti := send(t, c, "-thread-info")
	if th := ti.List("threads"); len(th) != 1 || th[0].String("id") != "1" || th[0].String("state") != "stopped" || ti.String("current-thread-id") != "1" {
		t.Errorf("threads = %s", ti.Results.MI())
	}
	send(t, c, "-break-delete", "1")
	send(t, c, "-exec-continue")
	for {
		e := waitEvent(t, c, mi.TypeExec, "stopped")
		if e.String("reason") == "exited-normally" {
			break
		}
	}
	pid := c.Pid()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	gone(t, "gdb", pid)
}

func TestGDBCommandTimeout(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Send(ctx, "-interpreter-exec", "console", mi.Quote("shell sleep 3"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	// Far below the 3 s gdb takes to answer, however loaded the machine.
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("Send returned after %v, not at its deadline", d)
	}
	// gdb answers the abandoned command late; the next command still gets
	// its own answer.
	r := send(t, c, "-data-evaluate-expression", mi.Quote("6*7"))
	if r.String("value") != "42" {
		t.Errorf("value = %q", r.String("value"))
	}
}

func TestGDBKilledUnderPendingSend(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	var trace testenv.Buffer
	c := startGDB(t, mi.Options{Trace: &trace})
	inferior := runSpinning(t, c)
	// Without mi-async gdb reads no command while the target runs, so this
	// Send stays pending until gdb dies.
	errc := make(chan error, 1)
	go func() {
		_, err := c.Send(context.Background(), "-thread-info")
		errc <- err
	}()
	// gdb is killed once the command has gone out and before any answer.
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(trace.String(), "-thread-info\n"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("-thread-info not sent within 20s:\n%s", trace.String())
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("Send returned before gdb died: %v", err)
	default:
	}
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("pending Send did not fail within 30s of gdb's death")
	}
	var ee *mi.ExitError
	if !errors.As(err, &ee) || !errors.Is(err, mi.ErrExited) || errors.Is(err, mi.ErrClosed) {
		t.Fatalf("err = %v, want an *ExitError", err)
	}
	if ee.ExitCode() != -1 || ee.Pid != c.Pid() || !strings.Contains(err.Error(), "was killed by SIGKILL") ||
		!strings.Contains(err.Error(), "-thread-info") {
		t.Errorf("err = %q (exit code %d)", err, ee.ExitCode())
	}
	<-c.Done()
	start := time.Now()
	if _, err := c.Send(context.Background(), "-gdb-version"); !errors.As(err, &ee) || time.Since(start) > 100*time.Millisecond {
		t.Errorf("later Send = %v after %v", err, time.Since(start))
	}
	gone(t, "inferior", inferior)
	if err := c.Close(); err != nil {
		t.Errorf("Close after death: %v", err)
	}
}

func TestGDBExitStatusAndStderr(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{})
	_, err := c.Send(context.Background(), "-interpreter-exec", "console", mi.Quote("shell echo doomed >&2"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), "-interpreter-exec", "console", mi.Quote("quit 7"))
	var ee *mi.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want an *ExitError", err)
	}
	if ee.ExitCode() != 7 || !strings.Contains(ee.Stderr, "doomed") ||
		!strings.Contains(err.Error(), "exited with status 7; stderr: doomed") {
		t.Errorf("err = %q, stderr %q", err, ee.Stderr)
	}
}

func TestGDBStartFailures(t *testing.T) {
	testenv.NoLeftovers(t)
	testenv.MustHave(t, "gdb")
	ctx := quickCtx(t)
	if _, err := mi.Start(ctx, mi.Options{Path: "snapctl-no-such-gdb"}); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("missing gdb: %v", err)
	}
	// gdb that exits before its first prompt.
	_, err := mi.Start(ctx, mi.Options{Args: []string{"-ex", "echo bye\\n", "-ex", "shell echo early >&2", "-ex", "quit 3"}})
	var ee *mi.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(ee.Stderr, "early") || !strings.HasPrefix(err.Error(), "starting gdb: ") {
		t.Errorf("early exit: %v", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := mi.Start(canceled, mi.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled start: %v", err)
	}
}

func TestGDBCloseLeavesNothing(t *testing.T) {
	testenv.NoLeftovers(t)
	goroutines := runtime.NumGoroutine()
	// Without mi-async gdb does not read -gdb-exit while the target runs:
	// Close kills it after the grace period.
	c := startGDB(t, mi.Options{CloseGrace: 300 * time.Millisecond})
	inferior := runSpinning(t, c)
	pid := c.Pid()
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	if alive(pid) {
		t.Errorf("gdb (pid %d) alive after Close", pid)
	}
	gone(t, "inferior", inferior)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Send(context.Background(), "-gdb-version"); !errors.Is(err, mi.ErrClosed) {
		t.Errorf("Send after Close = %v", err)
	}
	for range c.Events() {
	}
	if left := testenv.Mine(t, func(p testenv.Proc) bool { return p.Kind() != "" }); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, goroutines, buf[:runtime.Stack(buf, true)])
	}
}

func TestGDBCloseKillsUnresponsiveGDB(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{CloseGrace: 200 * time.Millisecond})
	// A stopped gdb cannot obey -gdb-exit; Close must kill it.
	if err := syscall.Kill(c.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	start := time.Now()
	c.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Close took %v", d)
	}
	if alive(pid) {
		t.Errorf("gdb alive after Close")
	}
	var ee *mi.ExitError
	if !errors.As(c.Err(), &ee) || !ee.Closed || ee.ExitCode() != -1 {
		t.Errorf("Err() = %v", c.Err())
	}
}

// CloseNow does not wait for gdb to obey -gdb-exit: a gdb that could not
// (stopped) is gone at once, long before Close's grace period.
func TestGDBCloseNow(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{CloseGrace: 10 * time.Second})
	if err := syscall.Kill(c.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	start := time.Now()
	if err := c.CloseNow(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("CloseNow took %v, as if it waited for gdb", d)
	}
	if alive(pid) {
		t.Errorf("gdb alive after CloseNow")
	}
	var ee *mi.ExitError
	if !errors.As(c.Err(), &ee) || !ee.Closed {
		t.Errorf("Err() = %v", c.Err())
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close after CloseNow: %v", err)
	}
}

// Kill ends gdb without waiting for it; CloseNow then waits, and the
// client ends as closed, as after CloseNow alone.
func TestGDBKill(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{CloseGrace: 10 * time.Second})
	pid := c.Pid()
	c.Kill()
	select {
	case <-c.Done():
	case <-time.After(testenv.Scaled(10 * time.Second)):
		t.Fatal("gdb still running 10 s (stretched by the load) after Kill")
	}
	if err := c.CloseNow(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("gdb alive after Kill and CloseNow")
	}
	c.Kill() // once gdb is gone: nothing
}

func TestGDBInterruptRunningTarget(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{Async: true})
	send(t, c, "-file-exec-and-symbols", fixture(t, "prog.c"))
	send(t, c, "-exec-arguments", "spin")
	send(t, c, "-break-insert", "main")
	send(t, c, "-exec-run")
	waitEvent(t, c, mi.TypeExec, "stopped")
	send(t, c, "-exec-continue")
	waitEvent(t, c, mi.TypeExec, "running")
	// With mi-async on, gdb answers while the target runs.
	ti := send(t, c, "-thread-info")
	if ti.String("threads.0.state") != "running" {
		t.Errorf("threads = %s", ti.Results.MI())
	}
	send(t, c, "-exec-interrupt")
	stop := waitEvent(t, c, mi.TypeExec, "stopped")
	if stop.String("reason") != "signal-received" || stop.String("signal-name") != "SIGINT" {
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
}

// TestGDBSendWhileHandlingEvents drives a whole run from the event loop:
// at each stop it reads the stack and resumes, as snapctl's stop loop does.
func TestGDBSendWhileHandlingEvents(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	c := startGDB(t, mi.Options{Async: true})
	send(t, c, "-file-exec-and-symbols", fixture(t, "prog.c"))
	send(t, c, "-break-insert", "grow")
	send(t, c, "-exec-run")
	var sizes []string
	timeout := time.After(60 * time.Second)
loop:
	for {
		select {
		case e := <-c.Events():
			if e.Type != mi.TypeExec || e.Class != "stopped" {
				continue
			}
			if e.String("reason") == "exited-normally" {
				break loop
			}
			frames := send(t, c, "-stack-list-frames")
			if frames.String("stack.0.func") != "grow" {
				t.Fatalf("stopped in %s", frames.Results.MI())
			}
			arg := send(t, c, "-data-evaluate-expression", "n")
			sizes = append(sizes, arg.String("value"))
			send(t, c, "-exec-continue")
		case <-timeout:
			t.Fatal("run did not finish")
		}
	}
	if got := strings.Join(sizes, " "); got != "16 32 48 100" {
		t.Errorf("grow was called with %s", got)
	}
}

func TestGDBTrace(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	var trace bytes.Buffer
	c := startGDB(t, mi.Options{Trace: &syncWriter{w: &trace}})
	send(t, c, "-interpreter-exec", "console", mi.Quote("shell echo to-stderr >&2"))
	c.Close()
	for _, want := range []string{"(gdb) \n", "-> 1-interpreter-exec console \"shell echo to-stderr >&2\"\n", "stderr: to-stderr\n", "1^done\n", "-> 2-gdb-exit\n", "2^exit\n"} {
		if !strings.Contains(trace.String(), want) {
			t.Errorf("trace lacks %q:\n%s", want, trace.String())
		}
	}
}

func TestGDBEnvAndDir(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	dir := t.TempDir()
	c := startGDB(t, mi.Options{Dir: dir, Env: append(os.Environ(), "SNAPCTL_MI_TEST=hello")})
	r := send(t, c, "-environment-pwd")
	if r.String("cwd") != dir {
		t.Errorf("cwd = %q, want %q", r.String("cwd"), dir)
	}
	r = send(t, c, "-interpreter-exec", "console", mi.Quote("show environment SNAPCTL_MI_TEST"))
	if r.Console() != "SNAPCTL_MI_TEST = hello\n" {
		t.Errorf("console = %q", r.Console())
	}
}

// TestGDBKilledBeforeSend: a command sent as soon as the kernel shows gdb
// dead says how gdb died, as a pending command's error does. Where its
// write finds the pipe closed before gdb's end is collected (the window in
// which TestChildKilled/gdb/startup once read "writing to gdb: broken
// pipe"), Send waits for that end rather than report the pipe. Five gdbs.
func TestGDBKilledBeforeSend(t *testing.T) {
	t.Parallel()
	testenv.NoLeftovers(t)
	for i := 0; i < 5; i++ {
		c := startGDB(t, mi.Options{})
		pid := c.Pid()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(30 * time.Second); !deadOrZombie(pid); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("gdb not dead within 30s of SIGKILL")
			}
		}
		_, err := c.Send(context.Background(), "-gdb-version")
		var ee *mi.ExitError
		if !errors.As(err, &ee) || !strings.Contains(err.Error(), "was killed by SIGKILL") {
			t.Errorf("gdb %d: err = %v, want gdb's end, killed by SIGKILL", i+1, err)
		}
		c.Close()
	}
}

// deadOrZombie reports whether process pid has ended: gone, or a zombie
// not yet reaped.
func deadOrZombie(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(data), ')')
	return i >= 0 && i+2 < len(data) && data[i+2] == 'Z'
}
