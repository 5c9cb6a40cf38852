package main

// Fault-injection cases for errors that must name their real cause: a bad
// target.cwd or condition at its own key, a plan that never ends or is far
// too large, gdb killed while it connects.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// planError runs snapctl on plan and checks that it ends with a plan error
// matching want, and leaves no run directory.
func planError(t *testing.T, plan string, want *regexp.Regexp) {
	t.Helper()
	bin := testenv.Build(t, fixtures+"ends.c")
	res := parallelRun(t, session{Plan: plan, Bin: bin})
	if res.Code != exitPlan {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitPlan, res.Stderr)
	}
	if msg := oneLine(t, res.Stderr); !want.MatchString(msg) {
		t.Errorf("message %q does not match %s", msg, want)
	}
	if _, err := os.Stat(res.Out); !os.IsNotExist(err) {
		t.Errorf("a plan error left the run directory %s (%v)", res.Out, err)
	}
}

// A missing target.cwd is a plan error at the cwd's value, not valgrind
// failing to start.
func TestMissingCwd(t *testing.T) {
	plan := "target:\n  cwd: /no/such/dir\n" + requestPlan
	planError(t, plan, regexp.MustCompile(`plan\.yaml:2:8: target\.cwd: directory "/no/such/dir" does not exist$`))
}

// A condition gdb cannot parse is reported at the condition's line and
// column, with gdb's words.
func TestBadCondition(t *testing.T) {
	plan := "breakpoints:\n  - location: handle_request\n    condition: \"id ==\"\n"
	planError(t, plan, regexp.MustCompile(`plan\.yaml:3:16: breakpoints\[0\]\.condition: gdb cannot parse the condition at "handle_request": .*expression`))
}

// A 100 KB condition is refused by the plan, naming the key, without
// asking gdb and without echoing it; a 10 MB one makes the plan itself
// too large.
func TestHugeCondition(t *testing.T) {
	for _, tt := range []struct {
		name string
		size int
		want string
	}{
		{"100KB", 100 << 10, `plan\.yaml:3:16: breakpoints\[0\]\.condition: 102400 bytes long, at most 4096 allowed$`},
		{"10MB", 10 << 20, `plan\.yaml: larger than 1024 KiB; a plan is a few kilobytes$`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan := "breakpoints:\n  - location: handle_request\n    condition: \"" + strings.Repeat("1", tt.size) + "\"\n"
			planError(t, plan, regexp.MustCompile(tt.want))
		})
	}
}

// A plan read from a FIFO whose writer never writes: SIGINT and SIGTERM end
// snapctl at once with the interrupted exit code. /dev/zero as the plan is
// refused at once: a device is no plan.
func TestPlanNeverEnds(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, fixtures+"ends.c")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			fifo := filepath.Join(t.TempDir(), "plan.fifo")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			r := startPlanPath(t, fifo, bin)
			// Opening the FIFO for writing returns once snapctl has
			// opened it for reading; it then waits for a plan that
			// never comes, as from a pipe left open.
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			r.signal(sig)
			sent := time.Now()
			res := r.wait()
			if d := time.Since(sent); d > testenv.Scaled(3*time.Second) {
				t.Errorf("snapctl took %v to end after %v", d, sig)
			}
			if res.Code != exitInterrupted {
				t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitInterrupted, res.Stderr)
			}
			if msg := oneLine(t, res.Stderr); !strings.Contains(msg, "reading the plan") || !strings.Contains(msg, "interrupted") {
				t.Errorf("message %q does not say that reading the plan was interrupted", msg)
			}
		})
	}
	t.Run("/dev/zero", func(t *testing.T) {
		t.Parallel()
		res := startPlanPath(t, "/dev/zero", bin).wait()
		if res.Code != exitPlan {
			t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitPlan, res.Stderr)
		}
		if msg := oneLine(t, res.Stderr); !strings.HasSuffix(msg, "/dev/zero: cannot read the plan: it is a character device, not a regular file or a pipe") {
			t.Errorf("message %q does not say /dev/zero is no plan", msg)
		}
	})
}

// startPlanPath starts snapctl run with the plan at path, as given.
func startPlanPath(t *testing.T, path, bin string) *running {
	t.Helper()
	testenv.MustHave(t, "gdb", "valgrind", "vgdb")
	dir := t.TempDir()
	ctx, cancel := testenv.Context(30 * time.Second)
	r := &running{t: t, cancel: cancel, out: filepath.Join(dir, "run"), dir: dir}
	r.cmd = exec.CommandContext(ctx, snapctlBinary(t), "run", "--quiet", "--out", r.out, "--", path, bin)
	r.cmd.Dir = dir
	testenv.NoLeftovers(t)
	r.cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	r.cmd.Stdout, r.cmd.Stderr = &r.stdout, &r.stderr
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			r.cmd.Process.Kill()
			r.cmd.Wait()
		}
		cancel()
	})
	return r
}

// gdb killed while it connects to valgrind (vgdb has started): the message
// blames gdb, not vgdb, and nothing of the run is left.
func TestGdbKilledWhileConnecting(t *testing.T) {
	t.Parallel()
	bin := testenv.Build(t, fixtures+"ends.c")
	testenv.NoLeftovers(t)
	r := startSnapctl(t, session{Plan: requestPlan, Bin: bin, Limit: time.Minute})
	var gdb testenv.Proc
	for deadline := testenv.NewDeadline(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if vgdb := testenv.Mine(t, func(p testenv.Proc) bool { return p.Kind() == testenv.Vgdb }); len(vgdb) > 0 {
			if ps := testenv.Mine(t, func(p testenv.Proc) bool { return p.PID == vgdb[0].PPID }); len(ps) > 0 {
				gdb = ps[0]
				break
			}
		}
		if deadline.Passed() {
			t.Fatal("vgdb did not start within 30s")
		}
	}
	if err := syscall.Kill(gdb.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := r.wait()
	if res.Code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
	}
	if msg := oneLine(t, res.Stderr); !strings.HasPrefix(msg, "snapctl: gdb: ") || !regexp.MustCompile(`SIGKILL|signal: killed|signal 9`).MatchString(msg) {
		t.Errorf("message %q does not blame gdb's SIGKILL", msg)
	}
	checkPartial(t, res, "failed", 0)
}

// A run directory with % in its name works: valgrind would expand it in
// --log-file and --massif-out-file.
func TestPercentInRunDir(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	out := filepath.Join(t.TempDir(), "run 100% done %p %q{HOME}")
	res := parallelRun(t, session{Plan: requestPlan, Bin: bin, Args: []string{"exit", "0"}, Out: out})
	checkExit(t, res, 0, 2)
	if _, err := os.Stat(filepath.Join(out, "valgrind.log")); err != nil {
		t.Errorf("valgrind.log not in the run directory: %v", err)
	}
}

// valgrind refusing its options before its log is open: the message says
// what valgrind said.
func TestValgrindSaysWhy(t *testing.T) {
	bin := testenv.Build(t, fixtures+"ends.c")
	plan := "valgrind:\n  args: [\"--max-snapshots=lots\"]\n" + requestPlan
	res := parallelRun(t, session{Plan: plan, Bin: bin})
	if res.Code != exitFailure {
		t.Errorf("exit code %d, want %d\nstderr:\n%s", res.Code, exitFailure, res.Stderr)
	}
	if !strings.Contains(res.Stderr, "snapctl: valgrind: exited before its gdbserver was ready") ||
		!strings.Contains(res.Stderr, "\n    valgrind: Bad option: --max-snapshots=lots\n") {
		t.Errorf("the message does not quote valgrind:\n%s", res.Stderr)
	}
	checkPartial(t, res, "failed", 0)
}
