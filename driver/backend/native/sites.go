package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/snapshots"
)

// siteRecording is heaptrack recording a native run's allocations
// (native.sites): its preload library in the program, loaded at the start
// (LD_PRELOAD, through gdb's exec-wrapper so that neither gdb nor the
// shell that starts the program records) or injected into the process
// attached to; snapctl reads the stream as it comes (heaptrack.Recorder),
// gdb's agent marks it at each stop, every thread stopped (agent/heaptrack.py,
// SiteCutter), and the heap at each mark becomes the stop's per-site
// snapshot, in the xtmemory format massif's snapshots have.
type siteRecording struct {
	tools  heaptrack.Tools
	layout heaptrack.Layout
	rec    *heaptrack.Recorder
	target *heaptrack.Target
	// cmd names the program in the files the run directory keeps.
	cmd string
	// injected is set once the library records in a process attached to:
	// it must be stopped before gdb detaches.
	injected bool
	// marks are the agent's marks of the stops cut, by stop: 0 for a
	// stop before the library recorded anything (the agent's marks start
	// at 1).
	marks map[int]int
	// guardian is told whether the library records (attach; guardian.go).
	guardian *guardian
}

// siteFIFO is the FIFO the library writes its stream into.
const siteFIFO = "heaptrack.fifo"

// startSites finds heaptrack (in dir, "" for where distributions put it)
// and starts reading its stream from a FIFO in private. attach says that
// the library is injected into a running process (its inject build)
// rather than preloaded.
func startSites(dir, private, cmd string, attach bool) (*siteRecording, error) {
	tools, err := heaptrack.FindTools(dir)
	if err != nil {
		return nil, err
	}
	lib := tools.Preload
	if attach {
		lib = tools.Inject
	}
	layout, err := heaptrack.ReadLayout(lib)
	if err != nil {
		return nil, err
	}
	rec, err := heaptrack.Start(tools, filepath.Join(private, siteFIFO))
	if err != nil {
		return nil, err
	}
	return &siteRecording{tools: tools, layout: layout, rec: rec, cmd: cmd,
		marks: make(map[int]int)}, nil
}

// preloadWrapper is gdb's exec-wrapper that starts the program with
// heaptrack's library (tools) preloaded, writing into fifo: env, given
// the library's variables, then execs the program. A user's LD_PRELOAD
// comes after heaptrack's: the last in env, snapctl's own environment
// followed by the plan's target.env. It returns the wrapper and the
// user's LD_PRELOAD, which gdb's environment for the program must not
// carry (the shell and env would run it) and which the program gets back
// once heaptrack has started (restorePreload).
func preloadWrapper(tools heaptrack.Tools, fifo string, env []string) (wrapper, user string) {
	vars := tools.Env(fifo)
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
			user = v
		}
	}
	if user != "" {
		vars[0] += ":" + user
	}
	w := "env"
	for _, v := range vars {
		w += " " + shellQuote(v)
	}
	return w, user
}

// inject starts the library in the process attached to, stopped by gdb,
// before any breakpoint is in: allocations from then on are recorded,
// blocks allocated before are not known.
func (s *siteRecording) inject(ctx context.Context, c *gdb.Conn) error {
	for _, cmd := range s.tools.InjectCommands(s.rec.FIFO()) {
		if err := callVoid(ctx, c, cmd); err != nil {
			return fmt.Errorf("starting heaptrack in the process: %w", err)
		}
	}
	if _, err := c.Do(ctx, gdb.Console(s.agentSites())); err != nil {
		return fmt.Errorf("starting heaptrack in the process: %s", gdb.Message(err))
	}
	s.injected = true
	s.guardian.say("recording")
	return nil
}

// stop ends the library's recording in the process attached to, which
// gdb holds stopped: the library writes out what it holds, closes its
// output and restores the allocation functions; it stays loaded, idle.
func (s *siteRecording) stop(ctx context.Context, c *gdb.Conn) error {
	if !s.injected {
		return nil
	}
	if err := callVoid(ctx, c, heaptrack.StopCommand); err != nil {
		return fmt.Errorf("stopping heaptrack in the process: %w", err)
	}
	s.injected = false
	s.guardian.say("stopped")
	return nil
}

// siteCut is what gdb's agent says of its cut of heaptrack's stream at a
// stop (agent/heaptrack.py, SiteCutter.cut), in the stop's measurement: the mark it
// wrote into the FIFO; or that the library records nothing yet; or the
// thread that holds heaptrack's lock; or why it could not cut.
type siteCut struct {
	Mark  int    `json:"sites_mark"`
	Empty bool   `json:"sites_empty"`
	Busy  *int   `json:"sites_busy"`
	Error string `json:"sites_error"`
}

// agentSites is the Python that has gdb's agent cut the stream at every
// measured stop (agent/heaptrack.py, record_sites), given the FIFO and
// the library's layout as the heaptrack package read it: the agent knows
// no offset of its own.
func (s *siteRecording) agentSites() string {
	layout, _ := json.Marshal(s.layout.Agent())
	return gdb.PythonLine(fmt.Sprintf("record_sites(%s, %s)", gdb.PyString(s.rec.FIFO()), gdb.PyString(string(layout))))
}

// mark takes the cut gdb's agent made at stop seq of process pid: every
// allocation and free before the stop, none after. A cut made in the
// breakpoint's stop() is read once the process runs on; one that found a
// thread inside the library, writing an event, comes with the process
// stopped (reported over MI): that thread is let out of it first
// (letOut), alone, and the agent cuts again. take gives the heap at the
// mark.
func (s *siteRecording) mark(ctx context.Context, c *gdb.Conn, pid, seq int, cut siteCut) error {
	s.rec.Modules().SetPid(pid)
	for tries := 0; ; tries++ {
		switch {
		case cut.Error != "":
			return errors.New(cut.Error)
		case cut.Empty:
			// The library opens its output at the program's first
			// allocation: none yet.
			s.marks[seq] = 0
			return nil
		case cut.Mark > 0:
			s.marks[seq] = cut.Mark
			return nil
		case cut.Busy == nil:
			return errors.New("gdb's agent did not cut heaptrack's stream")
		case tries == 5:
			return fmt.Errorf("thread %d is still inside heaptrack after %d tries", *cut.Busy, tries)
		}
		lock, err := s.lockAddr(pid)
		if err != nil {
			return err
		}
		if err := letOut(ctx, c, pid, *cut.Busy, lock, s.lockOwner); err != nil {
			return fmt.Errorf("a thread was stopped inside heaptrack and could not be let out: %w", err)
		}
		r, err := c.Do(ctx, gdb.Python("sites_cut()"))
		if err != nil {
			return fmt.Errorf("cutting heaptrack's stream: %s", gdb.Message(err))
		}
		cut = siteCut{}
		if err := json.Unmarshal([]byte(gdb.LastLine(r.Console())), &cut); err != nil {
			return fmt.Errorf("cutting heaptrack's stream: gdb's agent said %q", r.Console())
		}
	}
}

// lockOwner is the thread that holds heaptrack's lock in the process
// lockAddr last opened, 0 when the lock is held with no owner yet, -1
// when it is free.
func (s *siteRecording) lockOwner() (int, error) {
	_, err := s.target.Pending()
	var busy *heaptrack.BusyError
	switch {
	case errors.As(err, &busy):
		return busy.TID, nil
	case err == nil, errors.Is(err, heaptrack.ErrNotRecording):
		return -1, nil
	}
	return 0, err
}

// lockAddr is where heaptrack's lock is in process pid.
func (s *siteRecording) lockAddr(pid int) (uint64, error) {
	if s.target == nil || s.target.Pid != pid {
		if s.target != nil {
			s.target.Close()
		}
		t, err := heaptrack.OpenTarget(pid, s.layout)
		if err != nil {
			return 0, err
		}
		s.target = t
	}
	return s.target.LockAddr(), nil
}

// staged reports whether stop seq has a cut of the stream for take.
func (s *siteRecording) staged(seq int) bool {
	_, ok := s.marks[seq]
	return ok
}

// take returns the heap per site at mark seq.
func (s *siteRecording) take(ctx context.Context, seq int, idle time.Duration) (*snapshots.Snapshot, error) {
	k, ok := s.marks[seq]
	if !ok {
		return nil, fmt.Errorf("stop %d has no cut", seq)
	}
	delete(s.marks, seq)
	if k == 0 {
		return &snapshots.Snapshot{Index: seq, Kind: snapshots.TreeDetailed, Blocks: true,
			Tree: &snapshots.Node{Frame: snapshots.Frame{Function: heaptrack.RootName}}}, nil
	}
	snap, err := s.snapshot(ctx, k, idle)
	if err != nil {
		return nil, err
	}
	snap.Index = seq
	return snap, nil
}

// snapshot waits for the heap at mark k for as long as heaptrack's
// pipeline makes progress (Recorder.Progress): it fails when nothing
// moved for idle, not after a fixed time, which a loaded machine, or an
// interpreter reading a large program's debug information, outlasts;
// and after 20 times idle in all, should the mark never come.
func (s *siteRecording) snapshot(ctx context.Context, k int, idle time.Duration) (*snapshots.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*idle)
	defer cancel()
	last, since := s.rec.Progress(), time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		snap, err := s.rec.Snapshot(wctx, k)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return snap, err
		}
		if p := s.rec.Progress(); p != last {
			last, since = p, time.Now()
		} else if time.Since(since) >= idle {
			return nil, fmt.Errorf("heaptrack_interpret made no progress in %v", idle)
		}
	}
}

// close ends the interpreter and removes the FIFO.
func (s *siteRecording) close() {
	if s.target != nil {
		s.target.Close()
	}
	s.rec.Close()
}

// letOut lets the thread that holds heaptrack's lock at lock out of it,
// alone (scheduler-locking on): it ends the event it was writing, which
// it began before the stop, and goes no further. tid is the lock's owner;
// 0 when the thread is inside pthread_mutex_lock or _unlock, between the
// lock word and the owner field (fact 67). A thread inside one of those
// is run to its return (finish): out of the unlock, the lock is free;
// out of the lock, it owns it and is let out at the next try. Which of
// the threads inside them holds the word is not known (another may be
// about to take it): each is tried in turn, one that does not return
// soon waits for the lock and is stopped again, and owner (the lock's
// owner now, -1 when free) says when the holder has come out. Any other
// holder runs to its unlock of that mutex (a temporary breakpoint of its
// own on pthread_mutex_unlock), then out of it.
func letOut(ctx context.Context, c *gdb.Conn, pid, tid int, lock uint64, owner func() (int, error)) error {
	r, err := c.Do(ctx, gdb.ThreadInfo())
	if err != nil {
		return errors.New(gdb.Message(err))
	}
	all := r.List("threads")
	// The thread gdb has selected, the stop's own, is selected again once
	// the holder is out: what the stop does next (around_call's finish,
	// the plan's commands) is that thread's. Left on the holder, a
	// finish ran heaptrack's timer thread alone, for ever, while the
	// stopped thread waited at its breakpoint (docs/facts.md, fact 159).
	if current := r.String("current-thread-id"); current != "" {
		defer c.Do(ctx, gdb.SelectThread(current))
	}
	inside := mutexFrames(ctx, c, all)
	restore, err := c.LockScheduler(ctx, "on")
	if err != nil {
		return err
	}
	defer restore(ctx)
	watch := func(id string, lockWait bool) threadWatch {
		w := threadWatch{pid: pid, lockWait: lockWait}
		w.tid, _ = lwpOf(all, id)
		return w
	}
	if tid == 0 {
		for _, t := range inside {
			err := runThread(ctx, c, t.id, t.level, gdb.Finish(), watch(t.id, true))
			if err != nil && !errors.Is(err, errThreadWaits) {
				return err
			}
			if now, err := owner(); err != nil || now != 0 {
				return err
			}
		}
		return errors.New("heaptrack's lock is held and no thread inside pthread_mutex_lock or _unlock came out of it")
	}
	id, err := gdbThread(all, tid)
	if err != nil {
		return err
	}
	for _, t := range inside {
		if t.id == id {
			return runThread(ctx, c, id, t.level, gdb.Finish(), watch(id, false))
		}
	}
	if _, err := c.Do(ctx, gdb.BreakInsert("-t", "-p", id, "-c", mi.Quote(fmt.Sprintf("$rdi == %#x", lock)), "pthread_mutex_unlock")); err != nil {
		return errors.New(gdb.Message(err))
	}
	if err := runThread(ctx, c, id, "", gdb.Continue(), watch(id, false)); err != nil {
		return err
	}
	// The breakpoint may stop in a function glibc inlined into the
	// unlock: the unlock's own frame is the one to finish.
	level := ""
	if fs := mutexFrames(ctx, c, []*mi.Value{threadOf(ctx, c, id)}); len(fs) == 1 {
		level = fs[0].level
	}
	return runThread(ctx, c, id, level, gdb.Finish(), watch(id, false))
}

// How long a thread let out alone may go without progress before it is
// stopped (threadIdle), how long it may run in all (threadLimit), and how
// long a thread tried as the lock's unnamed holder may wait in the
// kernel for a lock before it counts as waiting for heaptrack's
// (lockWaits). A fixed deadline failed on a loaded machine, where a
// thread that runs a few microseconds of code can wait seconds for a
// core, and gdb for one to report its stop: progress is what the
// kernel says of the thread (threadWatch.progress).
const (
	threadIdle  = 2 * time.Second
	threadLimit = 60 * time.Second
	lockWaits   = 100 * time.Millisecond
	threadPoll  = 20 * time.Millisecond
)

// errThreadWaits says that a thread run alone did not stop in time, and
// was stopped.
var errThreadWaits = errors.New("did not stop in time")

// threadWatch is a thread that runThread lets run alone: pid and tid
// (0 when its LWP is not known: it then has threadIdle in all), and
// whether it is being tried as the unnamed holder of a lock, which it
// may be waiting for instead (lockWait).
type threadWatch struct {
	pid, tid int
	lockWait bool
}

// threadState is what the kernel says of a thread: its state letter,
// the CPU time it has used (clock ticks), and the system call it is
// blocked in (-1 when running or unknown).
type threadState struct {
	state   byte
	cpu     uint64
	syscall int
	ok      bool
}

// sysFutex is futex(2)'s number on x86-64, where a thread waiting for a
// pthread mutex sleeps.
const sysFutex = 202

func (w threadWatch) read() threadState {
	st := threadState{syscall: -1}
	if w.tid <= 0 {
		return st
	}
	dir := fmt.Sprintf("/proc/%d/task/%d/", w.pid, w.tid)
	data, err := os.ReadFile(dir + "stat")
	if err != nil {
		return st
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return st
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return st
	}
	// Fields from the state on: state ppid pgrp session tty tpgid flags
	// minflt cminflt majflt cmajflt utime stime.
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	st.state, st.cpu, st.ok = f[0][0], utime+stime, true
	if sc, err := os.ReadFile(dir + "syscall"); err == nil {
		if n, err := strconv.Atoi(strings.Fields(string(sc) + " x")[0]); err == nil {
			st.syscall = n
		}
	}
	return st
}

// runThread selects gdb's thread id and its frame at level ("" for the
// innermost) and runs it with cmd (continue, finish) until it stops. The
// wait lasts while the thread makes progress (w): it runs or waits for a
// core (R), gdb holds it in a stop it has not reported yet (t), it used
// CPU since the last look, or it is blocked in a system call other than
// futex (a write into the FIFO waits for the interpreter). A thread that makes no progress for
// threadIdle, or runs past threadLimit, is interrupted; so is one tried
// as a lock's unnamed holder (w.lockWait) that sleeps in futex for
// lockWaits: it waits for the lock rather than holds it.
func runThread(ctx context.Context, c *gdb.Conn, id, level string, cmd mi.Command, w threadWatch) error {
	if _, err := c.Do(ctx, gdb.SelectThread(id)); err != nil {
		return errors.New(gdb.Message(err))
	}
	if level != "" && level != "0" {
		if _, err := c.Do(ctx, gdb.SelectFrame(level)); err != nil {
			return errors.New(gdb.Message(err))
		}
	}
	if _, err := c.Do(ctx, cmd); err != nil {
		return errors.New(gdb.Message(err))
	}
	start := time.Now()
	last, lastProgress, futexSince := w.read(), start, time.Time{}
	for {
		wctx, cancel := context.WithTimeout(ctx, threadPoll)
		_, err := c.WaitStopped(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, gdb.ErrGone) {
			c.Interrupt()
			return fmt.Errorf("thread %s did not get out of heaptrack's lock: %w (%v)", id, errThreadWaits, err)
		}
		now := time.Now()
		st := w.read()
		switch {
		case st.ok && (st.state == 'R' || st.state == 't' || st.cpu != last.cpu):
			lastProgress, futexSince = now, time.Time{}
		case st.ok && st.syscall == sysFutex:
			if futexSince.IsZero() {
				futexSince = now
			}
		case st.ok && st.syscall >= 0:
			// Blocked in another system call: writing its event into
			// the FIFO, which heaptrack_interpret drains at its own
			// pace on a loaded machine.
			lastProgress, futexSince = now, time.Time{}
		default:
			futexSince = time.Time{}
		}
		last = st
		why := ""
		switch {
		case w.lockWait && !futexSince.IsZero() && now.Sub(futexSince) >= lockWaits:
			why = "it waits for the lock"
		case now.Sub(lastProgress) >= threadIdle:
			why = fmt.Sprintf("no progress in %v: state %c, system call %d", threadIdle, st.state, st.syscall)
		case now.Sub(start) >= threadLimit:
			why = fmt.Sprintf("still running after %v", threadLimit)
		}
		if why != "" {
			c.Interrupt()
			return fmt.Errorf("thread %s did not get out of heaptrack's lock: %w (%s)", id, errThreadWaits, why)
		}
	}
}

// lwpOf returns the LWP of gdb's thread id among threads (-thread-info's):
// "LWP N" in gdb's target id natively, "Thread P.N" through gdbserver.
func lwpOf(threads []*mi.Value, id string) (int, bool) {
	re := regexp.MustCompile(`(?:LWP |Thread \d+\.)(\d+)\b`)
	for _, t := range threads {
		if t.String("id") != id {
			continue
		}
		if m := re.FindStringSubmatch(t.String("target-id")); m != nil {
			n, err := strconv.Atoi(m[1])
			return n, err == nil
		}
	}
	return 0, false
}

// mutexFrame is a thread stopped inside glibc's pthread_mutex_lock or
// _unlock called from heaptrack's library, and the level of its frame in
// that function.
type mutexFrame struct{ id, level string }

// mutexFrames returns those of threads (-thread-info's) stopped inside
// glibc's pthread_mutex_lock or _unlock called from heaptrack's library.
// Where gdb reads libc's debug information it names the innermost frame
// after a function glibc inlined there (lll_mutex_lock_optimized), and
// finishing that frame would leave the thread inside pthread_mutex_lock:
// the level is that of the outermost frame of the mutex functions, right
// under heaptrack's. A thread waiting for the lock (futex_wait in
// __lll_lock_wait) is not one.
func mutexFrames(ctx context.Context, c *gdb.Conn, threads []*mi.Value) []mutexFrame {
	var out []mutexFrame
	for _, t := range threads {
		if t == nil || !strings.Contains(t.String("frame.func"), "mutex") {
			continue
		}
		id := t.String("id")
		f, err := c.Do(ctx, gdb.ThreadFrames(id, "0", "4"))
		if err != nil {
			continue
		}
		level := ""
		for _, fr := range f.List("stack") {
			if strings.Contains(fr.String("func"), "mutex") {
				level = fr.String("level")
				continue
			}
			if level != "" && strings.Contains(fr.String("from"), "heaptrack") {
				out = append(out, mutexFrame{id: id, level: level})
			}
			break
		}
	}
	return out
}

// threadOf is -thread-info's record of gdb's thread id, nil when gdb
// cannot say.
func threadOf(ctx context.Context, c *gdb.Conn, id string) *mi.Value {
	r, err := c.Do(ctx, gdb.ThreadInfo(id))
	if err != nil {
		return nil
	}
	if ts := r.List("threads"); len(ts) == 1 {
		return ts[0]
	}
	return nil
}

// gdbThread returns gdb's number of the thread of threads (-thread-info's)
// whose LWP is tid: "LWP N" in gdb's target id natively, "Thread P.N"
// through gdbserver.
func gdbThread(threads []*mi.Value, tid int) (string, error) {
	re := regexp.MustCompile(fmt.Sprintf(`(LWP |Thread \d+\.)%d\b`, tid))
	for _, t := range threads {
		if re.MatchString(t.String("target-id")) {
			return t.String("id"), nil
		}
	}
	return "", fmt.Errorf("gdb has no thread %d", tid)
}
