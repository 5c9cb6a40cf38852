package backend

import (
	"context"
	"io"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/console"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// Launcher is how a backend starts the target under gdb and watches what
// runs it.
type Launcher interface {
	// Launch starts the target and gdb and connects them. The target
	// stays stopped until Start; the run inserts its breakpoints in
	// between.
	Launch(ctx context.Context, env *Env) error
	// Start sets the target going once the breakpoints are in.
	Start(ctx context.Context) error
	// Command is the command line of the tool that runs the target
	// (run.json's "valgrind"), nil when gdb runs it.
	Command() []string
	Watcher
	// BeforeClose runs at teardown before gdb is closed, exited saying
	// whether the target has ended: the native backend detaches from a
	// process it attached to, and says whether gdb or snapctl left it
	// running without breakpoints. AfterClose runs once gdb is closed.
	BeforeClose(exited bool) (detached bool)
	AfterClose(exited bool)
	// Local reports whether gdb runs the target as a process of its own
	// (ptrace, /proc), not through a remote stub such as valgrind's
	// gdbserver: then gdb may report a hit twice around a signal, the
	// target's threads are in /proc, and scheduler-locking holds.
	Local() bool
	// Fate says how snapctl left a process it attached to when gdb could
	// not detach from it, "" otherwise.
	Fate() string
}

// Counter is what a launcher offers that counts a breakpoint's hits
// without gdb stopping the program at each (the native backend: in the
// kernel; docs/design.md, "Hits counted in the kernel"). gdb's
// breakpoint takes the hits until its first stop; there, every thread
// stopped and gdb's breakpoint disabled, the run hands the counting over
// (TakeOver). From then on only a hit that the plan measures stops the
// program: the thread that hit it stops with Signal, and Stopped says
// which breakpoint and hit that was.
type Counter interface {
	// Counting says why the launcher cannot count bp's hits, "" when it
	// can. Asked once per breakpoint, before the program runs.
	Counting(bp *plan.Breakpoint) (why string)
	// TakeOver has the launcher count the hits of gdb's breakpoint
	// number from hits on (gdb's count, skip included), at addrs, the
	// addresses of its locations in the program's memory; thread lwp is
	// stopped at one of them with its hit counted. why says why it
	// cannot (gdb then keeps the breakpoint).
	TakeOver(ctx context.Context, number string, bp *plan.Breakpoint, addrs []uint64, hits, lwp int) (why string, err error)
	// Signal is the signal a measured hit stops with, "" until a
	// TakeOver.
	Signal() string
	// Stopped says which measured hit a stop of thread lwp by signal is:
	// gdb's breakpoint number and the hit (after skip), 0 for a hit that
	// was held, not measured, while another thread's measured stop was
	// on its way; ok is false for the program's own signal.
	Stopped(signal string, lwp int) (number string, hit int, ok bool)
	// Pending is a thread whose measured stop is on its way: gdb holds
	// its signal, or the thread takes it when it runs. ok is false when
	// there is none.
	Pending() (lwp int, ok bool)
	// Hits is what the launcher counted of breakpoint number, skip
	// included; problem says what kept measured hits from stopping.
	Hits(number string) (hits int, problem string, ok bool)
	// Drop stops counting breakpoint number's hits (its last was taken).
	Drop(number string)
}

// Process is one of the processes besides gdb that run the target.
type Process struct {
	Name string
	Pid  int
	// Answers says that gdb waits for its answers: busy (running, in
	// the kernel), it is what holds a stop up.
	Answers bool
	// Tracer says that it traces the target for gdb: gdb loses the
	// target when it dies.
	Tracer bool
}

// Watcher is what a launcher says of the processes that run the target.
type Watcher interface {
	// Processes are the processes besides gdb (gdbPid) that run the
	// target, in the order a stall diagnosis blames them; none when gdb
	// runs it alone.
	Processes(gdbPid int) []Process
	// Pid is the target's process id, 0 while unknown.
	Pid() int
	// Ended is closed when the process that runs the target ends; nil
	// when gdb runs it.
	Ended() <-chan struct{}
	// Signaled waits up to wait for that process to end and returns the
	// signal that killed it.
	Signaled(wait time.Duration) (syscall.Signal, bool)
	// Gone is the error when that process ended without gdb reporting
	// the target's exit.
	Gone() error
	// Killed is the error that names it when a signal killed it, else
	// nil.
	Killed() error
	// Lost is the error when gdb lost the target (what gdb said).
	Lost(what string) error
	// Leftovers says why the processes the program left running are
	// ended at the end of the run, "" for the usual reason.
	Leftovers() string
	// Tool reports whether a process named name that carries the run's
	// mark is one of the backend's own tools, which the teardown ends,
	// not one the program left running.
	Tool(name string) bool
}

// Env is what a launcher gets from the run.
type Env struct {
	Private string // the private directory, absolute, no spaces
	Target  Target
	// Children is the environment of every process the run starts, the
	// target's without the plan's target.env.
	Children []string
	Tools    Tools
	Console  Console
	Times    Times
	Run      Run
}

// Target is the program and where its output goes.
type Target struct {
	Argv           []string
	Cwd            string
	Env            []string // the plan's target.env
	Stdout, Stderr io.Writer
}

// Tools are the executables the run found, by name ("gdb", and each of
// the backend's own tools), as absolute paths.
type Tools map[string]string

// Console is the status line's terminal, which the target's output goes
// through: Tail keeps what it last showed and Drain waits for it to hold
// all the target wrote. Tail is nil without a console.
type Console struct {
	Tail  *console.Tail
	Drain func()
}

// Times are the run's deadlines: each MI command, the tool's start, a
// stop, and the grace period a child is given to exit.
type Times struct {
	Command, Ready, Stop, Grace time.Duration
}

// Run is what a launcher asks of the run.
type Run struct {
	// GDB starts gdb with args and env, or adopts the one started during
	// the checks, and returns it.
	GDB func(ctx context.Context, args, env []string) (*gdb.Conn, error)
	// Agent loads agent.py into gdb: python says gdb has Python, why
	// what keeps it from loading the agent.
	Agent func(ctx context.Context) (python bool, why string, err error)
	// Group has a child ended with the run's others on a forced kill.
	Group func(*child.Process)
	// GDBGone returns the error that says how gdb died when err says it
	// did, else nil.
	GDBGone func(err error) error
	// Explain names the cause of an error that ends the run; DiskFull
	// names a full file system as the cause of err.
	Explain  func(ctx context.Context, err error) error
	DiskFull func(err error) error
	// LocationsResolved says that every location resolved in the
	// program itself before it ran.
	LocationsResolved bool
	// Event records a run.json event.
	Event func(runjson.Event)
}

// LibraryDebugInfoUnused reports whether nothing in a run reads the
// separate debug information of the program's libraries (Debian's -dbg
// and -dbgsym packages), which gdb then need not index: with libc6-dbg,
// libc's takes gdb 0.15 to 0.3 s of processor time as libc loads, in a
// native run and under valgrind alike (docs/design.md). It
// holds when every location resolved in the program itself before it
// ran (the early gdb's check) and no stop records a backtrace or another
// thread's frame (threads: none, no around_call) or runs commands, whose
// output would lose the libraries' lines. A crash's backtrace then names
// a library's frames by their exported symbols. valgrind's own stacks
// (massif's snapshots, memcheck's records) are read by valgrind, not gdb,
// and keep their lines.
func LibraryDebugInfoUnused(p *plan.Plan, locationsResolved bool) bool {
	if !locationsResolved {
		return false
	}
	for _, bp := range p.Breakpoints {
		if bp.Pending || bp.Threads != plan.ThreadsNone || bp.AroundCall || len(bp.Commands) > 0 {
			return false
		}
	}
	return true
}

// Seizer is a launcher that can take the run's measured stops itself, as
// the process's own tracer, once gdb has set the run up and left it
// (docs/design.md, "The stop taken by snapctl"): gdb is then out of every
// stop.
type Seizer interface {
	// Seizable says why the launcher cannot take the run's stops, ""
	// when it may try.
	Seizable() string
	// Seize has gdb leave the process, with no breakpoint in it, and
	// takes it over: every thread traced, then the kernel counting each
	// of bps's hits. why says why it could not, the process left with
	// gdb as it was (the run goes on as gdb's); an error is a failure
	// after gdb left.
	Seize(ctx context.Context, bps []SeizedBreakpoint) (s Seized, why string, err error)
}

// SeizedBreakpoint is a breakpoint whose hits a Seizer counts: gdb's
// number, the plan's rule and the addresses gdb resolved it to.
type SeizedBreakpoint struct {
	Number               string
	Skip, Every, MaxHits int
	Addrs                []uint64
}

// SeizedHit is a measured hit, every thread stopped: breakpoint number's
// hit Hit (after skip), by thread Tid.
type SeizedHit struct {
	Number string
	Hit    int
	Tid    int
}

// SeizedEnd is how the process ended while seized: its exit (Code), a
// signal (Signal, gdb's name, with where it came, Frame, when a thread
// received it first), or its exec.
type SeizedEnd struct {
	Exited bool
	Code   int
	Signal string
	Frame  *runjson.Frame
	Exec   bool
}

// Seized is a process whose stops the launcher takes.
type Seized interface {
	// Loop takes the stops until the process ends (end, true), stop is
	// closed (false), or a stop fails. At each measured hit measure is
	// called with every thread stopped and a measurement of the stopped
	// process (Measure), then every thread is resumed and resumed is
	// called.
	Loop(stop <-chan struct{}, measure func(SeizedHit) error, resumed func()) (end SeizedEnd, ended bool, err error)
	// Measure is the measurement of the stopped process, as the
	// backend's SelfMeasurer gives it; nil when it cannot be taken.
	Measure() []byte
	// Drop stops counting breakpoint number's hits (its last was taken).
	Drop(number string)
}
