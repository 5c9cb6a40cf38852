package heaptrack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/snapshots"
)

// miGDB is the least of GDB/MI the tests need: gdb runs the fixture
// natively, stops it at a breakpoint, and the test cuts the stream while
// every thread is stopped.
type miGDB struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	// said is the end of the exchange, commands and gdb's lines, for
	// a failure to show where gdb fell silent.
	said []string
}

// heard keeps line in the exchange's end.
func (g *miGDB) heard(line string) {
	if g.said = append(g.said, line); len(g.said) > 40 {
		g.said = g.said[len(g.said)-40:]
	}
}

func startGDB(t *testing.T, env []string, args ...string) *miGDB {
	t.Helper()
	cmd := exec.Command("gdb", append([]string{"--interpreter=mi2", "-nx", "-q", "--args"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting gdb: %v", err)
	}
	g := &miGDB{t: t, cmd: cmd, in: in, lines: make(chan string, 1024)}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			g.lines <- sc.Text()
		}
		close(g.lines)
	}()
	g.send("-gdb-set startup-with-shell off")
	g.send("-gdb-set confirm off")
	for _, e := range env {
		g.console("set environment " + e)
	}
	return g
}

// send sends a command and returns its result record (^done...).
func (g *miGDB) send(cmd string) string {
	g.t.Helper()
	g.heard("-> " + cmd)
	fmt.Fprintln(g.in, cmd)
	for {
		l := g.next()
		if strings.HasPrefix(l, "^error") && strings.Contains(l, "Couldn't write extended state status") {
			// gdb before 14 on a CPU with AMX (docs/facts.md, fact
			// 149): no call of gdb's ends well without snapctl's agent,
			// whose part is the native backend's (its tests play the
			// injection through it: TestSitesAttach).
			g.t.Skipf("gdb cannot restore registers after its calls on this CPU: %s: %s", cmd, l)
		}
		if strings.HasPrefix(l, "^error") {
			g.t.Fatalf("gdb: %s: %s", cmd, l)
		}
		if strings.HasPrefix(l, "^") {
			return l
		}
	}
}

func (g *miGDB) next() string {
	g.t.Helper()
	select {
	case l, ok := <-g.lines:
		if !ok {
			g.t.Fatalf("gdb ended; the exchange's end:\n%s", strings.Join(g.said, "\n"))
		}
		g.heard(l)
		return l
	case <-time.After(2 * time.Minute):
		g.t.Fatalf("gdb said nothing for 2 minutes; the exchange's end:\n%s", strings.Join(g.said, "\n"))
	}
	return ""
}

// waitStopped waits for the target to stop and returns the record.
func (g *miGDB) waitStopped() string {
	g.t.Helper()
	for {
		if l := g.next(); strings.HasPrefix(l, "*stopped") {
			return l
		}
	}
}

var pidRE = regexp.MustCompile(`pid="(\d+)"`)

// pid returns the inferior's process id.
func (g *miGDB) pid() int {
	g.t.Helper()
	m := pidRE.FindStringSubmatch(g.send("-list-thread-groups"))
	if m == nil {
		g.t.Fatal("gdb names no process")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// letOutOf runs thread tid alone until it releases heaptrack's lock at
// addr: a thread-specific temporary breakpoint on pthread_mutex_unlock for
// that mutex, then the return from it. Nothing else runs; the thread ends
// the event it was writing and goes no further than the unlock.
func (g *miGDB) letOutOf(tid int, addr uint64) {
	g.t.Helper()
	r := g.send("-thread-info")
	m := regexp.MustCompile(`id="(\d+)",target-id="[^"]*LWP ` + strconv.Itoa(tid) + `\)"`).FindStringSubmatch(r)
	if tid == 0 {
		// Held with no owner: the thread stopped right after
		// pthread_mutex_lock's cmpxchg, in the frame glibc's debug
		// information names lll_mutex_lock_optimized (docs/facts.md,
		// fact 67), or inside pthread_mutex_unlock, which clears the
		// owner before it lets the lock go (seen in CI: the thread in
		// lll_mutex_unlock_optimized). The threads waiting for the lock
		// are in futex_wait. One in the unlock stops at its next.
		m = regexp.MustCompile(`id="(\d+)",target-id="[^"]*",name="[^"]*",frame=\{level="0",addr="[^"]*",func="(?:lll_mutex_(?:un)?lock_optimized|_*pthread_mutex_(?:un)?lock)"`).FindStringSubmatch(r)
	}
	if m == nil {
		g.t.Fatalf("no gdb thread for LWP %d in %s", tid, r)
	}
	id := m[1]
	g.send("-gdb-set scheduler-locking on")
	g.send(fmt.Sprintf("-break-insert -t -p %s -c \"$rdi == %#x\" pthread_mutex_unlock", id, addr))
	g.send("-thread-select " + id)
	g.send("-exec-continue")
	if s := g.waitStopped(); !strings.Contains(s, `reason="breakpoint-hit"`) {
		g.t.Fatalf("thread %s did not reach the unlock: %s", id, s)
	}
	g.send("-exec-finish")
	g.waitStopped()
	g.send("-gdb-set scheduler-locking replay")
}

// value evaluates a C expression in the stopped program.
func (g *miGDB) value(expr string) int64 {
	g.t.Helper()
	r := g.send(`-data-evaluate-expression "` + expr + `"`)
	m := regexp.MustCompile(`value="(-?\d+)"`).FindStringSubmatch(r)
	if m == nil {
		g.t.Fatalf("%s: %s", expr, r)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// console runs a gdb CLI command.
func (g *miGDB) console(cmd string) string {
	g.t.Helper()
	return g.send("-interpreter-exec console " + strconv.Quote(cmd))
}

// cut cuts the stream of target, stopped by gdb with every thread, as
// gdb's agent does at a stop (the native backend's agent/heaptrack.py,
// SiteCutter.cut): the library's unwritten buffer, read from the
// process's memory, goes into the FIFO after a mark (FIFOMark), and the
// Recorder's heap at the mark is stop's (the marks start at 1). A
// *BusyError says that a thread was stopped inside the library and must
// be let out first; the stream is then as it was.
func cut(ctx context.Context, rec *Recorder, target *Target, stop int) (*snapshots.Snapshot, error) {
	st, err := target.Pending()
	if err != nil {
		return nil, err
	}
	if !target.WritesTo(st.Fd, rec.FIFO()) {
		return nil, fmt.Errorf("heaptrack's output (fd %d) is not %s: not the layout of %s", st.Fd, rec.FIFO(), target.Layout.Lib)
	}
	// The Recorder holds a write end open: this open does not wait.
	f, err := os.OpenFile(rec.FIFO(), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(f, "%s%d %d\n%s", FIFOMark, stop+1, len(st.Pending), st.Pending)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return rec.Snapshot(ctx, stop+1)
}
