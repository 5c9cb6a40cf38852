package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/runjson"
)

// The guard of a process that snapctl attach attaches to. gdb writes its
// breakpoints into the live process; when gdb dies (SIGKILL, the OOM
// killer) while it traces the process itself, the kernel lets every
// thread go at once: a thread in a breakpoint stop that gdb had not
// collected yet takes the SIGTRAP, a running one runs into a breakpoint
// instruction with no tracer, and the process dies before snapctl can
// take the breakpoints out (docs/facts.md, facts 34 and 63).
//
// So gdb does not trace the process: gdbserver does, started by gdb
// through a pipe (target extended-remote | gdbserver - ...), and snapctl
// keeps a copy of gdb's end of that pipe. When gdb dies, gdbserver sees
// no end of its connection and keeps the process: a thread that hits a
// breakpoint stops, its PC put back on the breakpoint, and waits. snapctl
// then speaks gdb's remote protocol to gdbserver over its copy: it stops
// the process, removes every breakpoint it knows of, and has gdbserver
// detach (facts 64 and 65). gdbserver runs in a session of its own (gdb
// starts a pipe's command so), so that ending gdb's process group spares
// it. gdbserver itself killed is covered by the guardian's hold on it
// (hold.go), but for a thread whose breakpoint stop gdbserver had not
// collected when it died; snapctl killed with gdb by the guardian, which
// holds a copy of the connection too (guardian.go).

// The system calls that copy a file descriptor of gdb's.
const (
	sysPidfdOpen  = 434 // the same number on every Linux architecture
	sysPidfdGetfd = 438
)

// eventUnguarded says that snapctl attach runs without the guard, and
// why.
const eventUnguarded runjson.EventKind = "attach-unguarded"

// guard is gdbserver tracing the process attached to, and snapctl's hold
// on gdb's connection to it.
type guard struct {
	pid    int    // the process attached to
	log    string // gdbserver's standard error
	server int    // gdbserver's process, once gdb has started it
	conn   int    // snapctl's copy of gdb's end of the connection; -1 until held
}

// attachGuarded attaches gdb to the process through gdbserver, and
// reports false when it cannot (no gdbserver): gdb then attaches itself.
func (b *Launch) attachGuarded(ctx context.Context) (bool, error) {
	if !b.guarded {
		return false, nil
	}
	if b.plan.Native.Sites {
		b.event(runjson.Event{Kind: eventUnguarded, Message: "native.sites: gdb traces the process itself, since its calls that start and stop heaptrack in the process are not safe through gdbserver (docs/facts.md, fact 70); the process dies of SIGTRAP if gdb is killed while a thread runs into a breakpoint"})
		return false, nil
	}
	g, err := newGuard(b.attach, b.env.Private)
	if err != nil {
		b.event(runjson.Event{Kind: eventUnguarded, Message: err.Error() + ": gdb traces the process itself, which dies of SIGTRAP if gdb is killed while a breakpoint is in it"})
		return false, nil
	}
	// gdbserver answers gdb's first packet once it has attached to every
	// thread, which on a loaded machine can take longer than gdb's 2 s:
	// 4 of 16 attaches under load failed so, taken for the kernel's
	// refusal (fact 28 is the same for vgdb).
	if _, err := b.gdb.Do(ctx, gdb.RemoteTimeout(b.env.Times.Command, b.env.Times.Stop)); err != nil {
		return true, fmt.Errorf("setting up gdb: %w", err)
	}
	if _, err := b.gdb.Do(ctx, gdb.Console(g.target())); err != nil {
		msg := g.attachMessage()
		if msg == "" {
			msg = gdb.Message(err)
		}
		select {
		case <-b.gdb.Done():
			// Not the kernel's refusal, nor another tracer: gdb died
			// while gdbserver attached, and gdbserver lets the process
			// go at the end of its connection (--once), no breakpoint in.
			return true, &backend.ToolError{Tool: "gdb", Msg: fmt.Sprintf("died while it attached to process %d through gdbserver: %s", b.attach, msg), Err: err}
		default:
		}
		if server := gdbserverOf(b.gdb.Pid()); server != 0 && g.tracedBy(server) {
			// gdbserver attached; gdb did not connect (a command
			// timeout): not the kernel's refusal. gdbserver lets the
			// process go when gdb ends (--once).
			return true, &backend.ToolError{Tool: "gdb", Msg: fmt.Sprintf("did not connect to gdbserver, which attached to process %d: %s", b.attach, msg), Err: err}
		}
		return true, AttachRefused(b.attach, msg)
	}
	b.guard = g
	b.gdb.SetInterrupt(func(context.Context) error { return g.interrupt() })
	if err := g.hold(b.gdb.Pid()); err != nil {
		b.event(runjson.Event{Kind: eventUnguarded, Message: "gdbserver traces the process, but snapctl has no hold on gdb's connection to it (" + err.Error() + "): if gdb is killed, gdbserver detaches with the breakpoints in"})
	}
	return true, nil
}

// event records a run.json event, when the run takes them.
func (b *Launch) event(ev runjson.Event) {
	if b.env.Run.Event != nil {
		b.env.Run.Event(ev)
	}
}

// releaseGuarded has gdbserver take out the breakpoints and detach once
// gdb is gone, and says how the process was left; false when gdbserver
// does not trace the process any more or could not.
func (b *Launch) releaseGuarded() (string, bool) {
	if b.guard == nil || !b.guard.tracing() {
		return "", false
	}
	addrs := make([]uint64, len(b.patches))
	for i, p := range b.patches {
		addrs[i] = p.addr
	}
	grace := b.env.Times.Grace
	n, err := b.guard.release(addrs, len(breakInsn), 10*grace)
	if err != nil {
		return "", false
	}
	// gdbserver ends once the last copy of its connection closes (the
	// guardian's too): closeGuard waits for it.
	left := fmt.Sprintf("process %d runs on: snapctl removed its %s through gdbserver, its tracer, which then detached", b.attach, backend.Plural(n, "breakpoint"))
	// A SIGSTOP of gdb's still pending leaves the process stopped.
	time.Sleep(10 * time.Millisecond)
	if proc.Stat(b.attach).State == 'T' {
		syscall.Kill(b.attach, syscall.SIGCONT)
		left += ", and continued it, stopped"
	}
	return left, true
}

// closeGuard lets go of gdbserver: it ends with the last end of its
// connection, gdb's or snapctl's.
func (b *Launch) closeGuard() {
	if b.guard == nil {
		return
	}
	select {
	case <-b.gdb.Done():
		b.guard.close(2 * b.env.Times.Grace)
	default:
		b.guard.close(0) // gdbserver ends when gdb quits
	}
}

// newGuard prepares the guard of process pid; gdbserver writes its
// messages to a file in dir. It fails when gdbserver is not installed.
func newGuard(pid int, dir string) (*guard, error) {
	if _, err := exec.LookPath("gdbserver"); err != nil {
		return nil, errors.New("gdbserver not found (install Debian's gdbserver package)")
	}
	return &guard{pid: pid, log: dir + "/gdbserver.log", conn: -1}, nil
}

// target is the gdb command that attaches to the process through
// gdbserver. gdbserver's standard error goes to a file: a write to gdb's
// pipe after gdb's death would end gdbserver with SIGPIPE. --once ends
// gdbserver when its connection ends. gdb starts the command in a
// session of its own (setsid), out of gdb's process group.
func (g *guard) target() string {
	return fmt.Sprintf("target extended-remote | exec gdbserver --once --attach - %d 2>%s", g.pid, shellQuote(g.log))
}

// attachMessage is what gdbserver said when it could not attach, for the
// error that gdb's own words would otherwise make.
func (g *guard) attachMessage() string {
	data, _ := os.ReadFile(g.log)
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "Cannot attach") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// hold takes a copy of gdb's end of its connection to gdbserver, once gdb
// has connected: gdbserver is gdb's child, its standard input one end of
// a socket pair, and gdb's end is the socket whose inode number is next
// to it (socketpair allocates both inodes at once).
func (g *guard) hold(gdbPid int) error {
	g.server = gdbserverOf(gdbPid)
	if g.server == 0 {
		return errors.New("gdb has no gdbserver child")
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", g.server))
	if err != nil {
		return err
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
	if err != nil {
		return fmt.Errorf("gdbserver's input is %s, not a socket", link)
	}
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", gdbPid))
	if err != nil {
		return err
	}
	fd := -1
	for _, e := range entries {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", gdbPid, e.Name()))
		if l == fmt.Sprintf("socket:[%d]", ino-1) || l == fmt.Sprintf("socket:[%d]", ino+1) {
			if fd >= 0 {
				return errors.New("gdb has two sockets next to gdbserver's")
			}
			fd, _ = strconv.Atoi(e.Name())
		}
	}
	if fd < 0 {
		return errors.New("gdb's end of its connection to gdbserver is not found")
	}
	pidfd, _, e := syscall.Syscall(sysPidfdOpen, uintptr(gdbPid), 0, 0)
	if e != 0 {
		return fmt.Errorf("pidfd_open: %w", e)
	}
	defer syscall.Close(int(pidfd))
	conn, _, e := syscall.Syscall(sysPidfdGetfd, pidfd, uintptr(fd), 0)
	if e != 0 {
		return fmt.Errorf("pidfd_getfd: %w", e)
	}
	syscall.CloseOnExec(int(conn))
	g.conn = int(conn)
	return nil
}

// gdbserverOf returns the gdbserver that gdb started, 0 for none.
func gdbserverOf(gdbPid int) int {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", gdbPid, gdbPid))
	for _, f := range strings.Fields(string(data)) {
		pid, _ := strconv.Atoi(f)
		if proc.Name(pid) == "gdbserver" {
			return pid
		}
	}
	return 0
}

// interrupt stops the process the way gdb's interrupt does natively: a
// SIGINT, which gdb stops at and does not pass on. It goes to the main
// thread only: gdbserver's own interrupt sends it to the process's
// process group, every process of it (or to none when the process leads
// no group). Only while gdbserver traces the process and is not exiting:
// a SIGINT that reaches the process untraced ends it (its default
// action), and gdb may not have seen gdbserver's death yet when snapctl
// has (stopLoop.waitStopped).
func (g *guard) interrupt() error {
	if fate, _ := proc.Fate(g.server); fate != "" || !g.tracing() {
		return fmt.Errorf("gdbserver no longer traces process %d", g.pid)
	}
	_, _, e := syscall.RawSyscall(syscall.SYS_TGKILL, uintptr(g.pid), uintptr(g.pid), uintptr(syscall.SIGINT))
	if e != 0 {
		return e
	}
	return nil
}

// tracing reports whether gdbserver still traces the process.
func (g *guard) tracing() bool { return g.server != 0 && g.tracedBy(g.server) }

// tracedBy reports whether process server traces the process.
func (g *guard) tracedBy(server int) bool {
	st, err := proc.Status(g.pid)
	return err == nil && st["TracerPid"] == strconv.Itoa(server)
}

// release has gdbserver remove the breakpoints at addrs (instructions of
// size bytes) and detach, once gdb is gone, and returns how many it
// removed. The process is stopped first: gdb may have died with it
// stopped (gdbserver then answers "?" with the stop at once) or running;
// a running process is sent a SIGCONT, which changes nothing for it,
// whenever it comes, and which gdbserver reports, stopping every thread.
func (g *guard) release(addrs []uint64, size int, timeout time.Duration) (int, error) {
	if g.conn < 0 {
		return 0, errors.New("snapctl holds no connection to gdbserver")
	}
	if err := syscall.SetNonblock(g.conn, true); err != nil {
		return 0, err
	}
	f := os.NewFile(uintptr(g.conn), "gdbserver")
	g.conn = -1
	defer f.Close()
	r := &remote{f: f}
	deadline := time.Now().Add(timeout)
	stopped := false
	for i := 0; !stopped && time.Now().Before(deadline); i++ {
		if err := r.send("?"); err != nil {
			return 0, err
		}
		for {
			p, err := r.packet(time.Now().Add(100 * time.Millisecond))
			if err != nil {
				break
			}
			if strings.HasPrefix(p, "W") || strings.HasPrefix(p, "X") {
				return 0, fmt.Errorf("process %d has exited", g.pid)
			}
			if strings.HasPrefix(p, "T") || strings.HasPrefix(p, "S") {
				stopped = true
				break
			}
		}
		if !stopped && i == 0 {
			syscall.RawSyscall(syscall.SYS_TGKILL, uintptr(g.pid), uintptr(g.pid), uintptr(syscall.SIGCONT))
		}
	}
	if !stopped {
		return 0, errors.New("gdbserver did not stop the process")
	}
	// Replies to what gdb or snapctl asked before the stop.
	for {
		if _, err := r.packet(time.Now().Add(50 * time.Millisecond)); err != nil {
			break
		}
	}
	removed := 0
	for _, a := range addrs {
		if err := r.send(fmt.Sprintf("z0,%x,%d", a, size)); err != nil {
			return removed, err
		}
		p, err := r.packet(deadline)
		if err != nil {
			return removed, fmt.Errorf("removing the breakpoint at %#x: %w", a, err)
		}
		if p == "OK" {
			removed++
		}
	}
	if err := r.send(fmt.Sprintf("D;%x", g.pid)); err != nil {
		return removed, err
	}
	if p, err := r.packet(deadline); err != nil || p != "OK" {
		return removed, fmt.Errorf("gdbserver did not detach: %q %v", p, err)
	}
	return removed, nil
}

// close lets go of gdb's connection to gdbserver, which then ends
// (--once), and ends gdbserver when it has not within grace.
func (g *guard) close(grace time.Duration) {
	if g.conn >= 0 {
		syscall.Close(g.conn)
		g.conn = -1
	}
	if g.server == 0 || grace == 0 {
		return
	}
	for deadline := time.Now().Add(grace); proc.Alive(g.server); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(g.server, syscall.SIGKILL)
			break
		}
	}
}

// remote is a connection in gdb's remote protocol, in the no-ack mode gdb
// sets up with gdbserver.
type remote struct {
	f   *os.File
	buf []byte
}

func (r *remote) send(body string) error {
	sum := 0
	for i := 0; i < len(body); i++ {
		sum += int(body[i])
	}
	_, err := fmt.Fprintf(r.f, "$%s#%02x", body, sum&0xff)
	return err
}

// packet returns the body of the next packet, as sent (run-length
// encoding left in).
func (r *remote) packet(deadline time.Time) (string, error) {
	r.f.SetReadDeadline(deadline)
	chunk := make([]byte, 4096)
	for {
		if start := strings.IndexByte(string(r.buf), '$'); start >= 0 {
			if end := strings.IndexByte(string(r.buf[start:]), '#'); end >= 0 && start+end+3 <= len(r.buf) {
				body := string(r.buf[start+1 : start+end])
				r.buf = r.buf[start+end+3:]
				return body, nil
			}
		}
		n, err := r.f.Read(chunk)
		if err != nil {
			return "", err
		}
		r.buf = append(r.buf, chunk[:n]...)
	}
}
