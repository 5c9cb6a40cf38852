package main

// snapctl attach refused by the kernel: snapctl runs as user nobody, so
// that the kernel's ptrace access check, not a guess of snapctl's, says
// no, and the message explains it as snapctl doctor does.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

// nativeFixtures holds the C programs of the native backend's tests.
const nativeFixtures = "../../driver/testdata/native/"

// asUser runs commands as another user, through util-linux's setpriv.
type asUser struct {
	name     string
	uid, gid string
	env      []string
}

// nobodyUser returns user nobody, or skips the test when this machine
// cannot run a process as another user.
func nobodyUser(t *testing.T) asUser {
	t.Helper()
	testenv.MustHave(t, "setpriv")
	if os.Geteuid() != 0 {
		t.Skip("running a process as another user needs root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	return asUser{name: u.Username, uid: u.Uid, gid: u.Gid, env: append(os.Environ(), testenv.ScopeEnv(t))}
}

func (u asUser) command(argv ...string) *exec.Cmd {
	cmd := exec.Command("setpriv", append([]string{"--reuid=" + u.uid, "--regid=" + u.gid, "--clear-groups", "--"}, argv...)...)
	cmd.Env = u.env
	return cmd
}

// sharedCopy copies the executable at src into dir, which every user can
// read: the fixture cache is root's alone.
func sharedCopy(t *testing.T, src, dir string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// startTarget starts cmd, the attach fixture, waits until it runs the
// fixture (and has set itself up: ready), and kills it at the end.
func startTarget(t *testing.T, cmd *exec.Cmd, ready func(pid int) bool) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	pid := cmd.Process.Pid
	for deadline := testenv.NewDeadline(10 * time.Second); !ready(pid); time.Sleep(10 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatalf("the fixture (process %d) did not start", pid)
		}
	}
	return pid
}

// statusOwner is the owner of /proc/PID/status: root's for a process
// that is not dumpable.
func statusOwner(pid int) int {
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	return int(fi.Sys().(*syscall.Stat_t).Uid)
}

// TestAttachNotPermitted: snapctl attach run by user nobody against a
// process of root's, and against a process of nobody's own that made
// itself not dumpable. The kernel refuses both; each exits 7 with a
// message that says why and what doctor says of ptrace here, before gdb
// starts or a run directory is made, and the process runs on, untraced.
func TestAttachNotPermitted(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	nobody := nobodyUser(t)
	testenv.NoLeftovers(t)
	dir, err := os.MkdirTemp("", "snapctl-attach-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	snapctl := sharedCopy(t, snapctlBinary(t), dir)
	loop := sharedCopy(t, testenv.Build(t, nativeFixtures+"loop.c"), dir)
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - location: tick\n    max_hits: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// What snapctl doctor, run by nobody, says of ptrace.
	doctor, _ := nobody.command(snapctl, "doctor").Output()
	var ptrace string
	for _, l := range strings.Split(string(doctor), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == "ptrace" {
			ptrace = strings.TrimSpace(l[strings.Index(l, "ptrace")+len("ptrace"):])
		}
	}
	if !strings.Contains(ptrace, "no CAP_SYS_PTRACE") {
		t.Fatalf("doctor as %s says of ptrace %q:\n%s", nobody.name, ptrace, doctor)
	}

	runsLoop := func(pid int) bool {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return exe == loop
	}
	roots := exec.Command(loop)
	roots.Env = nobody.env
	for _, c := range []struct {
		name   string
		target *exec.Cmd
		ready  func(int) bool
		why    string
	}{
		{"root's", roots, runsLoop,
			"it runs as user id 0 (root) and snapctl as user id " + nobody.uid + " (" + nobody.name + "): a process may trace only processes of its own user"},
		{"not dumpable", nobody.command(loop, "undumpable"), func(pid int) bool { return runsLoop(pid) && statusOwner(pid) == 0 },
			"the process is not dumpable (it called prctl(PR_SET_DUMPABLE, 0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid := startTarget(t, c.target, c.ready)
			out := filepath.Join(dir, "run-"+strings.ReplaceAll(c.name, " ", "-"))
			attach := nobody.command(snapctl, "attach", "--out", out, plan, fmt.Sprint(pid))
			var stderr strings.Builder
			attach.Stderr = &stderr
			err := attach.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitNotTracable {
				t.Errorf("exit: %v, want code %d\nstderr:\n%s", err, exitNotTracable, stderr.String())
			}
			msg := oneLine(t, stderr.String())
			for _, want := range []string{
				fmt.Sprintf("cannot attach to process %d: the kernel refuses snapctl ptrace access to it", pid),
				c.why,
				"(ptrace here: " + ptrace + ", as snapctl doctor reports it)",
			} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
			// ptrace's cost to vgdb is the massif backend's.
			if strings.Contains(stderr.String(), "vgdb") {
				t.Errorf("a native attach speaks of vgdb:\n%s", stderr.String())
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a run directory for a refused attach: %v", err)
			}
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil || !strings.Contains(string(st), "TracerPid:\t0\n") || strings.Contains(string(st), "State:\tt") {
				t.Errorf("the process after the refusal: %v\n%s", err, st)
			}
		})
	}
}

// TestAttachGuardedByDefault: snapctl attach has gdbserver trace the
// process unless --guard=false, which leaves gdb its tracer; either way
// the server serves on once snapctl has detached.
func TestAttachGuardedByDefault(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, nativeFixtures+"tcpserver.c")
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    max_hits: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags  []string
		tracer string
	}{{nil, "gdbserver"}, {[]string{"--guard=false"}, "gdb"}} {
		args := append(append([]string{"attach", "-q", "--timeout", "1m", "-o", filepath.Join(dir, c.tracer)}, c.flags...), plan, fmt.Sprint(srv.Pid))
		cmd := exec.Command(snapctlBinary(t), args...)
		cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		seen := ""
		for running := true; running; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("snapctl %v: %v", args, err)
				}
				running = false
			case <-time.After(50 * time.Millisecond):
				st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid))
				for _, line := range strings.Split(string(st), "\n") {
					// snapctl itself traces the server for a moment as
					// it takes its SIGTRAP handler out, from one of its
					// threads: TracerPid names the thread, whose Tgid is
					// snapctl's pid.
					if pid, ok := strings.CutPrefix(line, "TracerPid:\t"); ok && pid != "0" && tgid(pid) != fmt.Sprint(cmd.Process.Pid) {
						comm, _ := os.ReadFile("/proc/" + pid + "/comm")
						if c := strings.TrimSpace(string(comm)); c != "" {
							seen = c
						}
					}
				}
				srv.Ask("ping")
			}
		}
		if seen != c.tracer {
			t.Errorf("snapctl %v: the server's tracer was %q, want %q", c.flags, seen, c.tracer)
		}
		srv.MustServe(t)
		// snapctl's SIGTRAP handler (driver/backend/native/trap.go)
		// goes with its page as snapctl detaches.
		if left := trapHandlerLeft(srv.Pid); left != "" {
			t.Errorf("snapctl %v: %s", c.flags, left)
		}
	}
}

// tgid is the process that thread tid belongs to, "" once it is gone.
func tgid(tid string) string {
	st, _ := os.ReadFile("/proc/" + tid + "/status")
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:\t"); ok {
			return v
		}
	}
	return ""
}

// trapHandlerLeft says what is left of snapctl's SIGTRAP handler in
// process pid: a SIGTRAP handler, or an anonymous executable mapping
// (the fixtures have none of their own); "" for nothing.
func trapHandlerLeft(pid int) string {
	st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	var left []string
	if mask, err := strconv.ParseUint(statusField(string(st), "SigCgt"), 16, 64); err != nil || mask&(1<<(syscall.SIGTRAP-1)) != 0 {
		left = append(left, "a SIGTRAP handler (SigCgt "+statusField(string(st), "SigCgt")+")")
	}
	maps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	for _, l := range strings.Split(string(maps), "\n") {
		if f := strings.Fields(l); len(f) == 5 && strings.HasPrefix(f[1], "r-x") {
			left = append(left, "an anonymous executable mapping "+f[0])
		}
	}
	return strings.Join(left, ", ")
}
