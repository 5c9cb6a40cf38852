package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/proc"
)

// StartFixture starts bin with args as the test's own process, marked as
// the test's (ScopeEnv), and kills it at the end of the test unless it
// has exited.
func StartFixture(t testing.TB, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), ScopeEnv(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// Server is the threaded TCP fixture (driver/testdata/native/tcpserver.c)
// running with 4 worker threads, listening on 127.0.0.1.
type Server struct {
	Pid  int
	Port string
	Cmd  *exec.Cmd
}

// StartServer builds the server fixture from src, starts it and waits for
// its port; the test kills it at its end.
func StartServer(t testing.TB, src string) *Server {
	t.Helper()
	bin := Build(t, src)
	portFile := filepath.Join(t.TempDir(), "port")
	cmd := StartFixture(t, bin, portFile, "4")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(portFile); err == nil {
			return &Server{Pid: cmd.Process.Pid, Port: strings.TrimSpace(string(data)), Cmd: cmd}
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not start")
		}
	}
}

// Gone says how the server ended when it has, "" while it runs.
func (s *Server) Gone() string {
	if proc.Alive(s.Pid) {
		return ""
	}
	s.Cmd.Wait()
	return "the server " + s.Cmd.ProcessState.String()
}

// Settled waits until every thread of the server runs on its own: none
// in a stop of a tracer's (t or T), no tracer, no signal pending (a
// SIGTRAP that a tracer's death left, which kills the server, is
// delivered as its thread leaves the stop: docs/facts.md, fact 63). It
// then says how the server ended, "" while it runs, or what it still
// waits for after a minute.
func (s *Server) Settled() string {
	why := ""
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if why = unsettled(s.Pid); why == "" {
			break
		}
	}
	if g := s.Gone(); g != "" {
		return g
	}
	if why != "" {
		return "the server has not settled after a minute: " + why
	}
	return ""
}

// unsettled says what keeps process pid from running on its own: a
// tracer, a thread in a stop, a signal pending; "" when nothing does, or
// when the process is gone.
func unsettled(pid int) string {
	if !proc.Alive(pid) {
		return ""
	}
	st, err := proc.Status(pid)
	if err != nil {
		return ""
	}
	if st["TracerPid"] != "0" {
		return "traced by " + st["TracerPid"]
	}
	if p, _ := strconv.ParseUint(st["ShdPnd"], 16, 64); p != 0 {
		return "signals pending: " + st["ShdPnd"]
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		ts, err := proc.Status(tid)
		if err != nil {
			continue
		}
		if p, _ := strconv.ParseUint(ts["SigPnd"], 16, 64); p != 0 {
			return fmt.Sprintf("thread %d has signals pending: %s", tid, ts["SigPnd"])
		}
		if state := ts["State"]; strings.HasPrefix(state, "t") || strings.HasPrefix(state, "T") {
			return fmt.Sprintf("thread %d is %s", tid, state)
		}
	}
	return ""
}

// Lives reports whether process pid exists, is no zombie, and has no
// SIGKILL or SIGTERM pending: a process just killed may take a moment to
// show it in its state.
func Lives(pid int) bool {
	if !proc.Alive(pid) {
		return false
	}
	st, err := proc.Status(pid)
	if err != nil {
		return false
	}
	const deadly = 1<<(9-1) | 1<<(15-1) // SIGKILL, SIGTERM
	for _, f := range []string{"ShdPnd", "SigPnd"} {
		if p, _ := strconv.ParseUint(st[f], 16, 64); p&deadly != 0 {
			return false
		}
	}
	return true
}

// Ask sends one request and returns the answer.
func (s *Server) Ask(line string) (string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+s.Port, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	data, err := io.ReadAll(c)
	return string(data), err
}

// MustServe fails the test unless the server answers a request and runs,
// untraced.
func (s *Server) MustServe(t testing.TB) {
	t.Helper()
	got, err := s.Ask("ping")
	if err != nil || !strings.HasPrefix(got, "ok ") || !strings.HasSuffix(got, " ping\n") {
		st, _ := proc.Status(s.Pid)
		t.Fatalf("the server does not answer: %q, %v (state %q, tracer %q)", got, err, st["State"], st["TracerPid"])
	}
	st, _ := proc.Status(s.Pid)
	if st["TracerPid"] != "0" || !strings.HasPrefix(st["State"], "S") && !strings.HasPrefix(st["State"], "R") {
		t.Fatalf("the server after snapctl: state %q, tracer %q", st["State"], st["TracerPid"])
	}
}

// LoadPause is what each of Load's clients waits between its
// requests: on this 2-core machine 4 clients asking without pause had
// 5,500 requests a second answered for 1.6 s of processor time a second
// (the race-built test's clients most of it), and pausing 500 us, 2,100
// for 0.8 s, a request in flight about three quarters of each client's
// time: some request is in flight at almost every moment (docs/facts.md,
// fact 143).
const LoadPause = 500 * time.Microsecond

// Load sends requests from 4 clients until stop is closed, each client
// pausing LoadPause between its requests: the server is under load
// throughout at about half the processor time. It returns how many
// requests were answered; a request may fail while gdb holds the server.
func (s *Server) Load(stop <-chan struct{}) (answered func() int64) {
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := time.NewTimer(0)
			defer wait.Stop()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				case <-wait.C:
				}
				if got, err := s.Ask(fmt.Sprintf("client %d request %d", i, j)); err == nil && strings.HasPrefix(got, "ok ") {
					n.Add(1)
				}
				wait.Reset(LoadPause)
			}
		}()
	}
	return func() int64 { wg.Wait(); return n.Load() }
}

// TextChanges compares the code process pid runs (every executable
// mapping of a file: the program and its libraries) with the files, and
// describes where they differ: a breakpoint instruction left behind.
func TextChanges(t testing.TB, pid int) []string {
	t.Helper()
	maps, err := proc.Maps(pid)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var diffs []string
	for _, m := range maps {
		if !strings.Contains(m.Perms, "x") || !strings.HasPrefix(m.Path, "/") {
			continue
		}
		start, end, off := m.Lo, m.Hi, m.Offset
		span := fmt.Sprintf("%x-%x", start, end)
		file, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%s", pid, span))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, end-start)
		n, _ := file.ReadAt(want, int64(off))
		file.Close()
		got := make([]byte, n)
		if _, err := mem.ReadAt(got, int64(start)); err != nil {
			t.Fatalf("reading %s of process %d: %v", span, pid, err)
		}
		// The byte by byte look only where the text differs: under the
		// race detector each byte read in Go is a call of its own, some
		// 2 s of processor time a package for libc's text at every check.
		if bytes.Equal(got, want[:n]) {
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				diffs = append(diffs, fmt.Sprintf("%s+%#x: %#02x, the file has %#02x", m.Path, off+uint64(i), got[i], want[i]))
			}
		}
	}
	return diffs
}
