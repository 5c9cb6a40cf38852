package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

// nativeLaunch runs the program natively under gdb, or attaches gdb to a
// running process; the native backend (driver/backend/native) measures
// it at each stop.
type nativeLaunch struct {
	// attach is the process snapctl attach attached to, 0 when gdb
	// started the program.
	attach int
	// attached is set once gdb is attached, until it has detached.
	attached bool
	// patches are gdb's breakpoint addresses in the process attached to
	// and the program's bytes there; left says how snapctl left the
	// process when gdb could not detach (detach.go).
	patches []textPatch
	left    string
}

func newNativeLaunch(p *backendPlan) launcher { return &nativeLaunch{attach: p.attach} }

func (*nativeLaunch) local() bool { return true }

// nativeOut and nativeErr are the FIFOs that carry the target's output
// from the process gdb starts to snapctl: gdb's own stdout is the MI
// channel.
const (
	nativeOut = "target-stdout"
	nativeErr = "target-stderr"
)

// launch starts gdb on the binary, or on nothing when it attaches, and
// loads agent.py, whose measure_native takes the measurements.
func (b *nativeLaunch) launch(ctx context.Context, s *session) error {
	args := attachArgs
	if b.attach == 0 {
		args = []string{s.binary}
	}
	if !s.adoptEarlyGDB() {
		if err := s.startGDB(ctx, args, append(s.childEnv(), s.plan.Target.Env...)); err != nil {
			return err
		}
	}
	// The allocator is read through the agent's measure_native.
	switch python, why, err := s.defineAgent(ctx); {
	case err != nil:
		return err
	case !python:
		return &ToolError{Tool: "gdb", Msg: "has no Python: the native backend reads the allocator through gdb's Python; install Debian's gdb package (not gdb-minimal) or use the massif backend"}
	case why != "":
		return &ToolError{Tool: "gdb", Msg: "its Python cannot load snapctl's agent, which reads the allocator: " + why}
	}
	if b.attach != 0 {
		return b.attachTo(ctx, s)
	}
	return nil
}

// libraryDebugInfoUnused reports whether nothing in a native run reads
// the separate debug information of the program's libraries (Debian's
// -dbg and -dbgsym packages), which gdb then skips (agent.py's
// skip_library_debug_info): every location resolved in the program itself
// before it ran (the early gdb's check), and no stop records a backtrace
// or another thread's frame (threads: none, no around_call) or runs
// commands, whose output would lose the libraries' lines. A crash's
// backtrace then names a library's frames by their exported symbols.
func libraryDebugInfoUnused(p *plan.Plan, early *earlyGDB) bool {
	if !early.locationsResolved() {
		return false
	}
	for _, bp := range p.Breakpoints {
		if bp.Pending || bp.Threads != plan.ThreadsNone || bp.AroundCall || len(bp.Commands) > 0 {
			return false
		}
	}
	return true
}

// attachTo attaches gdb to the process snapctl attach names. gdb stops
// it; start resumes it once the breakpoints are in.
func (b *nativeLaunch) attachTo(ctx context.Context, s *session) error {
	if _, err := s.gdb.Send(ctx, "-target-attach", fmt.Sprint(b.attach)); err != nil {
		return attachError(b.attach, gdb.Message(err))
	}
	b.attached = true
	s.targetPid = b.attach
	b.guardBreakpoints(ctx, s) // gdb's own, such as the dynamic loader's
	return nil
}

// start runs the program (or resumes the one attached to). Its standard
// streams are FIFOs that snapctl copies to the target's writers; its
// stdin is /dev/null, as under valgrind.
func (b *nativeLaunch) start(ctx context.Context, s *session) error {
	if err := followParent(ctx, s); err != nil {
		return err
	}
	s.gdb.Drain()
	if b.attach != 0 {
		b.guardBreakpoints(ctx, s)
		if _, err := s.gdb.Send(ctx, "-exec-continue"); err != nil {
			return fmt.Errorf("resuming the process: %w", err)
		}
		return nil
	}
	// stdout and stderr bound for one place share one FIFO, so that their
	// order holds.
	outPath, errPath := filepath.Join(s.priv, nativeOut), filepath.Join(s.priv, nativeErr)
	fifos := []string{outPath, errPath}
	errRedirect := "2>" + shellQuote(errPath)
	if sameFile(s.stdout, s.stderr) {
		fifos, errRedirect = fifos[:1], "2>&1"
	}
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			return fmt.Errorf("creating the target's output pipe: %w", err)
		}
	}
	s.copyFIFO(outPath, s.stdout)
	if len(fifos) == 2 {
		s.copyFIFO(errPath, s.stderr)
	}
	// gdb starts the program through the shell, which also opens the
	// redirections; the arguments are quoted for it.
	args := make([]string, 0, len(s.argv)+2)
	for _, a := range s.argv[1:] {
		args = append(args, shellQuote(a))
	}
	args = append(args, "</dev/null", ">"+shellQuote(outPath), errRedirect)
	if _, err := s.gdb.Send(ctx, "-exec-arguments", args...); err != nil {
		return fmt.Errorf("setting the program's arguments: %w", err)
	}
	if libraryDebugInfoUnused(s.plan, s.early) {
		nowhere := mi.Quote("python skip_library_debug_info(" + gdb.PyString(filepath.Join(s.priv, "no-debug-files")) + ")")
		if _, err := s.gdb.Send(ctx, "-interpreter-exec", "console", nowhere); err != nil {
			return fmt.Errorf("setting up gdb: %w", err)
		}
	}
	if _, err := s.gdb.Send(ctx, "-exec-run"); err != nil {
		return fmt.Errorf("starting the target: %w", err)
	}
	if r, err := s.gdb.Send(ctx, "-list-thread-groups"); err == nil {
		for _, g := range r.List("groups") {
			if pid := g.String("pid"); pid != "" {
				fmt.Sscan(pid, &s.targetPid)
			}
		}
	}
	return nil
}

// followParent keeps gdb on the process snapctl measures across fork and
// exec. At a fork gdb stays with the parent and detaches the child, its
// breakpoints taken out of the child's copy of the code first, so the
// child runs on untouched (gdb's defaults, set again after the plan's
// init commands). An exec stops the target at a catchpoint: the image
// the breakpoints and the allocator probe refer to is gone, and the run
// ends there (see session.execStop). The shell that gdb starts the
// program through execs it before the catchpoint counts.
func followParent(ctx context.Context, s *session) error {
	cmds := [][]string{
		{"-gdb-set", "follow-fork-mode", "parent"},
		{"-gdb-set", "detach-on-fork", "on"},
		{"-interpreter-exec", "console", mi.Quote("catch exec")},
	}
	for _, c := range cmds {
		if _, err := s.gdb.Send(ctx, c[0], c[1:]...); err != nil {
			return fmt.Errorf("setting up gdb for fork and exec: %w", err)
		}
	}
	return nil
}

// copyFIFO copies what the target writes into the FIFO at path to w,
// until the target's last process closes it.
func (s *session) copyFIFO(path string, w interface{ Write([]byte) (int, error) }) {
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

// newHitsOnly puts agent.py's $_snapctl_hit() first in the condition of
// st's GDB/MI breakpoint under the native backend, so that gdb neither
// counts nor reports a hit that a signal during the step over the
// breakpoint makes it report again (docs/design.md, fact 42).
func (s *session) newHitsOnly(ctx context.Context, st *bpState) error {
	if !s.launcher.local() {
		return nil
	}
	cond := "$_snapctl_hit()"
	if c := st.bp.GdbCondition(); c != "" {
		cond += " && (" + c + ")"
	}
	if _, err := s.gdb.Send(ctx, "-break-condition", st.number, mi.Word(cond)); err != nil {
		return fmt.Errorf("setting the condition of breakpoint %q: %w", st.bp.Name, err)
	}
	return nil
}

// beforeClose detaches gdb from a process it attached to: its breakpoints
// go first, and the process goes on running as before (detach.go).
func (b *nativeLaunch) beforeClose(s *session) { b.detach(s) }

// releaseLock goes on with an around_call whose call did not return
// within stop_timeout under scheduler-locking, and which an interrupt has
// stopped inside: it restores gdb's mode (every thread runs), records an
// event, and finishes the call's frame. It returns the stop that followed
// (the return, or whatever came first) or released false when the call's
// frame is not on the stack any more.
func (s *session) releaseLock(ctx context.Context, st *bpState, stop *runjson.Stop, hit int, restore func(context.Context) error) (released bool, rec *mi.Record, err error) {
	lctx, cancel := context.WithTimeout(ctx, s.stopTimeout())
	defer cancel()
	if err := restore(lctx); err != nil {
		return false, nil, err
	}
	r, err := s.gdb.Send(lctx, "-stack-list-frames", "--thread", stop.Thread.ID)
	if err != nil {
		return false, nil, err
	}
	level := ""
	for _, f := range r.List("stack") {
		if f.String("func") == stop.Frame.Function {
			level = f.String("level") // the outermost: the call itself
		}
	}
	s.event(runjson.Event{Kind: runjson.EventSchedulerLockReleased, Thread: stop.Thread,
		Message: fmt.Sprintf("breakpoint %q hit %d: the call did not return within %v with only its thread running; scheduler-locking released, every thread runs until it returns", st.bp.Name, hit, s.stopTimeout())})
	if level == "" {
		return false, nil, nil
	}
	if _, err := s.gdb.Send(lctx, "-exec-finish", "--thread", stop.Thread.ID, "--frame", level); err != nil {
		return false, nil, err
	}
	rec, err = s.waitStopped(lctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil, err
		}
		return true, s.gdb.Interrupt(), nil
	}
	return true, rec, nil
}

// taskSwitches returns the context switches of every thread of a native
// target by thread id (LWP), nil under massif: a thread that ran between
// two readings switched at least once.
func (s *session) taskSwitches() map[string]int64 {
	if !s.launcher.local() || s.targetPid == 0 {
		return nil
	}
	dir := fmt.Sprintf("/proc/%d/task", s.targetPid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]int64, len(ents))
	for _, e := range ents {
		st, err := procStatus(mustAtoi(e.Name()))
		if err != nil {
			continue
		}
		var v, n int64
		fmt.Sscan(st["voluntary_ctxt_switches"], &v)
		fmt.Sscan(st["nonvoluntary_ctxt_switches"], &n)
		out[e.Name()] = v + n
	}
	return out
}

// threadsRan names the threads other than self whose context switches
// changed since before (taskSwitches): they ran.
func (s *session) threadsRan(before map[string]int64, self runjson.Thread) []string {
	if before == nil {
		return nil
	}
	after := s.taskSwitches()
	lwp := ""
	if i := strings.Index(self.TargetID, "LWP "); i >= 0 {
		lwp = strings.TrimSuffix(self.TargetID[i+4:], ")")
	}
	var ran []string
	for tid, n := range after {
		if tid == lwp {
			continue
		}
		if m, ok := before[tid]; !ok || m != n {
			ran = append(ran, "LWP "+tid+": ran (context switches)")
		}
	}
	sort.Strings(ran)
	return ran
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
