package mi_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// gdbArgs keep gdb from reaching out to debuginfod servers.
var gdbArgs = []string{"-iex", "set debuginfod enabled off"}

// startGDB starts gdb for a test and closes it in cleanup.
func startGDB(t *testing.T, opt mi.Options) *mi.Client {
	t.Helper()
	testenv.MustHave(t, "gdb")
	opt.Args = append(append([]string{}, gdbArgs...), opt.Args...)
	// The mark tells this test's gdb (and the vgdb it starts) from those
	// of the tests running beside it.
	if opt.Env == nil {
		opt.Env = os.Environ()
	}
	opt.Env = append(opt.Env, testenv.ScopeEnv(t))
	if opt.Trace == nil && testing.Verbose() {
		opt.Trace = &testLog{t: t}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := mi.Start(ctx, opt)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testLog sends a client's trace to the test log, so that -v shows the MI
// conversation of a failing test.
type testLog struct{ t *testing.T }

func (l *testLog) Write(b []byte) (int, error) {
	l.t.Logf("%s", strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// send runs a command that must succeed.
func send(t *testing.T, c *mi.Client, command string, args ...string) *mi.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := c.Send(ctx, command, args...)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	return r
}

// waitEvent returns the next event of the given type and class, skipping
// the others.
func waitEvent(t *testing.T, c *mi.Client, typ mi.Type, class string) *mi.Record {
	t.Helper()
	r := nextEvent(t, c, typ, class, eventTimeout)
	if r == nil {
		t.Fatalf("no %c%s within %v", typ, class, eventTimeout)
	}
	return r
}

// nextEvent is waitEvent that returns nil after d.
func nextEvent(t *testing.T, c *mi.Client, typ mi.Type, class string, d time.Duration) *mi.Record {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case r, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed while waiting for %c%s: %v", typ, class, c.Err())
			}
			if r.Type == typ && r.Class == class {
				return r
			}
		case <-timeout:
			return nil
		}
	}
}

// fixture compiles a source file of testdata.
func fixture(t *testing.T, name string) string {
	t.Helper()
	return testenv.Build(t, filepath.Join("testdata", name))
}

// valgrind is a program running under valgrind massif with its gdbserver
// waiting for gdb.
type valgrind struct {
	cmd    *exec.Cmd
	exited chan struct{}
	Pid    int
	Prefix string // --vgdb-prefix
	Dir    string // private temporary directory
	Log    string // --log-file
}

// startValgrind runs prog under `valgrind --tool=massif --vgdb=yes
// --vgdb-error=0` with a private vgdb prefix, waits until its gdbserver
// accepts gdb and kills its process group in cleanup.
func startValgrind(t *testing.T, prog string, args ...string) *valgrind {
	t.Helper()
	testenv.MustHave(t, "valgrind", "vgdb")
	dir := t.TempDir()
	v := &valgrind{
		Dir:    dir,
		Prefix: filepath.Join(dir, "vgdb"),
		Log:    filepath.Join(dir, "valgrind.log"),
	}
	vargs := []string{
		"--tool=massif", "--vgdb=yes", "--vgdb-error=0",
		"--vgdb-prefix=" + v.Prefix, "--log-file=" + v.Log,
		"--massif-out-file=" + filepath.Join(dir, "massif.out"),
		prog,
	}
	v.cmd = exec.Command("valgrind", append(vargs, args...)...)
	v.cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := v.cmd.Start(); err != nil {
		t.Fatalf("starting valgrind: %v", err)
	}
	v.Pid = v.cmd.Process.Pid
	v.exited = make(chan struct{})
	go func() {
		v.cmd.Wait()
		close(v.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-v.exited:
			// Reaped: its number may lead another test's group now.
		default:
			syscall.Kill(-v.Pid, syscall.SIGKILL)
		}
		<-v.exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(v.Log)
		if strings.Contains(string(b), "TO DEBUG THIS PROCESS USING GDB") {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("valgrind did not announce its gdbserver within 30s; log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Target is what follows "-target-select remote" to reach v's gdbserver.
// -target-select hands its raw argument text to the CLI's `target`
// command, so the pipe command is not quoted: quotes would become part of
// the device name.
func (v *valgrind) Target() string {
	return "| vgdb --vgdb-prefix=" + v.Prefix + " --pid=" + strconv.Itoa(v.Pid)
}

// Wait waits for valgrind to exit and returns its exit code.
func (v *valgrind) Wait(t *testing.T) int {
	t.Helper()
	select {
	case <-v.exited:
		return v.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatal("valgrind did not exit")
	}
	return -1
}

var _ io.Writer = (*testLog)(nil)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// eventTimeout bounds the wait for one event: long enough to tell a hang
// from valgrind starting or stopping on a 2-core machine at load average
// 20 and more, where 20 s was seen to pass before a stop under vgdb.
var eventTimeout = 2 * time.Minute
