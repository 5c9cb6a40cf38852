package native

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/runjson"
)

// The guardian of snapctl attach. snapctl leaves the process it attached
// to as it found it however gdb ends (detach.go, guard.go, rescue.go), but
// a snapctl that is itself killed (SIGKILL, the OOM killer) repairs
// nothing:
//
//   - gdb sees its input end and quits. Under --guard, gdb cannot always
//     interrupt the process to detach (gdbserver's interrupt goes to a
//     process group the process may not lead, docs/facts.md, fact 64),
//     and gdbserver, at the end of its connection, detaches with the
//     breakpoints in: the process dies of SIGTRAP at the next hit.
//   - With --sites, heaptrack's library writes on into snapctl's FIFO,
//     which nobody reads any more: the process dies of SIGPIPE at the
//     library's next write (fact 68).
//
// So a small process outlives snapctl: snapctl's own binary, started again
// with guardianEnv set, in a session of its own. It holds what it needs
// from the start: a copy of gdb's connection to gdbserver under --guard
// (gdbserver then never sees its connection end), and heaptrack's FIFO
// open for reading under --sites (the FIFO then has a reader for as long
// as the guardian lives; it reads nothing while snapctl lives, and the
// stream stays snapctl's). snapctl tells it over a pipe, its standard
// input, gdb's process, the program's bytes under each breakpoint, and
// whether the library records. When that pipe ends without "done" (snapctl
// died, or could not put the process right), the guardian empties the
// FIFO as it fills and does what snapctl would have done with gdb gone:
// under --guard it ends gdb and has gdbserver take the breakpoints out and
// detach (guard.release); else it waits for gdb to detach (a stopped gdb
// is continued, so that it sees its input end) and puts back the
// program's bytes wherever a breakpoint instruction is left; then it
// stops the library with a call in one thread (stopLibrary), continues a
// process left stopped, and ends once the library has closed the FIFO or
// the process has ended. From its start it also traces the process's
// tracer (gdbserver, or gdb), so that whoever kills that, the program's
// bytes are back before the kernel lets the threads go (hold.go). What
// it did goes to guardian.log in snapctl's private directory.

// guardianEnv starts snapctl's binary as the guardian; its value is the
// guardianSpec, in JSON.
const guardianEnv = "SNAPCTL_ATTACH_GUARDIAN"

// guardianSpec is what the guardian is started with.
type guardianSpec struct {
	Pid    int              `json:"pid"`
	Server int              `json:"gdbserver,omitempty"` // under --guard
	Conn   int              `json:"conn,omitempty"`      // its descriptor of gdb's connection to gdbserver
	FIFO   int              `json:"fifo,omitempty"`      // under --sites, its descriptor of the FIFO, open for reading
	Layout heaptrack.Layout `json:"layout"`
	Dir    string           `json:"dir,omitempty"` // snapctl's private directory
}

func init() {
	if spec := os.Getenv(guardianEnv); spec != "" {
		os.Exit(runGuardian(spec))
	}
}

// guardian is snapctl's end of its guardian: the pipe it tells it over.
type guardian struct {
	cmd  *exec.Cmd
	tell *os.File
	sent int  // patches told so far
	conn bool // it holds a copy of gdb's connection to gdbserver
}

// guardianWait is how long the guardian waits for gdb to let go of the
// process once snapctl is gone, emptying the FIFO meanwhile.
const guardianWait = time.Minute

// startGuardian starts the guardian of the process attached to, once gdb
// is attached (and before heaptrack is injected): the guardian holds
// gdb's connection to gdbserver and heaptrack's FIFO, open for reading,
// from its start (descriptors it inherits). A
// guardian that cannot start fails an attach with --sites, whose process
// would die of SIGPIPE if snapctl were killed; otherwise it is an event.
func (b *Launch) startGuardian() error {
	spec := guardianSpec{Pid: b.attach}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if b.guard != nil && b.guard.conn >= 0 {
		if fd, err := syscall.Dup(b.guard.conn); err == nil {
			syscall.CloseOnExec(fd)
			files = append(files, os.NewFile(uintptr(fd), "gdbserver"))
			spec.Server, spec.Conn = b.guard.server, 2+len(files)
		}
	}
	if b.sites != nil {
		fd, err := syscall.Open(b.sites.rec.FIFO(), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening heaptrack's FIFO for snapctl's guardian: %w", err)
		}
		files = append(files, os.NewFile(uintptr(fd), "fifo"))
		spec.FIFO, spec.Layout = 2+len(files), b.sites.layout
	}
	g, err := startGuardian(spec, files, b.env.Private)
	if err != nil {
		if b.sites != nil {
			return err
		}
		b.event(runjson.Event{Kind: eventUnguarded, Message: err.Error() + ": if snapctl is killed, its breakpoints may be left in the process"})
		return nil
	}
	g.say("gdb %d", b.gdb.Pid())
	b.guardian = g
	// Nothing protects the process from a killed tracer until the
	// guardian holds it: a breakpoint inserted before then, and gdb
	// killed, leaves the threads to the kernel with the breakpoints in
	// and the SIGTRAP handler unarmed (docs/facts.md, fact 133). On
	// a loaded machine the guardian's start can take longer than the
	// attach's next steps, so snapctl waits for it, as long as it runs.
	if !waitHoldReady(b.env.Private, g.cmd.Process.Pid, 15*b.env.Times.Grace) {
		b.event(runjson.Event{Kind: eventUnguarded, Message: "snapctl's guardian did not start within " + (15 * b.env.Times.Grace).String() + ": if gdb or gdbserver is killed before it holds them, a thread that runs into a breakpoint dies of SIGTRAP"})
	}
	if b.sites != nil {
		b.sites.guardian = g
	}
	return nil
}

// startGuardian starts the guardian of spec, with files as its
// descriptors from 3 on: it holds them from its start. Its messages go to
// a file in dir.
func startGuardian(spec guardianSpec, files []*os.File, dir string) (*guardian, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec.Dir = dir
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), guardianEnv+"="+string(js))
	cmd.Stdin = lifeR
	if log, err := os.Create(filepath.Join(dir, "guardian.log")); err == nil {
		cmd.Stderr = log
		defer log.Close()
	}
	cmd.ExtraFiles = files
	// A session of its own: Ctrl-C at snapctl's terminal and a signal to
	// snapctl's process group do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	lifeR.Close()
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("starting snapctl's guardian of the process: %w", err)
	}
	return &guardian{cmd: cmd, tell: lifeW, conn: spec.Conn != 0}, nil
}

// say tells the guardian one line; a guardian gone is not an error of the
// run's.
func (g *guardian) say(format string, args ...any) {
	if g != nil && g.tell != nil {
		fmt.Fprintf(g.tell, format+"\n", args...)
	}
}

// patches tells the guardian the breakpoints gdb inserted since the last
// call.
func (g *guardian) patches(ps []textPatch) {
	if g == nil {
		return
	}
	for ; g.sent < len(ps); g.sent++ {
		g.say("patch %x %s", ps[g.sent].addr, hex.EncodeToString(ps[g.sent].orig))
	}
}

// end lets the guardian go: with done, the process is left as it should
// be and the guardian ends at once; without, it puts the process right
// itself.
func (g *guardian) end(done bool) {
	if g == nil || g.tell == nil {
		return
	}
	if done {
		g.say("done")
	}
	g.tell.Close()
	g.tell = nil
	cmd := g.cmd
	if done && g.conn {
		// It ends at once: wait for it, so that its copy of gdbserver's
		// connection is closed before gdbserver is.
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		return
	}
	go cmd.Wait()
}

// runGuardian is the guardian's main: it returns its exit status.
func runGuardian(specJSON string) int {
	signal.Ignore(syscall.SIGPIPE, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU)
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
	}
	var spec guardianSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		logf("bad spec: %v", err)
		return 2
	}
	fifo, conn := -1, -1
	if spec.FIFO != 0 {
		fifo = spec.FIFO
		syscall.CloseOnExec(fifo)
	}
	if spec.Conn != 0 {
		conn = spec.Conn
		syscall.CloseOnExec(conn)
	}
	var (
		patches   []textPatch
		recording bool
		gdbPid    int
		trap      uint64 // the page of snapctl's SIGTRAP handler, 0 for none
	)
	// From the start: the tracer may die while snapctl lives.
	hold := holdTracer(spec.Pid, spec.Dir, logf)
	holdReady(spec.Dir)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "done":
			return 0
		case len(f) == 1 && f[0] == "recording":
			recording = true
		case len(f) == 1 && f[0] == "stopped":
			recording = false
		case len(f) == 2 && f[0] == "trap":
			if page, err := strconv.ParseUint(f[1], 16, 64); err == nil {
				trap = page
				hold.setTrap(page)
				logf("snapctl's SIGTRAP handler at %#x", page)
			}
		case len(f) == 1 && f[0] == "untrap":
			trap = 0
			hold.setTrap(0)
		case len(f) == 2 && f[0] == "gdb":
			gdbPid, _ = strconv.Atoi(f[1])
		case len(f) == 3 && f[0] == "patch":
			addr, err1 := strconv.ParseUint(f[1], 16, 64)
			orig, err2 := hex.DecodeString(f[2])
			if err1 == nil && err2 == nil {
				patches = append(patches, textPatch{addr: addr, orig: orig})
				hold.add(textPatch{addr: addr, orig: orig})
				logf("breakpoint at %#x", addr)
			}
		}
	}
	pid := spec.Pid
	logf("snapctl has gone without leaving process %d: %d breakpoints known, heaptrack recording: %v", pid, len(patches), recording)
	stopped := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		if fifo >= 0 {
			drainFIFO(fifo, stopped)
		}
		close(drained)
	}()
	finish := func(code int) int {
		close(stopped)
		<-drained
		return code
	}
	released := false
	if conn >= 0 {
		// gdbserver keeps the process while the guardian holds the
		// connection: gdb goes, and gdbserver takes the breakpoints out.
		// A gdb that died before snapctl may have left its number to
		// another process by now.
		if gdbPid != 0 && proc.Name(gdbPid) == "gdb" {
			syscall.Kill(gdbPid, syscall.SIGKILL)
			for deadline := time.Now().Add(5 * time.Second); proc.Alive(gdbPid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		g := &guard{pid: pid, server: spec.Server, conn: conn}
		addrs := make([]uint64, len(patches))
		for i, p := range patches {
			addrs[i] = p.addr
		}
		n, err := g.release(addrs, len(breakInsn), 20*time.Second)
		logf("gdbserver removed %d breakpoints and detached: %v", n, err)
		released = err == nil
		g.close(5 * time.Second)
	}
	for deadline := time.Now().Add(guardianWait); proc.Alive(pid) && tracerOf(pid) != 0; time.Sleep(20 * time.Millisecond) {
		if gdbPid != 0 && proc.Stat(gdbPid).State == 'T' {
			// A stopped gdb would never see its input end.
			syscall.Kill(gdbPid, syscall.SIGCONT)
		}
		if time.Now().After(deadline) {
			logf("process %d is still traced by %d: the FIFO is emptied until it closes", pid, tracerOf(pid))
			<-drained
			return 1
		}
	}
	if hold != nil {
		// The hold puts right the threads a dead tracer left, and
		// continues the process, before anything else touches it.
		select {
		case <-hold.restored:
		case <-time.After(5 * time.Second):
		}
	}
	if !proc.Alive(pid) {
		logf("process %d has ended", pid)
		return finish(0)
	}
	// A SIGSTOP of gdb's that it had not collected when it died stops
	// the process once it is untraced: stopped threads would never let
	// heaptrack_stop have heaptrack's lock or its timer thread.
	if continueStopped(pid) {
		logf("continued process %d, left stopped", pid)
	}
	if !released {
		n, err := restoreText(pid, patches)
		logf("put back the program's bytes at %d breakpoints: %v", n, err)
	}
	untrap := func() {
		if trap != 0 {
			err := removeTrapHandler(pid, trap)
			logf("took snapctl's SIGTRAP handler out of process %d: %v", pid, err)
		}
	}
	if recording {
		t, err := heaptrack.OpenTarget(pid, spec.Layout)
		if err == nil {
			err = stopLibrary(pid, t)
			t.Close()
		}
		if err != nil {
			logf("could not stop heaptrack's recording in process %d (%v): the FIFO is emptied until it closes", pid, err)
			// The handler goes all the same: the process runs on
			// as it would without snapctl, but for heaptrack's
			// library writing into the FIFO.
			untrap()
			<-drained
			return 1
		}
		logf("stopped heaptrack's recording in process %d", pid)
	}
	// A SIGSTOP of gdb's or gdbserver's still pending stops the process
	// once it is untraced.
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if proc.Stat(pid).State == 'T' {
			syscall.Kill(pid, syscall.SIGCONT)
			logf("continued process %d, left stopped", pid)
		}
	}
	untrap()
	logf("process %d runs on", pid)
	return finish(0)
}

// drainFIFO reads the FIFO at fd and throws its bytes away until no
// writer holds it, or, once stopped is closed, until it stays empty for a
// second (a forked child of the process may hold the library's
// descriptor without writing).
func drainFIFO(fd int, stopped <-chan struct{}) {
	buf := make([]byte, 64<<10)
	var empty time.Time
	for {
		n, err := syscall.Read(fd, buf)
		switch {
		case n > 0 || err == syscall.EINTR:
			empty = time.Time{}
			continue
		case err == syscall.EAGAIN:
		default:
			return // no writer left (n == 0), or the FIFO is unreadable
		}
		select {
		case <-stopped:
			if empty.IsZero() {
				empty = time.Now()
			} else if time.Since(empty) > time.Second {
				return
			}
		default:
		}
		time.Sleep(pollMaxGuardian)
	}
}

// pollMaxGuardian is how long the guardian sleeps while the FIFO is
// empty: the 1 MiB FIFO holds seconds of the library's stream.
const pollMaxGuardian = 5 * time.Millisecond

// tracerOf is the process's tracer, 0 for none.
func tracerOf(pid int) int {
	st, err := proc.Status(pid)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(st["TracerPid"]))
	return n
}
