package native

import (
	"bytes"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// server is the threaded TCP fixture (tcpserver.c), listening on
// 127.0.0.1.
type server struct {
	pid  int
	port string
	cmd  *exec.Cmd
}

// startServer starts the fixture with 4 worker threads and waits for its
// port; the test kills it at its end.
func startServer(t *testing.T) server {
	t.Helper()
	bin := testenv.Build(t, "../../testdata/native/tcpserver.c")
	portFile := filepath.Join(t.TempDir(), "port")
	cmd := startFixture(t, bin, portFile, "4")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, err := os.ReadFile(portFile); err == nil {
			return server{pid: cmd.Process.Pid, port: strings.TrimSpace(string(data)), cmd: cmd}
		}
		if time.Now().After(deadline) {
			t.Fatal("the server did not start")
		}
	}
}

// gone says how the server ended when it has.
func (s server) gone() string {
	if alive(s.pid) {
		return ""
	}
	s.cmd.Wait()
	return "the server " + s.cmd.ProcessState.String()
}

// ask sends one request and returns the answer.
func (s server) ask(line string) (string, error) {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+s.port, 5*time.Second)
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

// mustServe fails the test unless the server answers a request and runs,
// untraced.
func (s server) mustServe(t *testing.T) {
	t.Helper()
	got, err := s.ask("ping")
	if err != nil || !strings.HasPrefix(got, "ok ") || !strings.HasSuffix(got, " ping\n") {
		st, _ := ProcStatus(s.pid)
		t.Fatalf("the server does not answer: %q, %v (state %q, tracer %q)", got, err, st["State"], st["TracerPid"])
	}
	st, err := ProcStatus(s.pid)
	if err != nil || st["TracerPid"] != "0" || !strings.HasPrefix(st["State"], "S") && !strings.HasPrefix(st["State"], "R") {
		t.Fatalf("the server after snapctl: %v, state %q, tracer %q", err, st["State"], st["TracerPid"])
	}
}

// textChanges compares the code the process runs (every executable
// mapping of a file: the program and its libraries) with the files, and
// describes where they differ: a breakpoint instruction left behind.
func textChanges(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	var diffs []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[1], "x") || !strings.HasPrefix(f[5], "/") {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(lo, 16, 64)
		end, _ := strconv.ParseUint(hi, 16, 64)
		off, _ := strconv.ParseUint(f[2], 16, 64)
		file, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%s", pid, f[0]))
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, end-start)
		n, _ := file.ReadAt(want, int64(off))
		file.Close()
		got := make([]byte, n)
		if _, err := mem.ReadAt(got, int64(start)); err != nil {
			t.Fatalf("reading %s of process %d: %v", f[0], pid, err)
		}
		for i := range got {
			if got[i] != want[i] {
				diffs = append(diffs, fmt.Sprintf("%s+%#x: %#02x, the file has %#02x", f[5], off+uint64(i), got[i], want[i]))
			}
		}
	}
	return diffs
}

// TestBreakpointAddrs reads the addresses of `maint info breakpoints`,
// gdb's own breakpoints and multiple locations included.
func TestBreakpointAddrs(t *testing.T) {
	table := `Num     Type           Disp Enb Address            What
-4      shlib events   keep y   0x00007fb45a7ec060 <__GI__dl_debug_state> inf 1
-4.1                        y   0x00007fb45a7ec060 <__GI__dl_debug_state> inf 1
-8      longjmp master keep n   0x00007fb45a630da0 <__libc_siglongjmp> inf 1
1       breakpoint     keep y   <MULTIPLE>
1.1                         y   0x000055c47277116d in tick at t.c:3 inf 1
1.2                         y   0x000055c472771200 in tick at t.c:3 inf 1
	breakpoint already hit 1 time
`
	got := breakpointAddrs(table)
	want := []uint64{0x7fb45a7ec060, 0x7fb45a630da0, 0x55c47277116d, 0x55c472771200}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("addresses %x, want %x", got, want)
	}
	if got := breakpointAddrs("No breakpoints or watchpoints.\n"); len(got) != 0 {
		t.Errorf("no breakpoints: %x", got)
	}
}

// TestRestoreText: the bytes snapctl restores in a running threaded
// process whose tracer is gone: an int3 written where the program has
// other code is replaced with the file's bytes; an address that holds
// the file's bytes already is left alone.
func TestRestoreText(t *testing.T) {
	t.Parallel()
	if breakInsn == nil {
		t.Skip("no breakpoint instruction known here")
	}
	srv := startServer(t)
	maps := readMaps(srv.pid)
	// handle_request's first instruction, as the file has it.
	addr := symbolAddr(t, srv.pid, maps, "handle_request")
	orig := originalBytes(srv.pid, maps, addr, len(breakInsn))
	if orig == nil || bytes.Equal(orig, breakInsn) {
		t.Fatalf("the program's bytes at %#x: %x", addr, orig)
	}
	mem, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", srv.pid), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if _, err := mem.WriteAt(breakInsn, int64(addr)); err != nil {
		t.Fatal(err)
	}
	if len(textChanges(t, srv.pid)) != 1 {
		t.Fatalf("the int3 written is not seen")
	}
	n, err := restoreText(srv.pid, []textPatch{{addr: addr, orig: orig}, {addr: addr + 1, orig: []byte{0}}})
	if err != nil || n != 1 {
		t.Fatalf("restored %d, %v; want 1", n, err)
	}
	if ch := textChanges(t, srv.pid); len(ch) > 0 {
		t.Fatalf("after the restore: %s", strings.Join(ch, "; "))
	}
	srv.mustServe(t)
	if _, err := restoreText(1<<22+12345, nil); err == nil {
		t.Errorf("no error for a process that does not exist")
	}
}

// symbolAddr is the run-time address of the program's function name.
func symbolAddr(t *testing.T, pid int, maps []mapping, name string) uint64 {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var sym uint64
	for _, s := range syms {
		if s.Name == name {
			sym = s.Value
		}
	}
	if sym == 0 {
		t.Fatalf("no symbol %s in %s", name, exe)
	}
	// A PIE's symbols are offsets from the first mapping of the file.
	for _, m := range maps {
		if m.path == exe && m.offset == 0 {
			return m.start + sym
		}
	}
	t.Fatalf("%s is not mapped", exe)
	return 0
}

// startFixture starts a fixture program, ended when the test ends.
func startFixture(t *testing.T, bin string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), testenv.ScopeEnv(t))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

// alive reports whether process pid runs: it exists and is no zombie.
func alive(pid int) bool {
	st := readProcState(pid)
	return st.ok && st.state != 'Z' && st.state != 'X'
}
