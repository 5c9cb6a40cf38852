package native

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/console"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// Launch runs the program natively under gdb, or attaches gdb to a
// running process.
type Launch struct {
	plan *plan.Plan
	env  *backend.Env
	gdb  *gdb.Conn
	// pid is the target's process id once known.
	pid int
	// attach is the process snapctl attach attached to, 0 when gdb
	// started the program.
	attach int
	// attached is set once gdb is attached, until it has detached.
	attached bool
	// libDebugDirs is gdb's debug-file-directory before snapctl pointed
	// it away from the libraries' debug files (skipLibraryDebugInfo),
	// where libc's is still looked for; nil while gdb's own holds.
	libDebugDirs []string
	// patches are gdb's breakpoint addresses in the process attached to
	// and the program's bytes there; left says how snapctl left the
	// process when gdb could not detach (detach.go).
	patches []textPatch
	left    string
	// guard is gdbserver, the process's tracer under snapctl attach
	// --guard (guarded; guard.go); nil when gdb traces it itself.
	guard   *guard
	guarded bool
	// guardian outlives a killed snapctl attach and leaves the process
	// as snapctl would have (guardian.go).
	guardian *guardian
	// trap is snapctl's SIGTRAP handler in the process attached to
	// (trap.go); nil when it has none.
	trap *trapHandler
	// sites records the allocations per site (native.sites; sites.go),
	// from heaptrack's directory heaptrackDir ("" for the usual places).
	sites        *siteRecording
	heaptrackDir string
	// ended is closed once the program gdb started is a zombie or gone
	// (watchEnd), and status is how it ended: gdb, which reaps it,
	// normally reports that at once.
	ended  chan struct{}
	status int
	// target is the program's process id for watchEnd, once readPid
	// has it; reaped says that gdb reaped it without reporting its end.
	target atomic.Int64
	reaped bool
	// backend is the run's backend, which hands the heap reader to gdb's
	// agent (heapread.go); count the hits the kernel counts (counter.go).
	backend *Backend
	count   counting
	// seized is the process once snapctl traces it itself (seized.go).
	seized *seizedRun
}

// NewLauncher returns the launcher of run b, a native run, which attaches
// to process attach unless it is 0. With guard, gdbserver traces the
// process (guard.go). heaptrack is where heaptrack is installed, for
// native.sites ("" for where distributions put it).
func NewLauncher(b backend.Backend, attach int, guard bool, heaptrack string) *Launch {
	nb := b.(*Backend)
	l := &Launch{plan: nb.cfg.Plan, attach: attach, guarded: guard, heaptrackDir: heaptrack, backend: nb}
	nb.launch = l
	return l
}

func (*Launch) Local() bool                                   { return true }
func (*Launch) Command() []string                             { return nil }
func (*Launch) Signaled(time.Duration) (syscall.Signal, bool) { return 0, false }

// Processes: gdbserver, under --guard, traces the process attached to for
// gdb; gdb runs the program alone otherwise.
func (b *Launch) Processes(int) []backend.Process {
	if b.guard == nil || b.guard.server == 0 {
		return nil
	}
	return []backend.Process{{Name: "gdbserver", Pid: b.guard.server, Answers: true, Tracer: true}}
}

// Ended is closed once the program gdb started has ended (a zombie, or
// gone); nil under attach and before the start.
func (b *Launch) Ended() <-chan struct{} {
	if b.ended == nil {
		return nil
	}
	return b.ended
}

// Gone: the program ended and gdb did not say so. gdb 13 with its target
// out of non-stop mode (--sites) did not notice a program killed with
// SIGKILL just after its start, and left it a zombie (docs/facts.md,
// fact 80): the run ends as the program's death.
func (b *Launch) Gone() error {
	if sig := syscall.WaitStatus(b.status); b.status >= 0 && sig.Signaled() {
		return &backend.TargetKilledError{Signal: child.SignalName(sig.Signal()),
			Err: errors.New("gdb did not report it")}
	}
	if b.reaped && b.status < 0 {
		// gdb reaps and does not report only a program that died while
		// gdb held it stopped, which only SIGKILL ends (fact 103).
		return &backend.TargetKilledError{Signal: "SIGKILL",
			Err: errors.New("gdb did not report it, and could not resume it")}
	}
	return &backend.ToolError{Tool: "gdb", Msg: fmt.Sprintf("did not report the end of the program (process %d, wait status %#x)", b.pid, b.status)}
}

// zombieFor is how long the program gdb started may stay a zombie, not
// reaped by gdb, before the run takes it for gone: gdb reaps it at once,
// but a loaded machine may not run gdb for a while. reapedFor is how long
// it may be gone, reaped by gdb, before the run takes it for gone: gdb
// reports an end at once as it reaps it, and the stop loop gives that
// report three more seconds, and more while gdb uses CPU (stopLoop.loop,
// runnerGone).
const (
	zombieFor = 10 * time.Second
	reapedFor = time.Second
)

// watchEnd closes ended once a child of gdb's (process gdbPid: the
// program it starts, through the shell) has been a zombie for zombieFor,
// with its wait status from /proc/PID/stat (-1 when it cannot be read),
// and calls gone. It does the same once the program (target, when
// readPid has found it) is no child of gdb's any more for reapedFor while
// gdb runs on: gdb reaped it and said nothing. A program killed while gdb
// handles a stop of its own (a library loaded) leaves gdb unable to put
// its breakpoints back; gdb gives up resuming it, reaps it, and waits
// for a command with no *stopped record sent (docs/facts.md, fact
// 103). The watch ends with gdb.
func (b *Launch) watchEnd(gdbPid int, gone func()) {
	ended := make(chan struct{})
	b.ended = ended
	go func() {
		since := map[int]time.Time{}
		var missing time.Time
		status := -1 // the program's, when seen a zombie
		for {
			kids, ok := children(gdbPid)
			if !ok {
				return
			}
			target, child := int(b.target.Load()), false
			for _, pid := range kids {
				state, st := zombie(pid)
				if pid == target {
					child = true
					if state {
						status = st
					}
				}
				switch {
				case !state:
					delete(since, pid)
				case since[pid].IsZero():
					since[pid] = time.Now()
				case time.Since(since[pid]) >= zombieFor:
					b.status = st
					close(ended)
					gone()
					return
				}
			}
			switch {
			case target == 0 || child:
				missing = time.Time{}
			case missing.IsZero():
				missing = time.Now()
			case time.Since(missing) >= reapedFor:
				b.status, b.reaped = status, true
				close(ended)
				gone()
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

// children lists process pid's children, from each of its threads'
// /proc/PID/task/TID/children; ok is false once pid is gone.
func children(pid int) (pids []int, ok bool) {
	files, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(files) == 0 {
		return nil, false
	}
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(field); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids, true
}

// zombie reports whether process pid is a zombie, and then its wait
// status (-1 when it cannot be read): exit_code, stat's 52nd field.
func zombie(pid int) (bool, int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, -1
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false, -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) == 0 || f[0] != "Z" {
		return false, -1
	}
	if len(f) > 49 {
		if n, err := strconv.Atoi(f[49]); err == nil {
			return true, n
		}
	}
	return true, -1
}
func (*Launch) Killed() error     { return nil }
func (*Launch) Leftovers() string { return "" }
func (*Launch) Tool(string) bool  { return false }
func (b *Launch) Pid() int        { return b.pid }

// Lost: gdb runs the target, and says why it lost it; under --guard,
// the tracer's death is the cause, gdbserver killed by a signal told
// from one that exited (its wait status while gdb has not reaped it),
// unless the process died first: gdbserver exits as the process it
// traces ends, and gdb may see its connection close before it hears of
// the process's death. A process killed by a signal is then a
// TargetKilledError, told by its wait status while it is a zombie.
func (b *Launch) Lost(what string) error {
	what = strings.TrimSpace(what)
	if b.guard != nil && b.guard.server != 0 {
		if fate, _ := proc.Fate(b.guard.server); fate != "" {
			if z, st := zombie(b.attach); z && st >= 0 && syscall.WaitStatus(st).Signaled() {
				return &backend.TargetKilledError{Signal: child.SignalName(syscall.WaitStatus(st).Signal()),
					Err: fmt.Errorf("gdbserver %s with it", fate)}
			}
			msg := fmt.Sprintf("%s during the run, and gdb lost process %d", fate, b.attach)
			if what != "" {
				msg += fmt.Sprintf(" (gdb: %q)", what)
			}
			return &backend.ToolError{Tool: "gdbserver", Msg: msg}
		}
	}
	if what == "" {
		what = "its tracer is gone"
	}
	return &backend.ToolError{Tool: "gdb", Msg: fmt.Sprintf("lost the target: %s", what)}
}

// nativeOut and nativeErr are the FIFOs that carry the target's output
// from the process gdb starts to snapctl: gdb's own stdout is the MI
// channel.
const (
	nativeOut = "target-stdout"
	nativeErr = "target-stderr"
)

// launch starts gdb on the binary, or on nothing when it attaches, and
// loads the agent, agent.py and the native part (Python), whose
// measure_native takes the measurements.
func (b *Launch) Launch(ctx context.Context, env *backend.Env) error {
	b.env = env
	args := attachArgs
	if b.attach == 0 {
		args = []string{env.Target.Argv[0]}
	}
	var err error
	if b.gdb, err = env.Run.GDB(ctx, args, append(env.Children, env.Target.Env...)); err != nil {
		return err
	}
	// The allocator is read through the agent's measure_native, which
	// has snapctl find glibc's arenas and read the large heaps
	// (heapread.go); without the reader glibc's arenas are not found,
	// and a process of one thread has mallinfo2() called instead.
	if h, err := startHeapReader(); err == nil {
		b.backend.heap = h
	}
	switch python, why, err := env.Run.Agent(ctx); {
	case err != nil:
		return err
	case !python:
		return &backend.ToolError{Tool: "gdb", Msg: "has no Python: the native backend reads the allocator through gdb's Python; install Debian's gdb package (not gdb-minimal) or use the massif backend"}
	case why != "":
		return &backend.ToolError{Tool: "gdb", Msg: "its Python cannot load snapctl's agent, which reads the allocator: " + why}
	}
	// The agent's native part: the measurement and the native stops.
	if why, err := b.gdb.LoadScripts(ctx, env.Private, "native", Python); err != nil {
		return err
	} else if why != "" {
		return &backend.ToolError{Tool: "gdb", Msg: "its Python cannot load snapctl's agent, which reads the allocator: " + why}
	}
	if b.plan.Native.Sites {
		if b.sites, err = startSites(b.heaptrackDir, env.Private, strings.Join(env.Target.Argv, " "), b.attach != 0); err != nil {
			return fmt.Errorf("native.sites: %w", err)
		}
	}
	if b.attach != 0 {
		return b.attachTo(ctx)
	}
	return nil
}

// attachTo attaches gdb to the process snapctl attach names. gdb stops
// it; start resumes it once the breakpoints are in.
func (b *Launch) attachTo(ctx context.Context) error {
	// gdb reads the libraries as it attaches: with nothing in the run
	// reading their separate debug files, it indexes none (libc6-dbg's
	// costs each attach 0.15 to 0.2 s of processor time, while the
	// process is stopped: docs/facts.md, fact 143). The program's
	// own debug information must then be in its file, which gdb reads
	// only now.
	if backend.LibraryDebugInfoUnused(b.plan, b.env.Run.LocationsResolved) && hasDebugInfo(b.env.Target.Argv[0]) {
		if err := b.skipLibraryDebugInfo(ctx); err != nil {
			return err
		}
	}
	// gdb keeps its own way of stepping a thread over a breakpoint, out
	// of line in a copy of the instruction at the program's entry point,
	// though a thread that a killed gdb or gdbserver leaves in that copy
	// would run on into _start's code and die (docs/facts.md, fact 114):
	// the guardian's repair and snapctl's take it out (stepcopy.go).
	// Stepping in place (displaced-stepping off) holds every other thread
	// for each step, and a program whose threads take a fast signal timer
	// never let a step end: its attach hung until --timeout.
	if guarded, err := b.attachGuarded(ctx); err != nil {
		return err
	} else if !guarded {
		if _, err := b.gdb.Do(ctx, gdb.Attach(b.attach)); err != nil {
			return AttachRefused(b.attach, gdb.Message(err))
		}
	}
	b.attached = true
	b.pid = b.attach
	if err := b.startGuardian(); err != nil {
		return err
	}
	if t, err := installTrapHandler(ctx, b.gdb); err != nil {
		b.event(runjson.Event{Kind: eventUnguarded, Message: "the process has no SIGTRAP handler of snapctl's (" + err.Error() + "): if gdb or gdbserver is killed while a thread's breakpoint trap waits for it, the process dies of SIGTRAP"})
	} else {
		b.trap = t
		b.guardian.say("trap %x", t.page)
	}
	if b.sites != nil {
		if err := b.sites.inject(ctx, b.gdb); err != nil {
			return b.killedIn(err)
		}
		if err := b.sites.moveDescriptors(ctx, b.gdb, b.attach); err != nil && !errors.Is(err, heaptrack.ErrNotRecording) {
			b.event(runjson.Event{Kind: eventSitesDescriptors, Message: "heaptrack's descriptors stay where its library opened them, where a program that closes and reopens descriptors can reuse their numbers: " + err.Error()})
		}
	}
	b.guardBreakpoints(ctx) // gdb's own, such as the dynamic loader's
	return nil
}

// killedIn is err, or a TargetKilledError where the process attached to
// died of a signal meanwhile (a zombie whose wait status says so, as it
// stays until its own parent reaps it): a crash, whatever failed with it.
func (b *Launch) killedIn(err error) error {
	if z, st := zombie(b.attach); z && st >= 0 && syscall.WaitStatus(st).Signaled() {
		return &backend.TargetKilledError{Signal: child.SignalName(syscall.WaitStatus(st).Signal()), Err: err}
	}
	return err
}

// start runs the program (or resumes the one attached to). Its standard
// streams are FIFOs that snapctl copies to the target's writers; its
// stdin is /dev/null, as under valgrind.
func (b *Launch) Start(ctx context.Context) error {
	env := b.env
	if err := followParent(ctx, b.gdb); err != nil {
		return err
	}
	b.gdb.Drain()
	if b.attach != 0 {
		b.guardBreakpoints(ctx)
		if _, err := b.gdb.Do(ctx, gdb.Continue()); err != nil {
			return fmt.Errorf("resuming the process: %w", err)
		}
		return nil
	}
	// stdout and stderr bound for one place share one FIFO, so that their
	// order holds.
	outPath, errPath := filepath.Join(env.Private, nativeOut), filepath.Join(env.Private, nativeErr)
	fifos := []string{outPath, errPath}
	errRedirect := "2>" + shellQuote(errPath)
	if console.SameFile(env.Target.Stdout, env.Target.Stderr) {
		fifos, errRedirect = fifos[:1], "2>&1"
	}
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return fmt.Errorf("creating the target's output pipe: %w", err)
		}
	}
	copyFIFO(outPath, env.Target.Stdout)
	if len(fifos) == 2 {
		copyFIFO(errPath, env.Target.Stderr)
	}
	// gdb starts the program through the shell, which also opens the
	// redirections; the arguments are quoted for it.
	args := make([]string, 0, len(env.Target.Argv)+2)
	for _, a := range env.Target.Argv[1:] {
		args = append(args, shellQuote(a))
	}
	args = append(args, "</dev/null", ">"+shellQuote(outPath), errRedirect)
	if _, err := b.gdb.Do(ctx, gdb.Arguments(args...)); err != nil {
		return fmt.Errorf("setting the program's arguments: %w", err)
	}
	userPreload := ""
	if b.sites != nil {
		// gdb stops every thread before a breakpoint's stop() runs, so
		// that the agent cuts heaptrack's stream there (agent/heaptrack.py,
		// SiteCutter) without a stop reported to snapctl. The user's
		// LD_PRELOAD goes to the program alone, through the wrapper:
		// neither the shell nor env runs it.
		var wrapper string
		wrapper, userPreload = preloadWrapper(b.sites.tools, b.sites.rec.FIFO(), append(os.Environ(), env.Target.Env...))
		for _, cmd := range []string{"set exec-wrapper " + wrapper, "unset environment LD_PRELOAD",
			"maint set target-non-stop off", b.sites.agentSites()} {
			if _, err := b.gdb.Do(ctx, gdb.Console(cmd)); err != nil {
				return fmt.Errorf("setting up heaptrack: %w", err)
			}
		}
	}
	if b.attach == 0 && backend.LibraryDebugInfoUnused(b.plan, env.Run.LocationsResolved) {
		if err := b.skipLibraryDebugInfo(ctx); err != nil {
			return err
		}
	}
	// A program killed as gdb starts it may be left a zombie with gdb
	// waiting (fact 80): starting it then ends as its death.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.watchEnd(b.gdb.Pid(), cancel)
	var err error
	if b.sites != nil {
		err = b.settleAtStart(rctx, userPreload)
	} else if _, err = b.gdb.Do(rctx, gdb.Run()); err != nil {
		err = fmt.Errorf("starting the target: %w", err)
	}
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			return b.Gone()
		}
		if sig, ok := killedStarting(err); ok {
			return &backend.TargetKilledError{Signal: sig, Err: err}
		}
		// gdb may already have reaped a program killed as it inserted
		// the breakpoints, and say nothing of it until its next
		// resume: gdb still names the program's process.
		if b.pid == 0 {
			b.readPid(ctx)
		}
		if sig, ok := b.deadAtStart(); ok {
			return &backend.TargetKilledError{Signal: sig, Err: err}
		}
		return err
	}
	if b.sites == nil {
		b.readPid(ctx)
	}
	return nil
}

// deadAtStart reports whether the program gdb was starting lies dead,
// and of which signal, when gdb's error says something else: killed as
// gdb inserts the plan's breakpoints, the program fails them with "Cannot
// access memory at address ..." (natively and under --sites alike). The
// program is the one readPid found, or, before that, a child of gdb's.
func (b *Launch) deadAtStart() (signal string, ok bool) {
	pids := []int{b.pid}
	if b.pid == 0 {
		pids, _ = children(b.gdb.Pid())
	}
	wait := time.Duration(float64(exitWait) * loadStretch())
	for _, pid := range pids {
		if sig, ok := deathOf(pid, wait); ok {
			return sig, true
		}
	}
	return "", false
}

// exitWait bounds, on a quiet machine, how long deathOf waits for a
// program whose exit has begun to be a zombie.
const exitWait = 2 * time.Second

// deathOf reports whether process pid, the program gdb was starting, has
// died, and of which signal (proc.Fate). A zombie says its signal; a
// program that is gone was reaped by gdb without a word, which gdb does
// with a program killed as it starts (fact 103). gdb's error may come
// before the program is a zombie: a SIGKILL wakes it from its stop under
// gdb, gdb's next write into it fails, and the kernel still tears its
// memory down. So a program whose exit has begun is waited for, within
// wait; one whose exit has not is alive.
func deathOf(pid int, wait time.Duration) (signal string, ok bool) {
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		fate, ended := proc.Fate(pid)
		switch {
		case fate == "has exited":
			return "SIGKILL", true
		case strings.HasPrefix(fate, "was killed by "):
			return strings.TrimPrefix(fate, "was killed by "), true
		case ended || fate == "" || time.Now().After(deadline):
			return "", false
		}
	}
}

// startupSignal is gdb's error when the program it starts dies of a
// signal before gdb has it: killed in the shell gdb starts it through, or
// in --sites's wrapper.
var startupSignal = regexp.MustCompile(`During startup program terminated with signal (SIG[A-Z0-9]+)`)

// killedStarting reports whether err, gdb's answer to starting the
// program, says the program was killed as it started, and with which
// signal: gdb's "During startup program terminated with signal SIGKILL",
// or ptrace's ESRCH ("Couldn't get CS register: No such process"), the
// program gdb was starting gone.
func killedStarting(err error) (signal string, ok bool) {
	if m := startupSignal.FindStringSubmatch(err.Error()); m != nil {
		return m[1], true
	}
	if strings.Contains(err.Error(), "No such process") {
		return "SIGKILL", true
	}
	return "", false
}

// readPid reads the target's process id from gdb.
func (b *Launch) readPid(ctx context.Context) {
	if r, err := b.gdb.Do(ctx, gdb.ThreadGroups()); err == nil {
		for _, g := range r.List("groups") {
			if pid := g.String("pid"); pid != "" {
				fmt.Sscan(pid, &b.pid)
				b.target.Store(int64(b.pid))
			}
		}
	}
}

// followParent keeps gdb on the process snapctl measures across fork and
// exec. At a fork gdb stays with the parent and detaches the child, its
// breakpoints taken out of the child's copy of the code first, so the
// child runs on untouched (gdb's defaults, set again after the plan's
// init commands). An exec stops the target at a catchpoint: the image
// the breakpoints and the allocator probe refer to is gone, and the run
// ends there (the run ends at the catchpoint). The shell that gdb starts the
// program through execs it before the catchpoint counts.
func followParent(ctx context.Context, c *gdb.Conn) error {
	cmds := []mi.Command{
		gdb.Set("follow-fork-mode", "parent"),
		gdb.Set("detach-on-fork", "on"),
		gdb.Console("catch exec"),
	}
	for _, cmd := range cmds {
		if _, err := c.Do(ctx, cmd); err != nil {
			return fmt.Errorf("setting up gdb for fork and exec: %w", err)
		}
	}
	return nil
}

// copyFIFO copies what the target writes into the FIFO at path to w,
// until the target's last process closes it.
func copyFIFO(path string, w interface{ Write([]byte) (int, error) }) {
	go func() {
		f, err := os.Open(path)
		if err != nil {
			return
		}
		defer f.Close()
		buf := make([]byte, 32*1024)
		for {
			n, err := f.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '=' || r == ',' || r == ':' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// BeforeClose detaches gdb from a process it attached to: its breakpoints
// go first, and the process goes on running as before (detach.go).
// The kernel's probes go first: gdb, gdbserver or snapctl itself then
// put the program's bytes back where gdb's breakpoints were.
func (b *Launch) BeforeClose(exited bool) bool {
	if s := b.seized; s != nil {
		b.seized = nil
		return s.release() && !exited
	}
	b.closeCounter()
	return b.detach(exited)
}

// AfterClose ends heaptrack's interpreter, the program gone or detached.
func (b *Launch) AfterClose(bool) {
	if b.guardian != nil {
		// Not ended by detach: the process is left to it.
		b.guardian.end(false)
	}
	b.closeCounter()
	if b.sites != nil {
		b.sites.close()
	}
	if b.backend != nil {
		b.backend.heap.close()
		b.backend.heap = nil
		b.backend.quick.close()
	}
}

// Fate says how snapctl left the process attached to when gdb could not
// detach from it, "" when it could or did not attach.
func (b *Launch) Fate() string { return b.left }

// skipLibraryDebugInfo has gdb read no separate debug file from here on
// (agent/arena.py's skip_library_debug_info).
func (b *Launch) skipLibraryDebugInfo(ctx context.Context) error {
	b.libDebugDirs = b.debugDirs(ctx)
	nowhere := gdb.Python("skip_library_debug_info(" + gdb.PyString(filepath.Join(b.env.Private, "no-debug-files")) + ")")
	if _, err := b.gdb.Do(ctx, nowhere); err != nil {
		return fmt.Errorf("setting up gdb: %w", err)
	}
	return nil
}

// hasDebugInfo reports whether the executable at path carries its own
// DWARF, which gdb reads with no separate debug file.
func hasDebugInfo(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return f.Section(".debug_info") != nil
}
