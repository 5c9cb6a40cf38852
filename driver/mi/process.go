package mi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/snapctl/snapctl/internal/child"
)

const (
	// defaultCloseGrace is how long Close waits for gdb to obey -gdb-exit
	// before it kills gdb's process group.
	defaultCloseGrace = 2 * time.Second
	// drainTime bounds how long a dead gdb's output is still read: a
	// descendant in another process group may hold the pipe open.
	drainTime = 250 * time.Millisecond
	// stderrTailSize is how much of gdb's stderr an ExitError keeps.
	stderrTailSize = 4 << 10
)

// Options say how Start runs gdb.
type Options struct {
	// Path is the gdb executable; "gdb" (looked up in PATH) when empty.
	Path string
	// Args follow the fixed arguments --nx --quiet --interpreter=mi3.
	Args []string
	// Dir is gdb's working directory; the caller's when empty.
	Dir string
	// Env is gdb's environment; the caller's when nil.
	Env []string
	// Trace, when set, receives every line exchanged with gdb: commands
	// prefixed with "-> ", gdb's output as is, its stderr prefixed with
	// "stderr: ". snapctl's --trace writes it to gdb-mi.log.
	Trace io.Writer
	// Async turns mi-async on (-gdb-set mi-async on) before Start returns,
	// so that commands, -exec-interrupt above all, are accepted while the
	// target runs. It must be set before gdb connects to a target.
	Async bool
	// CloseGrace is how long Close waits for gdb to exit before it kills
	// gdb's process group; 2s when zero.
	CloseGrace time.Duration
	// StartTimeout bounds the wait for gdb's first prompt, adapted to a
	// slow machine: when it passes and gdb has used CPU time meanwhile,
	// or waits for a CPU, the wait goes on for as long again, up to
	// startExtensions times; a gdb that did neither has hung. Zero: ctx
	// alone bounds the start.
	StartTimeout time.Duration
	// StartsProgram says that gdb will start the program it debugs,
	// which inherits gdb's resource limits and process group: gdb's
	// RLIMIT_CORE then stays the caller's, and ending gdb ends gdb alone,
	// not the processes the program leaves in the group. Any other gdb,
	// and the vgdb it starts, gets a core size limit of 0 (see
	// noCoreFiles) and is ended with its process group.
	StartsProgram bool
	// DieWithParent has the kernel kill gdb when snapctl dies, however
	// it dies (child.Options.DieWithParent). For a gdb connected to
	// valgrind, whose program dies with valgrind anyway: such a gdb
	// blocked on a reply through vgdb does not see snapctl's end on its
	// input for as long as its remotetimeout. Never for a gdb attached
	// to a process, whose death would leave the process its breakpoints.
	DieWithParent bool
}

// noCoreArgs keep gdb from dumping core on its own internal errors and
// warnings, where it would ask "Create a core file of GDB?" and, with no
// terminal, answer yes: it raises its soft RLIMIT_CORE to the hard limit
// first, so that a 50 MB core lands in its working directory even under
// `ulimit -S -c 0` (docs/facts.md, fact 33). gdb still aborts, and
// snapctl says so.
var noCoreArgs = []string{
	"-iex", "maint set internal-error corefile no",
	"-iex", "maint set internal-warning corefile no",
	"-iex", "maint set demangler-warning corefile no",
}

// process is the gdb that Start runs.
type process struct {
	*child.Process
	stdin      *os.File // our end of gdb's stdin
	stdout     *os.File // our end of gdb's stdout
	stderr     *os.File // our end of gdb's stderr
	stderrDone chan struct{}

	tailMu sync.Mutex
	tail   []byte
	// alone is set for a gdb that starts its program: the program and
	// what it forks share gdb's process group, and only gdb is killed
	// (its program, which it traces, dies with it: PTRACE_O_EXITKILL).
	alone bool
}

// Kill sends SIGKILL to gdb's process group, or to gdb alone when it
// started its program (process.alone): the program's own children are
// not gdb's, and run on.
func (p *process) Kill() {
	if p.alone {
		p.SignalLeader(syscall.SIGKILL)
		return
	}
	p.Process.Kill()
}

// Start runs gdb as `gdb --nx --quiet --interpreter=mi3 [opt.Args]` in a
// process group of its own and waits for its first prompt. ctx bounds the
// start only, not the session: end the session with Close. If gdb cannot
// start or exits at once, Start returns an error (wrapping exec.ErrNotFound
// when gdb is missing, an *ExitError when it died) and leaves no process.
func Start(ctx context.Context, opt Options) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("starting gdb: %w", err)
	}
	path := opt.Path
	if path == "" {
		path = "gdb"
	}
	args := append([]string{"--nx", "--quiet", "--interpreter=mi3"}, noCoreArgs...)
	args = append(args, indexCacheArgs()...)
	args = append(args, opt.Args...)

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("starting gdb: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting gdb: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting gdb: %w", err)
	}

	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.Dir = opt.Dir
	cmd.Env = opt.Env
	proc, err := child.Start("gdb", cmd, child.Options{DieWithParent: opt.DieWithParent})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("starting gdb: %w", err)
	}
	if !opt.StartsProgram {
		noCoreFiles(proc.Pid())
	}
	// gdb holds its own copies now.
	inR.Close()
	outW.Close()
	errW.Close()

	c := newClient(inW, opt.Trace)
	if opt.CloseGrace > 0 {
		c.life.closeGrace = opt.CloseGrace
	}
	p := &process{
		Process:    proc,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		stderrDone: make(chan struct{}),
		alone:      opt.StartsProgram,
	}
	c.life.proc = p
	c.startReader(outR)
	c.life.wg.Add(2)
	go func() {
		defer c.life.wg.Done()
		defer close(p.stderrDone)
		p.readStderr(c.trace)
	}()
	go func() {
		defer c.life.wg.Done()
		c.wait()
	}()

	var expired <-chan time.Time
	if opt.StartTimeout > 0 {
		t := time.NewTimer(opt.StartTimeout)
		defer t.Stop()
		expired = t.C
	}
	started := time.Now()
	cpu := cpuTime(proc.Pid())
	for extended := 0; ; {
		select {
		case <-c.prompt:
		case <-c.done:
			c.Close()
			return nil, fmt.Errorf("starting gdb: %w", c.Err())
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("starting gdb: %w", ctx.Err())
		case <-expired:
			now, state := cpuTime(proc.Pid()), procState(proc.Pid())
			if (now > cpu || state == 'R') && extended < startExtensions {
				cpu = now
				extended++
				expired = time.After(opt.StartTimeout)
				continue
			}
			c.Close()
			return nil, fmt.Errorf("starting gdb: %w", &StartTimeoutError{Waited: time.Since(started), CPU: now, State: state})
		}
		break
	}
	if opt.Async {
		actx := ctx
		if opt.StartTimeout > 0 {
			var cancel context.CancelFunc
			actx, cancel = context.WithTimeout(ctx, opt.StartTimeout)
			defer cancel()
		}
		if _, err := c.Send(actx, "-gdb-set", "mi-async", "on"); err != nil {
			c.Close()
			return nil, fmt.Errorf("starting gdb: %w", err)
		}
	}
	return c, nil
}

// wait reaps gdb, kills what it left in its process group, lets the reader
// take gdb's last words and then ends the client.
func (c *Client) wait() {
	p := c.life.proc
	err := p.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		err = nil // the state says it all
	}
	// gdb and everything it started without a group of its own, such as
	// the vgdb of `target remote | vgdb`.
	p.Kill()
	p.stdout.SetReadDeadline(time.Now().Add(drainTime))
	<-c.life.readerDone
	p.stdout.Close()
	p.stderr.SetReadDeadline(time.Now().Add(drainTime))
	<-p.stderrDone
	p.stderr.Close()
	c.finish(&ExitError{Pid: p.Pid(), State: p.State(), Stderr: p.stderrTail(), Err: err})
}

// noCoreFiles sets the core size limit of process pid to 0, soft and
// hard: a process cannot raise a hard limit of 0 without CAP_SYS_RESOURCE,
// and gdb, even as root, dumps no core under one (it checks the hard
// limit before it raises the soft one). What the process starts inherits
// the limit: vgdb, and a program gdb would run. Best effort: the
// corefile settings of noCoreArgs cover gdb's internal errors without it.
func noCoreFiles(pid int) {
	var zero [2]uint64 // struct rlimit64: rlim_cur, rlim_max
	syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_CORE,
		uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
}

func (p *process) readStderr(t *tracer) {
	br := bufio.NewReader(p.stderr)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			t.line("stderr: ", chunk)
			p.tailMu.Lock()
			p.tail = append(p.tail, chunk...)
			if len(p.tail) > stderrTailSize {
				p.tail = append(p.tail[:0], p.tail[len(p.tail)-stderrTailSize:]...)
			}
			p.tailMu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

func (p *process) stderrTail() string {
	p.tailMu.Lock()
	defer p.tailMu.Unlock()
	return string(p.tail)
}

// startExtensions is how many times Start waits StartTimeout again for a
// gdb that makes progress: on a loaded machine gdb reads the program's
// symbols slowly, but reads them.
const startExtensions = 9

// StartTimeoutError says that gdb printed no prompt within its start's
// deadline and made no progress during the last of its waits.
type StartTimeoutError struct {
	Waited time.Duration
	CPU    time.Duration // gdb's CPU time when it was given up
	State  byte          // its state then (/proc/PID/stat)
}

func (e *StartTimeoutError) Error() string {
	load, _ := os.ReadFile("/proc/loadavg")
	la := strings.Fields(string(load))
	if len(la) == 0 {
		la = []string{"?"}
	}
	return fmt.Sprintf("gdb printed no prompt within %v and made no progress over its last wait (CPU time %v, state %c; load average %s on %d CPUs)",
		e.Waited.Round(time.Second), e.CPU.Round(time.Millisecond), e.State, la[0], runtime.NumCPU())
}

// cpuTime is the CPU time process pid and the children it waited for
// have used (user and system), 0 when it cannot be read.
func cpuTime(pid int) time.Duration {
	f := statFields(pid)
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// procState is process pid's state letter, '?' when unknown.
func procState(pid int) byte {
	if f := statFields(pid); len(f) > 0 && len(f[0]) > 0 {
		return f[0][0]
	}
	return '?'
}

// statFields are the fields of /proc/PID/stat after the command name,
// the state first.
func statFields(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(data[i+1:]))
}
