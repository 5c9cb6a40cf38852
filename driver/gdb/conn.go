package gdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/runjson"
)

// Conn is the run's gdb: one GDB/MI connection with a deadline on every
// command, what gdb announces between stops (the thread list, which goes
// stale when a thread starts or ends) and gdb's own scheduler-locking
// mode. The driver owns what gdb's numbers mean: Conn hands every
// notification on to the notify function it was given.
type Conn struct {
	d Debugger
	// pid is gdb's process (and group) id, 0 for a scripted debugger.
	pid int
	// timeout bounds every command (the run's CommandTimeout).
	timeout time.Duration
	notify  func(*mi.Record)
	// schedMode is gdb's own scheduler-locking mode, read at the first
	// stop that needs it.
	schedMode string
	// threads is the thread list as gdb last gave it; threadsKnown is
	// cleared when gdb announces a thread that started or ended.
	threads      []runjson.Thread
	threadsKnown bool
	// current holds each thread's details, without its frame, as
	// -thread-info TID gave them; cleared with threadsKnown.
	current map[string]runjson.Thread
	// client is the real gdb, nil for a scripted debugger; trace is its
	// MI transcript, closed with it.
	client *mi.Client
	trace  io.Closer
	// agentLoaded says that gdb has read agent.py's definitions (the early
	// gdb's check, or LoadAgent), so that they are not read again.
	agentLoaded bool
	// interrupt, when set, is how Interrupt stops the running target
	// instead of gdb's -exec-interrupt (SetInterrupt).
	interrupt func(context.Context) error
	// stretch, when set, is how Interrupt stretches its wait instead of
	// the machine's load (loadStretch, SetStretch).
	stretch func() float64
}

// NewConn is the connection to the gdb d, whose process is pid: every
// command waits at most timeout, and notify sees every async notification
// that WaitStopped, Drain or Note reads.
func NewConn(d Debugger, pid int, timeout time.Duration, notify func(*mi.Record)) *Conn {
	if notify == nil {
		notify = func(*mi.Record) {}
	}
	return &Conn{d: d, pid: pid, timeout: timeout, notify: notify, current: make(map[string]runjson.Thread)}
}

// Open is the connection to the gdb process c, whose MI transcript, if
// any, is trace (closed with gdb).
func Open(c *mi.Client, trace io.Closer, timeout time.Duration, notify func(*mi.Record)) *Conn {
	conn := NewConn(c, c.Pid(), timeout, notify)
	conn.client, conn.trace = c, trace
	return conn
}

// Close ends gdb: it asks gdb to quit, or, with kill (gdb has nothing left
// to do and the run must not wait for it), kills it and returns reap,
// which waits for its end.
func (c *Conn) Close(kill bool) (reap func()) {
	if c == nil || c.client == nil {
		return nil
	}
	closed := func() {
		if c.trace != nil {
			c.trace.Close()
		}
	}
	if kill {
		c.client.Kill()
		return func() { c.client.CloseNow(); closed() }
	}
	c.client.Close()
	closed()
	return nil
}

// ErrGone is what WaitStopped returns once gdb has exited.
var ErrGone = fmt.Errorf("gdb is gone: %w", mi.ErrExited)

// Kill sends gdb SIGKILL (mi.Client.Kill: its process group, or gdb
// alone when it started its program), never by a number gdb may have
// left to another process's group once reaped (child.Process.Signal,
// docs/facts.md, fact 158).
func (c *Conn) Kill() {
	if c != nil && c.client != nil {
		c.client.Kill()
	}
}

// Pid is gdb's process id, which is also its process group's.
func (c *Conn) Pid() int {
	if c == nil {
		return 0
	}
	return c.pid
}

// Send runs one MI command with the per-command deadline.
func (c *Conn) Send(ctx context.Context, cmd string, args ...string) (*mi.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.d.Send(ctx, cmd, args...)
}

// SendBatch sends MI commands in one write, in order, with the
// per-command deadline for the whole batch, and returns every result and
// error by position.
func (c *Conn) SendBatch(ctx context.Context, cmds []mi.Command) ([]*mi.Result, []error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.d.SendBatch(ctx, cmds)
}

// Events delivers gdb's async records; Note must see each one read.
func (c *Conn) Events() <-chan *mi.Record { return c.d.Events() }

// Done is closed when gdb has exited; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.d.Done() }

// Err says why gdb is gone, nil while it runs.
func (c *Conn) Err() error { return c.d.Err() }

// Debugger is the connection itself, for what talks to gdb without the
// deadline (a last word at teardown).
func (c *Conn) Debugger() Debugger { return c.d }

// Note keeps what gdb announces between stops: a thread that started or
// ended makes the known thread list stale. Every notification then goes
// to the notify function.
func (c *Conn) Note(rec *mi.Record) {
	if rec.Type != mi.TypeNotify {
		return
	}
	switch rec.Class {
	case "thread-created", "thread-exited":
		c.threadsKnown = false
		clear(c.current)
	}
	c.notify(rec)
}

// Running reports whether the program runs, as gdb last said once it
// has answered every command sent before (a resume given up by its
// caller before its ^running came counts): mi.Client's Running after a
// command that gdb answers in turn. False for a debugger that does not
// say (a scripted one).
func (c *Conn) Running() bool {
	r, ok := c.d.(interface{ Running() bool })
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	Send(ctx, c.d, Version())
	return r.Running()
}

// Drain notes and discards the async records gdb has printed so far:
// those delivered, and with a *mi.Client those its reader has read and
// not yet delivered (mi.Client.Queued). A command's result can be
// returned before the records gdb printed ahead of it reach Events: the
// *stopped of connecting to valgrind's gdbserver, read by the stop loop
// after Drain, was a stop the run did not expect.
func (c *Conn) Drain() {
	q, _ := c.d.(interface{ Queued() (pushed, sent uint64) })
	var want uint64
	if q != nil {
		want, _ = q.Queued()
	}
	// done: the record numbered want has been read, here or before.
	done := want == 0
	note := func(rec *mi.Record) {
		c.Note(rec)
		if rec.Seq >= want {
			done = true
		}
	}
	for {
		select {
		case rec, ok := <-c.d.Events():
			if !ok {
				return
			}
			note(rec)
			continue
		default:
		}
		if done {
			return
		}
		if _, sent := q.Queued(); sent >= want {
			// It was in the channel, which is empty: read before.
			return
		}
		select {
		case rec, ok := <-c.d.Events():
			if !ok {
				return
			}
			note(rec)
		case <-c.d.Done():
			return
		case <-time.After(drainLook):
			// The pump counts a record as sent just after the send: one
			// a reader took before Drain began may not be counted yet.
		}
	}
}

// drainLook is how often Drain looks again at the records sent, waiting
// for a record on its way to Events. The pump counts the record it sent
// (mi.Client.Queued) once the send is done; another reader (WaitStopped,
// the stop loop) may have taken it before Drain began, and no other
// record may follow: Drain once waited for ever so, gdb idle (a busy
// .ci/run, TestDescriptorMoveWhateverTheCall).
const drainLook = 5 * time.Millisecond

// WaitStopped waits for the next *stopped record, noting the records on
// the way; ErrGone once gdb has exited.
func (c *Conn) WaitStopped(ctx context.Context) (*mi.Record, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-c.d.Done():
			return nil, ErrGone
		case rec, ok := <-c.d.Events():
			if !ok {
				return nil, ErrGone
			}
			c.Note(rec)
			if rec.Type == mi.TypeExec && rec.Class == "stopped" {
				return rec, nil
			}
		}
	}
}

// interruptWait bounds Interrupt's wait for the target to stop, and
// interruptResend the wait after each interrupt before it is sent again,
// each on a quiet machine (stretched by the load).
const interruptWait, interruptResend = 3 * time.Second, 500 * time.Millisecond

// Interrupt stops a running target (best effort, bounded): used when the
// run is cancelled and when a stop's actions hang. An interrupt that
// reaches vgdb just as gdb resumes the target can be lost, so it is sent
// again until the target stops. It returns the *stopped record that
// followed, or nil: not always the interrupt's own (see OwnStop). The
// wait, 3 s in all and 500 ms between two interrupts on a quiet machine,
// is stretched by the machine's load when Interrupt is called, as every
// other wait of the product is: on a loaded machine gdb, vgdb and the
// target get a processor late, and an interrupt given up too soon leaves
// the caller with a target it takes for running.
func (c *Conn) Interrupt() *mi.Record {
	stretchOf := loadStretch
	if c.stretch != nil {
		stretchOf = c.stretch
	}
	stretch := stretchOf()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(float64(interruptWait)*stretch))
	defer cancel()
	for ctx.Err() == nil {
		if err := c.SendInterrupt(ctx); err != nil {
			return nil
		}
		wctx, wcancel := context.WithTimeout(ctx, time.Duration(float64(interruptResend)*stretch))
		rec, err := c.WaitStopped(wctx)
		wcancel()
		if err == nil {
			return rec
		}
	}
	return nil
}

// SetStretch has Interrupt stretch its wait by f() rather than by the
// machine's load: for a scripted debugger, which answers at once however
// loaded the machine is.
func (c *Conn) SetStretch(f func() float64) { c.stretch = f }

// SendInterrupt asks for the running target to stop, once, without
// waiting: gdb's -exec-interrupt, or the backend's own way (SetInterrupt).
func (c *Conn) SendInterrupt(ctx context.Context) error {
	if c.interrupt != nil {
		return c.interrupt(ctx)
	}
	_, err := Send(ctx, c.d, ExecInterrupt())
	return err
}

// SetInterrupt has Interrupt and SendInterrupt stop the target with f
// rather than gdb's -exec-interrupt: the native backend's attach, where
// gdbserver traces the process, sends the SIGINT itself (gdbserver's own
// interrupt goes to the whole process group).
func (c *Conn) SetInterrupt(f func(context.Context) error) { c.interrupt = f }

// InterruptCommand ends a gdb command that blocks gdb, as Ctrl-C would in
// a terminal: SIGINT to gdb's process group, which holds gdb and the
// shell commands it runs (vgdb runs in a session of its own). gdb answers
// the interrupted command with "Quit"; InterruptCommand waits, bounded,
// until gdb answers again.
func (c *Conn) InterruptCommand() {
	if c.pid <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		select {
		case <-c.Done():
			// Reaped: gdb's number may lead another process's
			// group by now (docs/facts.md, fact 158).
			return
		default:
		}
		syscall.Kill(-c.pid, syscall.SIGINT)
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err := Send(pctx, c.d, Version())
		pcancel()
		var me *mi.Error
		if err == nil || errors.As(err, &me) || errors.Is(err, mi.ErrExited) {
			return // gdb answers again, if only with "Quit"
		}
	}
}

// LockScheduler sets gdb's scheduler-locking to mode, for a stop whose
// actions resume the target, when it differs from gdb's; the returned
// function restores gdb's mode. mode "" leaves gdb's as it is.
// Valgrind ignores the mode (docs/facts.md, fact 1).
func (c *Conn) LockScheduler(ctx context.Context, mode string) (func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	if mode == "" {
		return noop, nil
	}
	if c.schedMode == "" {
		r, err := c.Do(ctx, Show("scheduler-locking"))
		if err != nil {
			return nil, fmt.Errorf("reading scheduler-locking: %w", err)
		}
		c.schedMode = r.String("value")
	}
	prev := c.schedMode
	if prev == mode {
		return noop, nil
	}
	if _, err := c.Do(ctx, Set("scheduler-locking", mode)); err != nil {
		return nil, fmt.Errorf("setting scheduler-locking %s: %w", mode, err)
	}
	return func(ctx context.Context) error {
		if _, err := c.Do(ctx, Set("scheduler-locking", prev)); err != nil {
			return fmt.Errorf("restoring scheduler-locking %s: %w", prev, err)
		}
		return nil
	}, nil
}

// KnownThreads returns the thread list of the stop of thread tid at frame
// without asking gdb, when it cannot have changed since gdb last listed
// it: the target had one thread, tid, and gdb has announced no thread
// since (=thread-created, =thread-exited). Its frame is then the stop's.
// It returns nil when gdb must be asked.
func (c *Conn) KnownThreads(tid string, frame runjson.Frame) []runjson.Thread {
	if !c.threadsKnown || len(c.threads) != 1 || c.threads[0].ID != tid || frame.Addr == "" {
		return nil
	}
	return c.threads
}

// SetThreads keeps every thread as -thread-info listed them.
func (c *Conn) SetThreads(threads []runjson.Thread) {
	c.threads, c.threadsKnown = threads, true
}

// Thread returns thread tid's details as -thread-info TID last gave them,
// while no thread started or ended since.
func (c *Conn) Thread(tid string) (runjson.Thread, bool) {
	t, ok := c.current[tid]
	return t, ok
}

// SetThread keeps thread tid's details t, without its frame.
func (c *Conn) SetThread(tid string, t runjson.Thread) {
	t.Frame = nil
	c.current[tid] = t
}

// LoadAgent has gdb read agent.py's definitions from dir, unless it has:
// python is false when gdb has no Python, and why is what Python said
// when it could not read them.
func (c *Conn) LoadAgent(ctx context.Context, dir string) (python bool, why string, err error) {
	if c.agentLoaded {
		return true, "", nil
	}
	r, err := c.Do(ctx, Features())
	if err != nil {
		return false, "", fmt.Errorf("asking gdb for its features: %w", err)
	}
	if !HasFeature(r, "python") {
		return false, "", nil
	}
	read, err := WriteAgent(dir)
	if err != nil {
		return true, "", fmt.Errorf("writing gdb's agent: %w", err)
	}
	r, err = c.Do(ctx, Console(PythonTry(read)))
	if err != nil {
		return true, "", fmt.Errorf("loading gdb's agent: %w", err)
	}
	if why := LoadFailure(r); why != "" {
		return true, why, nil
	}
	c.agentLoaded = true
	return true, "", nil
}

// LoadScripts has gdb read scripts, a backend's part of the agent, into
// the agent's namespace, once agent.py's definitions are read (LoadAgent):
// why is what Python said when it could not read them.
func (c *Conn) LoadScripts(ctx context.Context, dir, bundle string, scripts []Script) (why string, err error) {
	read, err := WriteScripts(dir, bundle, scripts)
	if err != nil {
		return "", fmt.Errorf("writing gdb's agent: %w", err)
	}
	r, err := c.Do(ctx, Console(PythonTry(read)))
	if err != nil {
		return "", fmt.Errorf("loading gdb's agent: %w", err)
	}
	return LoadFailure(r), nil
}

// AgentLoaded records that gdb has read agent.py's definitions already:
// the early gdb's check did.
func (c *Conn) AgentLoaded() { c.agentLoaded = true }
