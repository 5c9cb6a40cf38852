// Package valgrind runs a program under one of valgrind's tools with
// valgrind's gdbserver, which gdb reaches through vgdb: valgrind's start
// and options, the connection, and the watch on valgrind and vgdb. The
// backends that measure under valgrind (massif, memcheck) launch through
// it and add their tool's options.
package valgrind

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/plan"
)

// Log is valgrind's log in the run directory.
const Log = "valgrind.log"

// Tools are the executables a valgrind backend runs besides gdb, which
// the run's checks find: valgrind, and vgdb, which connects gdb to it.
var Tools = []string{"valgrind", "vgdb"}

// Options are what a backend's tool adds to valgrind's launch.
type Options struct {
	// Tool is valgrind's --tool: "massif", "memcheck".
	Tool string
	// Args are the tool's options, after snapctl's own and before the
	// plan's valgrind.args.
	Args []string
	// Connected, when set, runs once gdb is connected to valgrind's
	// gdbserver, before the breakpoints go in: a tool's own settings
	// of the gdbserver.
	Connected func(ctx context.Context, c *gdb.Conn, env *backend.Env) error
}

// Launch runs the target under a valgrind tool, which gdb reaches
// through vgdb, and watches valgrind.
type Launch struct {
	plan *plan.Plan
	dir  string // the run directory
	opts Options
	env  *backend.Env
	gdb  *gdb.Conn
	// vg is valgrind; its proc is nil until it starts (or, in a run
	// driven by a script, for good: never done, pid 0).
	vg   *valgrindProc
	argv []string // valgrind's command line
	// vgdb is gdb's child, vgdb, once found.
	vgdb int
}

// NewLauncher returns the launcher of a run under valgrind's tool
// o.Tool whose run directory is dir.
func NewLauncher(p *plan.Plan, dir string, o Options) *Launch {
	return &Launch{plan: p, dir: dir, opts: o, vg: &valgrindProc{}}
}

// Watch watches p as the valgrind that runs the target: for a run driven
// by a script.
func (l *Launch) Watch(p *child.Process) { l.vg.proc = p }

func (l *Launch) Command() []string   { return l.argv }
func (*Launch) Local() bool           { return false }
func (*Launch) Fate() string          { return "" }
func (*Launch) BeforeClose(bool) bool { return false }

// AfterClose ends valgrind's process group once gdb is closed, which
// ends vgdb.
func (l *Launch) AfterClose(exited bool) {
	if l.env != nil {
		l.vg.stop(l.env.Times.Grace, exited)
	}
}

// Launch starts valgrind and connects gdb to valgrind's gdbserver through
// vgdb: the gdb started during the run's checks, which has read the
// binary by now, or else one started here, which reads it while valgrind
// gets ready.
func (l *Launch) Launch(ctx context.Context, env *backend.Env) error {
	l.env = env
	vargs := l.valgrindArgs()
	l.argv = append([]string{env.Tools["valgrind"]}, vargs...)
	vg, err := startValgrind(valgrindConfig{
		Path:       env.Tools["valgrind"],
		Args:       vargs,
		Dir:        env.Target.Cwd,
		Env:        append(env.Children, env.Target.Env...),
		Stdout:     env.Target.Stdout,
		Stderr:     env.Target.Stderr,
		Tail:       env.Console.Tail,
		Drain:      env.Console.Drain,
		Log:        filepath.Join(l.dir, Log),
		VgdbPrefix: l.vgdbPrefix(),
	})
	// The console keeps its ends of the terminals open until teardown:
	// valgrind's stderr may reach them through snapctl (startValgrind
	// keeps the tail of what valgrind says), so they must outlive
	// valgrind.
	if err != nil {
		return err
	}
	l.vg = vg
	env.Run.Group(vg.proc)
	if l.gdb, err = env.Run.GDB(ctx, []string{env.Target.Argv[0]}, env.Children); err != nil {
		return err
	}
	if err := vg.waitReady(ctx, env.Times.Ready); err != nil {
		// valgrind's gdbserver needs room in the private directory for
		// its shared memory file: without it valgrind exits.
		return env.Run.DiskFull(err)
	}
	if err := l.connectVgdb(ctx); err != nil {
		return env.Run.Explain(ctx, err)
	}
	// --vgdb-error=0 held the program at its first instruction for gdb.
	// Left at 0, the limit would also make each error a stop (memcheck's:
	// fact 106) and every fatal signal a wait for a gdb to connect, the
	// SIGTERM that ends an interrupted run's valgrind too (fact 11): 2
	// s of grace and SIGKILL at every Ctrl-C. Signals still reach gdb
	// while it is connected.
	if _, err := l.gdb.Do(ctx, gdb.Console("monitor v.set vgdb-error 999999999")); err != nil {
		return env.Run.Explain(ctx, fmt.Errorf("setting up valgrind's gdbserver: %w", err))
	}
	if l.opts.Connected != nil {
		if err := l.opts.Connected(ctx, l.gdb, env); err != nil {
			return env.Run.Explain(ctx, err)
		}
	}
	return nil
}

// Start resumes the target, which valgrind holds at its first
// instruction until gdb says so.
func (l *Launch) Start(ctx context.Context) error {
	// The stop that connecting produced is not a breakpoint's.
	l.gdb.Drain()
	if _, err := l.gdb.Do(ctx, gdb.Continue()); err != nil {
		return fmt.Errorf("starting the target: %w", err)
	}
	return nil
}

// connectVgdb attaches gdb to valgrind's gdbserver through vgdb.
func (l *Launch) connectVgdb(ctx context.Context) error {
	// gdb runs the pipe command with $SHELL -c, or /bin/sh when SHELL is
	// unset. bash execs a lone command, but Debian's /bin/sh (dash) forks
	// it and waits: vgdb would be gdb's grandchild, behind a shell that
	// neither a signal to gdb's child nor the stall watch reaches
	// (docs/facts.md, fact 30). exec makes vgdb gdb's child in every
	// shell.
	pipe := vgdbPipe(l.env.Tools["vgdb"], l.vgdbPrefix(), l.vg.Pid())
	// snapctl's own deadlines bound every exchange with vgdb, not
	// gdb's remotetimeout (gdb.RemoteTimeout).
	if _, err := l.gdb.Do(ctx, gdb.RemoteTimeout(l.env.Times.Command, l.env.Times.Stop)); err != nil {
		return fmt.Errorf("setting up gdb: %w", err)
	}
	// The program's symbols are read by now and libc is not loaded yet
	// (valgrind holds the program at its first instruction): a
	// debug-file-directory that names nothing keeps gdb from indexing
	// libc's separate debug file, where nothing in the run reads it.
	if backend.LibraryDebugInfoUnused(l.plan, l.env.Run.LocationsResolved) {
		nowhere := filepath.Join(l.env.Private, "no-debug-files")
		if _, err := l.gdb.Do(ctx, gdb.Console("set debug-file-directory "+nowhere)); err != nil {
			return fmt.Errorf("setting up gdb: %w", err)
		}
	}
	// -target-select passes its arguments to the CLI unparsed: the pipe
	// command must not be quoted.
	if _, err := l.gdb.Do(ctx, gdb.Remote(pipe)); err != nil {
		if gone := l.env.Run.GDBGone(err); gone != nil {
			if verr := l.Killed(); verr != nil {
				return verr
			}
			if lostConnecting(l.gdb, l.env.Times.Grace) {
				return &backend.ToolError{Tool: "vgdb", Msg: "the connection to valgrind was lost as gdb connected (vgdb exited or was killed), and gdb failed on it", Err: gone}
			}
			return gone
		}
		if verr := l.Killed(); verr != nil {
			return verr
		}
		// valgrind's gdbserver needs room in the private directory
		// for the FIFOs' shared memory.
		return l.env.Run.DiskFull(&backend.ToolError{Tool: "vgdb", Msg: "gdb cannot connect to valgrind", Err: err, Tail: logTail(filepath.Join(l.dir, Log), 8)})
	}
	return nil
}

// lostConnecting reports whether gdb, gone while it connected to
// valgrind's gdbserver, had said that the program it had just connected
// to was gone (=thread-group-exited): the connection dropped. gdb 13.1
// then fails an assertion ("inferior_thread: Assertion `current_thread_
// != nullptr' failed") and exits with status 1 (docs/facts.md, fact 168):
// the cause is the connection's end, vgdb's, not gdb's. gdb's records
// stay in Events after its end, for at most wait.
func lostConnecting(c *gdb.Conn, wait time.Duration) bool {
	timeout := time.After(wait)
	for {
		select {
		case rec, ok := <-c.Events():
			if !ok {
				return false
			}
			if rec.Type == mi.TypeNotify && rec.Class == "thread-group-exited" {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// vgdbPipe is the command of gdb's `target remote |` that runs vgdb at
// path for the valgrind of pid, whose FIFOs are named from prefix. vgdb
// dies with gdb (setpriv --pdeathsig, util-linux's): a vgdb started just
// as snapctl is killed, and valgrind with it, finds valgrind not yet
// reaped, opens its FIFO and waits in that open for ever, past gdb's end
// (docs/facts.md, fact 161).
func vgdbPipe(path, prefix string, pid int) string {
	if setpriv, err := exec.LookPath("setpriv"); err == nil {
		return fmt.Sprintf("| exec %s --pdeathsig KILL %s --vgdb-prefix=%s --pid=%d", setpriv, path, prefix, pid)
	}
	return fmt.Sprintf("| exec %s --vgdb-prefix=%s --pid=%d", path, prefix, pid)
}

// valgrindArgs is valgrind's command line after the executable.
func (l *Launch) valgrindArgs() []string {
	args := []string{
		"--tool=" + l.opts.Tool,
		"--vgdb=yes",
		"--vgdb-error=0",
		"--vgdb-prefix=" + l.vgdbPrefix(),
		"--log-file=" + Path(filepath.Join(l.dir, Log)),
	}
	// Without chasing, a block never crosses a call, so the pc that
	// valgrind's gdbserver reports with a signal lies in the function
	// that faulted: crash stacks start where the program died. A plan may
	// turn chasing back on in valgrind.args, which come later.
	args = append(args, "--vex-guest-chase=no")
	// Valgrind's gdbserver reports the guest registers as its JIT last
	// stored them, and by default it keeps only the stack pointer exact
	// in the program's own code: at a breakpoint in a leaf function the
	// frame pointer can still hold the caller's value. gdb then unwinds
	// one frame too far: the caller vanishes from the backtrace and
	// around_call's finish waits at the caller's caller. Keeping the
	// unwinding registers exact costs a few per cent of run time.
	args = append(args, "--px-file-backed=unwindregs-at-mem-access")
	args = append(args, l.opts.Args...)
	args = append(args, CommonArgs(l.plan)...)
	return append(args, l.env.Target.Argv...)
}

// CommonArgs are the plan's valgrind options that every tool takes:
// --fair-sched, then valgrind.args as written.
func CommonArgs(p *plan.Plan) []string {
	fair := p.Valgrind.FairSched
	if fair == "" {
		fair = plan.DefaultFairSched
	}
	return append([]string{"--fair-sched=" + fair}, p.Valgrind.Args...)
}

// Path escapes a path for the valgrind options that expand %p,
// %q{VAR} and %% in file names (--log-file, --massif-out-file): a run
// directory named "run 100% done" must reach valgrind as it is.
func Path(path string) string {
	return strings.ReplaceAll(path, "%", "%%")
}

// vgdbPrefix is valgrind's and vgdb's --vgdb-prefix: in the private
// directory, where the FIFOs vgdb and valgrind talk through are made.
func (l *Launch) vgdbPrefix() string { return filepath.Join(l.env.Private, "vgdb") }

// Processes are vgdb, gdb's child, which sits between gdb and valgrind,
// then valgrind, whose answers gdb waits for.
func (l *Launch) Processes(gdbPid int) []backend.Process {
	if l.vgdb == 0 {
		l.vgdb = gdbChild(gdbPid)
	}
	return []backend.Process{{Name: "vgdb", Pid: l.vgdb}, {Name: "valgrind", Pid: l.vg.Pid(), Answers: true}}
}

// Leftovers: what the program left running runs under valgrind.
func (l *Launch) Leftovers() string {
	return "processes the program left running run under valgrind, and nothing of valgrind's outlives a " + l.opts.Tool + " run"
}

// Tool reports whether name is vgdb, which runs in a session of its own
// and which teardown ends with gdb.
func (*Launch) Tool(name string) bool { return name == "vgdb" }

// Pid is valgrind's, which runs the program in its own process.
func (l *Launch) Pid() int { return l.vg.Pid() }

// Ended is closed once valgrind has ended.
func (l *Launch) Ended() <-chan struct{} { return l.vg.done() }

// Signaled waits up to wait for valgrind to end and returns the signal
// that killed it.
func (l *Launch) Signaled(wait time.Duration) (syscall.Signal, bool) {
	select {
	case <-l.vg.done():
	case <-time.After(wait):
		return 0, false
	}
	return child.Signaled(l.vg.state())
}

// Gone is the error when valgrind ended without gdb reporting the
// target's exit: it died under gdb's feet.
func (l *Launch) Gone() error {
	return &backend.ToolError{Tool: "valgrind", Msg: child.Describe(l.vg.state()) + " without gdb reporting the target's exit",
		Tail: logTail(filepath.Join(l.dir, Log), 8)}
}

// Killed returns the error that names valgrind when a signal killed it,
// waiting briefly for it to be reaped; else nil. A connection through
// vgdb that fails may be valgrind's death seen from gdb's side.
func (l *Launch) Killed() error {
	select {
	case <-l.vg.done():
	case <-time.After(500 * time.Millisecond):
	}
	if _, killed := child.Signaled(l.vg.state()); killed {
		return &backend.ToolError{Tool: "valgrind", Msg: child.Describe(l.vg.state()) + " during the run",
			Tail: logTail(filepath.Join(l.dir, Log), 8)}
	}
	return nil
}

// Lost names the child that took the connection down: valgrind when it
// was killed, else vgdb (valgrind still runs, or it ran the target to its
// end once vgdb was gone).
func (l *Launch) Lost(what string) error {
	if err := l.Killed(); err != nil {
		return err
	}
	what = strings.TrimSpace(what)
	if exe := l.execed(); exe != "" {
		return &backend.ToolError{Tool: "valgrind", Msg: fmt.Sprintf("the target called exec and now runs %s outside valgrind (gdb: %q): valgrind does not follow exec without --trace-children=yes; run snapctl on that program instead", exe, what)}
	}
	if l.vg.exited() {
		code := -1
		if st := l.vg.state(); st != nil && st.Exited() {
			code = st.ExitCode()
		}
		if code >= 0 {
			// Valgrind reports the target's exit to gdb; a process
			// that exited without that report was either cut off
			// from gdb or no longer valgrind.
			return &backend.ToolError{Tool: "vgdb", Msg: fmt.Sprintf("the connection to valgrind was lost (gdb: %q) and the target's process exited with status %d: vgdb exited or was killed, or the target called exec (valgrind follows exec only with --trace-children=yes)", what, code)}
		}
	}
	return &backend.ToolError{Tool: "vgdb", Msg: fmt.Sprintf("the connection to valgrind was lost (gdb: %q); vgdb exited or was killed", what)}
}

// execed returns the executable that valgrind's process runs when it is no
// longer valgrind: the target called exec, and valgrind, which follows
// exec only with --trace-children=yes, let the new program run natively.
// It returns "" while valgrind still runs, or once the process is gone.
func (l *Launch) execed() string {
	if l.vg.exited() || l.vg.Pid() == 0 {
		return ""
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", l.vg.Pid()))
	valgrind := ""
	if l.env != nil {
		valgrind = l.env.Tools["valgrind"]
	}
	if err != nil || exe == valgrind || strings.Contains(exe, "/valgrind/") || strings.HasPrefix(filepath.Base(exe), l.opts.Tool+"-") {
		return ""
	}
	return exe
}

// gdbChild returns the vgdb that gdb runs: the process named vgdb whose
// parent, or an ancestor up to three levels up, is gdb; 0 when there is
// none. snapctl execs vgdb from gdb's shell, but a shell that forks
// (docs/facts.md, fact 30) would put one in between.
func gdbChild(gdbPid int) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if proc.Name(pid) != "vgdb" {
			continue
		}
		st := proc.Stat(pid)
		for up, ppid := 0, st.PPid; st.OK && up < 3 && ppid > 1; up++ {
			if ppid == gdbPid {
				return pid
			}
			ppid = proc.Stat(ppid).PPid
		}
	}
	return 0
}
