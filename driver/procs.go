package driver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/snapctl/snapctl/runjson"
)

// stopTimeout bounds the actions at one stop, on either path: the plan's
// stop_timeout.
func stopTimeout(p *plan.Plan) time.Duration {
	if p.StopTimeout > 0 {
		return p.StopTimeout
	}
	return plan.DefaultStopTimeout
}

// overdue reads the agent's busy file and reports the stop that has been
// under way for longer than limit, by the gdb number of its breakpoint
// and how long it has lasted. A stop is timed from the first look that
// found it, at most one poll after it began.
func (a *agent) overdue(now time.Time, limit time.Duration) (bp string, lasted time.Duration, ok bool) {
	buf := make([]byte, 64)
	n, _ := a.busy.ReadAt(buf, 0)
	mark := strings.TrimSpace(string(buf[:n]))
	if mark == "" || mark == "-" {
		a.mark = ""
		return "", 0, false
	}
	if mark != a.mark {
		a.mark, a.since = mark, now
		return "", 0, false
	}
	if lasted = now.Sub(a.since); lasted < limit {
		return "", 0, false
	}
	_, bp, _ = strings.Cut(mark, " ")
	return bp, lasted, true
}

// watch tells what went wrong when nothing says it: one of the agent's
// stops or a child that stalls past stop_timeout (limit), gdb gone, the
// target lost. Its gdb and agent are set once they run.
type watch struct {
	gdb      *gdb.Conn
	agent    *agent
	launcher backend.Launcher
	rec      *recorder
	end      *ending
	// limit is the plan's stop_timeout; grace how long a child is given
	// to exit.
	limit, grace time.Duration
	// stopped says since when each tool has been seen stopped.
	stopped map[string]time.Time
}

// describe says in a word what state a process is in.
func describe(p proc.State) string {
	switch {
	case !p.OK || p.State == 'X':
		return "gone"
	case p.State == 'Z':
		return "exited"
	case p.State == 'T':
		return "stopped"
	case p.State == 't':
		return "stopped by a tracer"
	case p.State == 'R':
		return "running"
	case p.State == 'D':
		return "in uninterruptible sleep"
	}
	return "waiting"
}

// diagnosis names the process that holds a stop up.
type diagnosis struct {
	tool   string // "gdb", "vgdb" or "valgrind"
	why    string // "is stopped (...)", "has exited", ...
	states string // the state of each of the three
	// stuck is set when the tool is stopped or gone: no interrupt gets
	// through it to the target.
	stuck bool
}

// runMarkVar names the environment variable that marks every process a
// session starts: valgrind with the target, and gdb with the vgdb it runs.
// Its value is the session's private directory. A process keeps its
// environment through fork, exec, setsid and daemon(), so the mark finds
// the session's processes that left the process groups teardown signals (a
// target that daemonized, a vgdb in a session of its own), and lets a later
// run find those of a snapctl that was killed before it could tear down.
// The target sees the variable; a program that empties its environment
// loses the mark.
const runMarkVar = "SNAPCTL_RUN"

// unmarkProgram are the arguments of a gdb that starts the native
// backend's program: the program, and so what it forks or daemonizes,
// does not carry the mark. docs/native.md promises that the program's own
// children run on after a native run, as they would without snapctl.
var unmarkProgram = []string{"-iex", "unset environment " + runMarkVar}

// runMark is the environment entry that marks the processes of the session
// whose private directory is priv.
func runMark(priv string) string { return runMarkVar + "=" + priv }

// EventLeftoversEnded is the event that names the processes snapctl
// ended at the end of a run because they carried its mark: under massif,
// what the program forked or daemonized, which runs under valgrind.
const EventLeftoversEnded runjson.EventKind = "leftovers-ended"

// swept is a process that sweep killed.
type swept struct {
	pid  int
	name string // its command name, /proc/PID/comm
}

// marked lists the processes whose environment carries mark, snapctl
// excepted. Processes whose environment cannot be read (another user's)
// are not looked at.
func marked(mark string) []int {
	want := []byte(mark)
	self := os.Getpid()
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, entry := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(entry, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// sweepMarked sends SIGKILL to every process whose environment carries mark and
// waits up to grace for them to be gone. It returns the processes it
// killed. Processes whose environment cannot be read (another user's),
// and skip, are not looked at.
func sweepMarked(mark string, grace time.Duration, skip ...int) []swept {
	var killed []swept
	for _, pid := range marked(mark) {
		if slices.Contains(skip, pid) {
			continue
		}
		name := proc.Name(pid)
		// A stopped process dies of SIGKILL too.
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, swept{pid, name})
		}
	}
	deadline := time.Now().Add(grace)
	for _, k := range killed {
		for proc.Alive(k.pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return killed
}

// privateLock names the file in a private directory that its session holds
// locked while it runs: the kernel drops the lock when the session's
// process dies, however it dies.
const privateLock = "lock"

// lockPrivateDir locks dir's lock file for the session's life and returns
// the function that releases it. The file is locked under another name and
// then renamed, so that no sweeper can open it unlocked.
func lockPrivateDir(dir string) (release func(), err error) {
	tmp := filepath.Join(dir, privateLock+".new")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	if err := os.Rename(tmp, filepath.Join(dir, privateLock)); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// sweepDeadRuns ends what a snapctl killed before its teardown left behind:
// for every private directory in tmp (the user's own, named snapctl-*)
// whose lock nobody holds, it kills the processes that carry that run's
// mark and removes the directory.
func sweepDeadRuns(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, "snapctl-*"))
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, privateLock), os.O_RDWR, 0)
		if err != nil {
			continue // not a session's private directory, or one from before locks
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue // its session is alive
		}
		sweepMarked(runMark(dir), 2*time.Second)
		os.RemoveAll(dir)
		f.Close()
	}
}

// check ends the run when one of the agent's stops has lasted
// longer than the plan's stop_timeout, or gdb, vgdb or valgrind has been
// stopped (SIGSTOP, SIGTSTP) that long. gdb resumes the target after the
// agent's stops without a word to snapctl, and a stopped process says
// nothing either: without this the loop would wait forever.
func (w *watch) check() error {
	now := time.Now()
	limit := w.limit
	if w.agent != nil {
		if bp, lasted, ok := w.agent.overdue(now, limit); ok {
			name := "number " + bp
			if st := w.rec.bps[bp]; st != nil {
				name = strconv.Quote(st.bp.Name)
			}
			return w.stalled(fmt.Sprintf("the stop at breakpoint %s has not ended after %v (stop_timeout %v)",
				name, lasted.Round(100*time.Millisecond), limit))
		}
	}
	if w.gdb.Pid() == 0 {
		return nil // a scripted gdb, in tests
	}
	if w.stopped == nil {
		w.stopped = make(map[string]time.Time)
	}
	watched := map[string]int{"gdb": w.gdb.Pid()}
	for _, p := range w.launcher.Processes(w.gdb.Pid()) {
		watched[p.Name] = p.Pid
	}
	for name, pid := range watched {
		if pid == 0 || proc.Stat(pid).State != 'T' {
			delete(w.stopped, name)
			continue
		}
		since, seen := w.stopped[name]
		if !seen {
			w.stopped[name] = now
			continue
		}
		if lasted := now.Sub(since); lasted >= limit {
			return w.stalled(fmt.Sprintf("the run has not moved for %v (stop_timeout %v)", lasted.Round(100*time.Millisecond), limit))
		}
	}
	return nil
}

// toolGone ends the run when the launcher's process that traces the
// target (gdbserver) has exited, gdb silent: the error is
// the one gdb's loss of the target makes, which the launcher words (Lost:
// which process, and how it ended).
func (w *watch) toolGone() error {
	if w.gdb.Pid() == 0 {
		return nil // a scripted gdb, in tests
	}
	for _, p := range w.launcher.Processes(w.gdb.Pid()) {
		if !p.Tracer || p.Pid == 0 {
			continue
		}
		// A process held at its exit (the guardian puts the
		// program's bytes back meanwhile) has not let go yet.
		if _, ended := proc.Fate(p.Pid); ended {
			return w.targetLost("")
		}
	}
	return nil
}

// stalled records a stop-stalled event for what, which did not end in
// time, and returns the error that ends the run: it names the process
// that holds the stop up, and says what state each process of the
// backend's is in.
func (w *watch) stalled(what string) error {
	d := w.diagnose()
	w.rec.event(runjson.Event{Kind: runjson.EventStopStalled, Message: fmt.Sprintf("%s: %s %s (%s)", what, d.tool, d.why, d.states)})
	return &ToolError{Tool: d.tool, Msg: fmt.Sprintf("%s; %s; %s", d.why, what, d.states)}
}

// diagnose names the process that holds a stop up and why, and lists the
// state of the processes the backend runs (launcher.Processes), then
// gdb'w. A process that is stopped (SIGSTOP, SIGTSTP) or gone is the
// culprit, in that order; else the one gdb waits for the answers of
// when it is busy; else gdb, which runs the stop while the others wait.
func (w *watch) diagnose() diagnosis {
	if w.gdb.Pid() == 0 {
		// A scripted gdb, in tests: no process to look at.
		return diagnosis{tool: "gdb", why: "did not answer in time", states: "gdb scripted"}
	}
	type named struct {
		name string
		ps   proc.State
	}
	var procs []named
	busy := named{}
	for _, p := range w.launcher.Processes(w.gdb.Pid()) {
		procs = append(procs, named{p.Name, proc.Stat(p.Pid)})
		if p.Answers {
			busy = procs[len(procs)-1]
		}
	}
	procs = append(procs, named{"gdb", proc.Stat(w.gdb.Pid())})
	var list []string
	for _, p := range procs {
		d := describe(p.ps)
		if p.ps.OK {
			d = fmt.Sprintf("%s %d %s", p.name, p.ps.Pid, d)
		} else {
			d = p.name + " " + d
		}
		list = append(list, d)
	}
	states := strings.Join(list, ", ")
	for _, p := range procs {
		switch {
		case !p.ps.OK || p.ps.State == 'Z' || p.ps.State == 'X':
			return diagnosis{tool: p.name, why: "has exited", states: states, stuck: true}
		case p.ps.State == 'T':
			return diagnosis{tool: p.name, why: "is stopped (it was sent SIGSTOP or SIGTSTP)", states: states, stuck: true}
		}
	}
	if busy.ps.State == 'R' || busy.ps.State == 'D' {
		return diagnosis{tool: busy.name, why: "does not answer gdb", states: states}
	}
	return diagnosis{tool: "gdb", why: "does not finish the stop", states: states}
}

func (w *watch) gdbGone() error {
	// The client's error says how gdb died once it has reaped it.
	select {
	case <-w.gdb.Done():
	case <-time.After(2 * time.Second):
	}
	msg, tail := gdbExit(w.gdb.Err())
	if w.endedWithGDB(msg, tail) {
		return w.end.err
	}
	return &ToolError{Tool: "gdb", Msg: msg, Tail: tail}
}

// endedWithGDB reports whether gdb, gone (msg, its last words tail),
// died as snapctl was ending the program it ran, which it took with it:
// the run then ends as snapctl meant it to, with an event that says what
// gdb did. gdb 13 failed so at a threaded program's end, when a thread
// starting as snapctl's SIGTERM ended the program had not stopped yet
// ("linux-nat.c:1849: internal-error: wait returned unexpected status
// 0xf", docs/facts.md, fact 153). A process attached to is not ended:
// gdb's death there is the detach's to mend.
func (w *watch) endedWithGDB(msg, tail string) bool {
	if w.end.why == "" || w.end.opts.Attach.AttachPID != 0 {
		return false
	}
	pid := w.end.pid()
	if pid == 0 {
		return false
	}
	// gdb started the program, which it traces with PTRACE_O_EXITKILL:
	// the kernel kills it as gdb exits.
	for deadline := time.Now().Add(w.grace); ; time.Sleep(10 * time.Millisecond) {
		if fate, _ := proc.Fate(pid); fate != "" {
			break
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	// gdb's internal error is in its MI stream, not in tail (stderr).
	said := fmt.Sprintf("gdb %s as snapctl ended the target, and the target ended with it", strings.TrimSuffix(msg, " during the run"))
	if words := strings.TrimSpace(gdb.LastLine(tail)); words != "" {
		said += " (gdb: " + words + ")"
	}
	w.end.event(runjson.Event{Kind: runjson.EventTargetEnded, Message: said})
	return true
}

// targetLost is the error when gdb lost the target: the run's own end
// when snapctl was ending the target, else what the backend says of it,
// a target killed by a signal (an attached process that died as its
// gdbserver ended) a crash.
func (w *watch) targetLost(what string) error {
	if w.killedAtEnd() {
		return w.end.err
	}
	err := w.launcher.Lost(what)
	var killed *backend.TargetKilledError
	if errors.As(err, &killed) {
		return killedCrash(killed)
	}
	return err
}

// explain turns an error that ends the run into one that names its cause.
func (w *watch) explain(ctx context.Context, err error) error {
	var te *ToolError
	var me *mi.Error
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &te):
		return err
	case errors.Is(err, mi.ErrExited):
		return w.gdbGone()
	case errors.As(err, &me) && gdb.LostTarget(me.Msg):
		return w.targetLost(me.Msg)
	case errors.Is(err, context.DeadlineExceeded):
		// gdb did not answer in time: say who held it up.
		return w.stalled(err.Error())
	}
	return err
}

// killedAtEnd reports whether valgrind, gone under gdb's feet, died of a
// signal that ending.end sent (SIGKILL after the grace period); the run
// then ends as snapctl meant it to.
func (w *watch) killedAtEnd() bool {
	if w.end.why == "" || w.launcher.Ended() == nil {
		return false
	}
	if sig, killed := w.launcher.Signaled(w.grace); killed {
		return w.end.bySnapctl(child.SignalName(sig))
	}
	return false
}

// gdbDied reports whether err, which a command to gdb returned, means
// that gdb itself is gone: when gdb dies while vgdb connects, vgdb dies
// with it and the failed connection is gdb's doing.
func (w *watch) gdbDied(err error) bool {
	if errors.Is(err, mi.ErrExited) {
		return true
	}
	select {
	case <-w.gdb.Done():
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// children are the processes the run starts, as the run sees them: their
// process groups, for a kill at once (Options.Kill), and the mark in
// their environment (runMark, set once the private directory is known)
// by which the sweep finds whatever left the groups.
type children struct {
	group child.Group
	// env is the environment of gdb, valgrind and the target before the
	// mark: the caller's and the options'.
	env   []string
	mark  string
	grace time.Duration
}

// childEnv is the environment of the processes the run starts, with the
// run's mark.
func (c *children) childEnv() []string {
	return append(slices.Clip(c.env), c.mark)
}

// sweep kills whatever still carries the run's mark.
func (c *children) sweep(skip ...int) {
	if c.mark != "" {
		sweepMarked(c.mark, c.grace, skip...)
	}
}

// leftovers lists the processes that carry the run's mark but are none of
// the tools (snapctl, gdb and its children, the launcher's processes): a
// target's own children, before the teardown.
func (c *children) leftovers(gdbPid int, l backend.Launcher) []swept {
	if c.mark == "" {
		return nil
	}
	tools := []int{os.Getpid(), gdbPid}
	for _, p := range l.Processes(gdbPid) {
		tools = append(tools, p.Pid)
	}
	var out []swept
	for _, pid := range marked(c.mark) {
		if slices.Contains(tools, pid) || proc.Stat(pid).PPid == gdbPid {
			continue
		}
		if name := proc.Name(pid); !l.Tool(name) {
			out = append(out, swept{pid, name})
		}
	}
	return out
}

// sweepAtEnd kills what still carries the run's mark at its end, but the
// processes in skip, and records as an event those of left (leftovers)
// that it ended, and why (the launcher's word, when it has one).
func (c *children) sweepAtEnd(left []swept, l backend.Launcher, event func(runjson.Event), skip ...int) {
	if c.mark == "" {
		return
	}
	sweepMarked(c.mark, c.grace, skip...)
	var names []string
	for _, k := range left {
		if !proc.Alive(k.pid) {
			names = append(names, fmt.Sprintf("%d (%s)", k.pid, k.name))
		}
	}
	if len(names) == 0 {
		return
	}
	why := "they outlived the run, and nothing snapctl starts may"
	if w := l.Leftovers(); w != "" {
		why = w
	}
	event(runjson.Event{Kind: EventLeftoversEnded, Message: fmt.Sprintf("snapctl ended process %s with SIGKILL at the end of the run: %s", strings.Join(names, ", "), why)})
}

// killOn kills every child when kill is closed, until the returned
// function is called.
func (c *children) killOn(kill <-chan struct{}) (stop func()) {
	if kill == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-kill:
			c.group.Kill()
			c.sweep()
		case <-done:
		}
	}()
	return func() { close(done) }
}
