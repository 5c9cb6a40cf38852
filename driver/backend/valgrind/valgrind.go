package valgrind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/console"
	"github.com/snapctl/snapctl/internal/child"
)

// readyBanner is what valgrind writes to its log once its gdbserver accepts
// vgdb (docs/facts.md, fact 11); connecting earlier fails with "no FIFO
// found".
const readyBanner = "TO DEBUG THIS PROCESS USING GDB"

// valgrindConfig says how to start valgrind running the target.
type valgrindConfig struct {
	Path   string   // the valgrind executable
	Args   []string // valgrind's options, then the binary and its arguments
	Dir    string   // the target's working directory, "" for ours
	Env    []string // the target's full environment
	Stdout io.Writer
	Stderr io.Writer
	// Tail, when set, already keeps what valgrind writes to Stderr (the
	// console's shared pseudo-terminal): Stderr is then handed to valgrind
	// as it is, the same terminal as Stdout, and the order of the two
	// holds.
	Tail *console.Tail
	// Drain, with Tail, waits until Tail holds all that valgrind wrote
	// before it exited: the console copies it from the terminal on its
	// own time.
	Drain func()
	Log   string // valgrind's --log-file, read for readiness and messages
	// VgdbPrefix is valgrind's --vgdb-prefix, whose FIFO valgrind holds
	// open once its gdbserver is ready.
	VgdbPrefix string
}

// valgrindProc is valgrind running the target, in its own process group.
type valgrindProc struct {
	// proc is nil in a stop loop driven by a script, with no valgrind.
	proc *child.Process
	log  string
	// fifo starts the name of the FIFO vgdb writes to (see ready).
	fifo string
	// stderr keeps what valgrind last wrote on its stderr, for messages;
	// drain, when set, waits for it to hold all of it (valgrindConfig).
	stderr *console.Tail
	drain  func()
}

// startValgrind starts valgrind in its own process group. The process is
// waited for in the background; stop ends it.
func startValgrind(cfg valgrindConfig) (*valgrindProc, error) {
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = cfg.Env
	// valgrind's stderr goes through a console.Tail, so that a message can
	// quote what valgrind said before its log was open. When stdout and
	// stderr go to one place, one writer takes both: exec then gives
	// valgrind a single pipe for the two, and their order holds.
	stderr := cfg.Tail
	switch {
	case cfg.Tail != nil:
		cmd.Stdout, cmd.Stderr = cfg.Stdout, cfg.Stderr
	case console.SameFile(cfg.Stdout, cfg.Stderr):
		stderr = console.NewTail(cfg.Stderr, console.TailMax)
		cmd.Stdout, cmd.Stderr = stderr, stderr
	default:
		stderr = console.NewTail(cfg.Stderr, console.TailMax)
		cmd.Stdout, cmd.Stderr = cfg.Stdout, stderr
	}
	// No stdin: valgrind runs in a background process group, where reading
	// the terminal would stop it with SIGTTIN.
	cmd.Stdin = nil
	// DieWithParent: a snapctl killed with SIGKILL cannot tear down, and
	// a valgrind left alone waits for gdb forever at startup or runs the
	// target to its end. It survives exec (valgrind's launcher execs the
	// tool), not fork: the sweep finds a target's own children by the
	// mark. WaitDelay: output copied through pipes (a non-*os.File
	// writer) must not keep Wait blocked forever once valgrind is gone
	// and a grandchild holds the pipe.
	proc, err := child.Start("valgrind", cmd, child.Options{DieWithParent: true, WaitDelay: 2 * time.Second})
	if err != nil {
		return nil, &backend.ToolError{Tool: "valgrind", Msg: "cannot start", Err: err}
	}
	p := &valgrindProc{proc: proc, log: cfg.Log, stderr: stderr, fifo: cfg.VgdbPrefix + "-from-vgdb-to-"}
	if cfg.Tail != nil {
		p.drain = cfg.Drain
	}
	return p, nil
}

// Pid is valgrind's process id, which is also the target's: valgrind runs
// the program in its own process.
func (p *valgrindProc) Pid() int {
	if p.proc == nil {
		return 0 // a stop loop driven by a script, with no valgrind
	}
	return p.proc.Pid()
}

// done is closed once valgrind has ended; never without valgrind.
func (p *valgrindProc) done() <-chan struct{} {
	if p.proc == nil {
		return nil
	}
	return p.proc.Done()
}

// exited reports whether valgrind has ended.
func (p *valgrindProc) exited() bool { return p.proc != nil && p.proc.Exited() }

// state is how valgrind ended; nil until it has.
func (p *valgrindProc) state() *os.ProcessState {
	if p.proc == nil {
		return nil
	}
	return p.proc.State()
}

// waitReady polls until valgrind's gdbserver is ready (see ready). It
// fails when valgrind exits first, when timeout passes, or when ctx ends.
func (p *valgrindProc) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.ready() {
			return nil
		}
		select {
		case <-p.done():
			return &backend.ToolError{Tool: "valgrind", Msg: "exited before its gdbserver was ready", Err: errors.New(p.proc.Ended()), Tail: p.said(12)}
		case <-deadline.C:
			return &backend.ToolError{Tool: "valgrind", Msg: fmt.Sprintf("gdbserver not ready after %v", timeout), Tail: logTail(p.log, 12)}
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// ready reports whether valgrind's gdbserver waits for vgdb: its log
// has the banner, and valgrind holds open the FIFO vgdb writes to. It
// prints the banner before it creates its shared memory file and the
// FIFOs, and a vgdb that comes in between finds no FIFO, or a
// half-written file, and ends the connection (docs/facts.md, fact 11).
func (p *valgrindProc) ready() bool {
	data, err := os.ReadFile(p.log)
	if err != nil || !bytes.Contains(data, []byte(readyBanner)) {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", p.Pid())
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, p.fifo) {
			return true
		}
	}
	return false
}

// said returns the last n lines valgrind wrote to its log, or to its
// stderr when the log holds nothing: valgrind reports there what keeps it
// from starting at all. valgrind has exited.
func (p *valgrindProc) said(n int) string {
	if t := strings.TrimSpace(logTail(p.log, n)); t != "" {
		return t
	}
	if p.drain != nil {
		p.drain()
	}
	return p.stderr.Lines(n)
}

// stop ends valgrind and everything in its process group. When the target
// has exited (exited set) it waits up to grace for valgrind to finish on
// its own; then it sends SIGTERM, and after grace SIGKILL (a valgrind
// waiting for gdb at startup ignores SIGTERM: docs/facts.md, fact 11).
func (p *valgrindProc) stop(grace time.Duration, exited bool) {
	if p.proc == nil {
		return
	}
	sigs := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
	if exited {
		sigs = append([]syscall.Signal{0}, sigs...)
	}
	p.proc.Stop(grace, sigs...)
}

// logTail returns the last n lines of a file, for messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
