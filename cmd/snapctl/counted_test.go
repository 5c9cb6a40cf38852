package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/backend/native/uprobes"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// bpfLinksOf counts the eBPF links process pid holds.
func bpfLinksOf(pid int) int {
	n := 0
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); l == "anon_inode:bpf_link" {
			n++
		}
	}
	return n
}

// snapctl attach killed with SIGKILL while the kernel counts a busy
// server's requests (every 20th stops it): its probes go with its file
// descriptors, gdb and gdbserver leave, and the server serves on,
// untraced, its code the files' again; no stop signal ever killed it.
func TestAttachSnapctlKilledWhileCounting(t *testing.T) {
	t.Parallel()
	snapctlKilledWhileCounting(t, false)
}

// The same, snapctl taking the stops itself as the server's tracer
// (SNAPCTL_STOPS=snapctl): killed, the kernel detaches it from every
// thread, and the server serves on, no probe left, gdb and gdbserver
// long gone.
func TestAttachSeizedSnapctlKilled(t *testing.T) {
	t.Parallel()
	snapctlKilledWhileCounting(t, true)
}

func snapctlKilledWhileCounting(t *testing.T, seized bool) {
	var refused *uprobes.Refused
	if err := uprobes.Available(); errors.As(err, &refused) {
		t.Skipf("the kernel does not count hits here: %v", err)
	}
	testenv.MustHave(t, "gdb", "gdbserver")
	srv := testenv.StartServer(t, nativeFixtures+"tcpserver.c")
	stop := make(chan struct{})
	answered := srv.Load(stop)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(snapctlBinary(t), "attach", "-q", "--timeout", "2m", "-o", filepath.Join(dir, "run"), plan, fmt.Sprint(srv.Pid))
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t), "SNAPCTL_HITS=kernel")
	if seized {
		cmd.Env = append(cmd.Env, "SNAPCTL_STOPS=snapctl")
	}
	// A file, not a pipe: the guardian snapctl leaves behind holds its
	// stderr, and Wait would wait for it.
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// A snapctl that has ended, or whose probes never came, says why in
	// its messages and its run's log.
	why := func() string {
		msgs, _ := os.ReadFile(stderr.Name())
		data, _ := os.ReadFile(filepath.Join(dir, "run", "run.json"))
		return fmt.Sprintf("stderr:\n%s\nrun.json:\n%s", msgs, data)
	}
	for deadline := testenv.NewDeadline(time.Minute); bpfLinksOf(cmd.Process.Pid) == 0; time.Sleep(5 * time.Millisecond) {
		if !proc.Alive(cmd.Process.Pid) {
			t.Fatalf("snapctl ended before the kernel took the counting over\n%s", why())
		}
		if deadline.Passed() {
			t.Fatalf("the kernel never took the counting over in %v\n%s", deadline.Waited(), why())
		}
	}
	if seized {
		tp := tracerPid(srv.Pid)
		st, _ := proc.Status(tp)
		if tg, _ := strconv.Atoi(st["Tgid"]); tp == 0 || tg != cmd.Process.Pid {
			t.Fatalf("the server is traced by %d, not by snapctl (%d)", tp, cmd.Process.Pid)
		}
	}
	time.Sleep(300 * time.Millisecond) // hits counted, stops taken
	cmd.Process.Kill()
	cmd.Wait()
	// snapctl's guardian outlives it: when gdbserver dies still tracing
	// a thread, it seizes the server's threads to put them right, and
	// lets them go (docs/facts.md, fact 120). A check of the server while
	// it works would see a tracer that is about to go, so wait for it to
	// end, and with it every process of snapctl's.
	bin := snapctlBinary(t)
	for deadline := testenv.NewDeadline(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		left := testenv.Mine(t, func(p testenv.Proc) bool { return strings.HasPrefix(p.Cmdline, bin) })
		if len(left) == 0 {
			break
		}
		if deadline.Passed() {
			t.Fatalf("snapctl's guardian has not ended a minute after snapctl was killed: %v", left)
		}
	}
	// gdb sees its input end and detaches; gdbserver, its connection
	// gone, detaches too.
	for deadline := testenv.NewDeadline(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid))
		if strings.Contains(string(st), "TracerPid:\t0\n") {
			break
		}
		if deadline.Passed() {
			t.Fatal("the server is still traced 30 s after snapctl was killed")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if g := srv.Gone(); g != "" {
		t.Fatal(g)
	}
	// gdb's own breakpoint in the dynamic loader (its shlib event) is
	// left in by gdbserver when snapctl and gdb die together
	// (docs/native.md, "gdbserver traces the process"); none is left
	// in the server's code.
	var left []string
	for _, c := range testenv.TextChanges(t, srv.Pid) {
		if !strings.Contains(c, "/ld-linux") {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		t.Fatalf("probes or breakpoints left in the server: %s", strings.Join(left, "; "))
	}
	for i := 0; i < 20; i++ {
		srv.MustServe(t)
	}
	close(stop)
	if answered() == 0 {
		t.Error("no request of the load was answered")
	}
	// The server never took a stop signal (SIGWINCH is ignored; its
	// status would show it pending if it were blocked), and runs
	// untraced.
	for deadline := testenv.NewDeadline(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.Pid))
		running := strings.Contains(string(st), "State:\tS") || strings.Contains(string(st), "State:\tR")
		if running && strings.Contains(string(st), "TracerPid:\t0\n") {
			break
		}
		if deadline.Passed() {
			t.Fatalf("server state 30 s after snapctl was killed: %s", st)
		}
	}
}

// startSeized starts snapctl attach on a loaded server with snapctl
// taking the stops (every 20th request) and waits until it traces the
// server and the kernel counts.
func startSeized(t *testing.T) (srv *testenv.Server, cmd *exec.Cmd, stderr *testenv.Buffer, stop chan struct{}, answered func() int64) {
	t.Helper()
	var refused *uprobes.Refused
	if err := uprobes.Available(); errors.As(err, &refused) {
		t.Skipf("the kernel does not count hits here: %v", err)
	}
	testenv.MustHave(t, "gdb", "gdbserver")
	srv = testenv.StartServer(t, nativeFixtures+"tcpserver.c")
	stop = make(chan struct{})
	answered = srv.Load(stop)
	dir := t.TempDir()
	plan := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(plan, []byte("backend: native\nbreakpoints:\n  - name: request\n    location: handle_request\n    every: 20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(snapctlBinary(t), "attach", "-q", "--timeout", "2m", "-o", filepath.Join(dir, "run"), plan, fmt.Sprint(srv.Pid))
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t), "SNAPCTL_HITS=kernel", "SNAPCTL_STOPS=snapctl")
	stderr = &testenv.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := testenv.NewDeadline(time.Minute); bpfLinksOf(cmd.Process.Pid) == 0; time.Sleep(5 * time.Millisecond) {
		if deadline.Passed() {
			t.Fatalf("the kernel never took the counting over: %s", stderr)
		}
	}
	return srv, cmd, stderr, stop, answered
}

// The server killed while snapctl takes its stops: the run ends as
// under gdb, exit 12 naming the signal, the stops taken kept.
func TestAttachSeizedTargetKilled(t *testing.T) {
	t.Parallel()
	srv, cmd, stderr, stop, _ := startSeized(t)
	defer close(stop)
	time.Sleep(300 * time.Millisecond) // stops taken
	syscall.Kill(srv.Pid, syscall.SIGKILL)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitCrashed || !strings.Contains(stderr.String(), "SIGKILL") {
		t.Fatalf("snapctl ended with %v, want exit %d naming SIGKILL:\n%s", err, exitCrashed, stderr)
	}
}

// snapctl stopped (SIGSTOP for 2 s, then SIGCONT) while it takes the
// stops: the run goes on, Ctrl-C ends it, and the server serves on,
// untraced, no probe left.
func TestAttachSeizedSnapctlStopped(t *testing.T) {
	t.Parallel()
	srv, cmd, stderr, stop, answered := startSeized(t)
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	cmd.Process.Signal(syscall.SIGCONT)
	for n, deadline := 0, testenv.NewDeadline(time.Minute); n < 20; {
		if got, err := srv.Ask("after the stop"); err == nil && strings.HasPrefix(got, "ok ") {
			n++
		}
		if deadline.Passed() {
			t.Fatalf("the server answered %d requests in %v after snapctl was continued", n, deadline.Waited())
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("snapctl ended with %v, want exit %d:\n%s", err, exitInterrupted, stderr)
	}
	if tp := tracerPid(srv.Pid); tp != 0 {
		t.Errorf("the server is still traced by %d", tp)
	}
	if ch := testenv.TextChanges(t, srv.Pid); len(ch) > 0 {
		t.Errorf("probes left in the server: %s", strings.Join(ch, "; "))
	}
	srv.MustServe(t)
	close(stop)
	if answered() == 0 {
		t.Error("no request of the load was answered")
	}
}
