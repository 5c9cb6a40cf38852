package mi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/internal/child"
)

// Client talks GDB/MI to one gdb. Its methods are safe for concurrent use.
type Client struct {
	w     io.Writer // gdb's standard input
	input io.Reader // gdb's standard output
	wmu   sync.Mutex
	trace *tracer

	mu        sync.Mutex
	nextToken uint64
	pending   map[string]*call
	order     []*call // pending calls in the order they were sent
	closing   bool
	err       error // why the client is done; nil until then

	done   chan struct{} // closed when gdb is gone
	prompt chan struct{} // closed at gdb's first "(gdb)"
	sawPr  bool

	// running is the program's state as gdb last told it: set by a
	// ^running result or a *running record, cleared by *stopped.
	running atomic.Bool

	q    eventQueue
	life lifecycle
}

// eventQueue is the client's event queue: the reader appends, the pump
// goroutine moves records to events. The reader never waits for a
// consumer.
type eventQueue struct {
	qmu     sync.Mutex
	queue   []*Record
	qEOF    bool
	qSignal chan struct{}
	events  chan *Record
	stop    chan struct{} // closed by Close: the pump gives up
	// pushed counts the records the reader has queued, sent those the
	// pump has put in events (Queued).
	pushed, sent atomic.Uint64
}

// lifecycle is how the client ends: gdb's process, the reader's end, the
// goroutines to wait for, and the grace gdb is given to quit.
type lifecycle struct {
	proc       *process // nil for NewClient
	readerDone chan struct{}
	wg         sync.WaitGroup
	closeOnce  sync.Once
	closeGrace time.Duration
}

// call is one Send waiting for its result record.
type call struct {
	token   string
	command string
	streams []Stream
	reply   chan *Record // buffered; the reader never blocks on it
	// abandoned is set when Send stopped waiting (its context ended). gdb
	// still runs the command: the call stays pending until its result
	// comes so that the stream records gdb prints for it, such as a late
	// @"error: ...", are dropped instead of being taken for the next
	// command's.
	abandoned bool
}

// NewClient returns a client that speaks MI over r (gdb's output) and w
// (gdb's input) without starting a process: tests use it to replay
// recorded transcripts, and it lets a caller run gdb its own way. The
// client is done when r reports EOF or an error. Close closes r and w when
// they implement io.Closer. trace may be nil; see Options.Trace.
func NewClient(r io.Reader, w io.Writer, trace io.Writer) *Client {
	c := newClient(w, trace)
	c.startReader(r)
	return c
}

func newClient(w io.Writer, trace io.Writer) *Client {
	c := &Client{
		w:       w,
		pending: make(map[string]*call),
		done:    make(chan struct{}),
		prompt:  make(chan struct{}),
		q: eventQueue{
			qSignal: make(chan struct{}, 1),
			events:  make(chan *Record, 64),
			stop:    make(chan struct{}),
		},
		life: lifecycle{readerDone: make(chan struct{}), closeGrace: defaultCloseGrace},
	}
	if trace != nil {
		c.trace = &tracer{w: trace}
	}
	return c
}

func (c *Client) startReader(r io.Reader) {
	c.input = r
	c.life.wg.Add(2)
	go func() {
		defer c.life.wg.Done()
		defer close(c.life.readerDone)
		err := c.readLoop(r)
		c.q.qmu.Lock()
		c.q.qEOF = true
		c.q.qmu.Unlock()
		c.signalQueue()
		if c.life.proc == nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
				err = nil
			}
			c.finish(&ExitError{Err: err})
		}
	}()
	go func() {
		defer c.life.wg.Done()
		c.pump()
	}()
}

// Events returns the channel of records that answer no command, in the
// order gdb printed them: exec (*stopped, *running), status and notify
// (=thread-created, =breakpoint-modified, ...) records, stream records
// printed while no command was pending (for example the console text that
// comes with a stop), result records whose token this client never issued
// (results of commands abandoned by their context are dropped), and
// unparsed lines (a native inferior's output). The channel is closed once gdb has gone and
// every record has been delivered, or at Close. Reading it is optional:
// records queue without bound and nothing waits for them.
func (c *Client) Events() <-chan *Record { return c.q.events }

// Done is closed when gdb has gone (exited, crashed, killed or closed).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err returns the *ExitError that ended the client once Done is closed,
// and nil before.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Pid is gdb's process id, which is also its process group id; 0 for a
// client made by NewClient.
func (c *Client) Pid() int {
	if c.life.proc == nil {
		return 0
	}
	return c.life.proc.Pid()
}

// Process is gdb's process, nil for a client made by NewClient.
func (c *Client) Process() *child.Process {
	if c.life.proc == nil {
		return nil
	}
	return c.life.proc.Process
}

// Send runs one MI command and returns its result. It writes
// TOKEN+command, then the args each preceded by one space, exactly as
// given: quote arguments that need it yourself (see Quote). It waits for
// the result record that carries the token, for ctx, or for gdb to go,
// whichever comes first.
//
// A ^error result returns an *Error. If gdb goes, Send returns an error
// wrapping an *ExitError at once. If ctx ends first Send returns ctx's
// error; gdb still runs the command, and its late result and the stream
// records printed with it are dropped.
func (c *Client) Send(ctx context.Context, command string, args ...string) (*Result, error) {
	res, errs := c.SendBatch(ctx, []Command{{Name: command, Args: args}})
	return res[0], errs[0]
}

// Command is one MI command for SendBatch: its name ("-thread-info") and
// its arguments, passed as Send passes them.
type Command struct {
	Name string
	Args []string
}

// Line is the command as written to gdb, without token.
func (c Command) Line() string {
	if len(c.Args) == 0 {
		return c.Name
	}
	return c.Name + " " + strings.Join(c.Args, " ")
}

// SendBatch sends several commands in one write, in order, and waits for
// all their results: results[i] and errs[i] answer cmds[i], as Send would.
// gdb runs them one after the other, exactly as if each were sent once the
// one before had answered, but without waiting for each answer in turn: a
// stop that reads the target, takes a snapshot and resumes it costs one
// exchange with gdb instead of one per command. A command that fails does
// not keep gdb from running the ones after it.
func (c *Client) SendBatch(ctx context.Context, cmds []Command) ([]*Result, []error) {
	results := make([]*Result, len(cmds))
	errs := make([]error, len(cmds))
	lines := make([]string, len(cmds))
	ok := true
	for i, cmd := range cmds {
		lines[i] = cmd.Line()
		if strings.ContainsAny(lines[i], "\r\n") {
			errs[i] = fmt.Errorf("mi: command %q holds a line break", lines[i])
			ok = false
		}
	}
	fail := func(err func(line string) error) ([]*Result, []error) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err(lines[i])
			}
		}
		return results, errs
	}
	if !ok {
		// Nothing is sent: a later command may depend on an earlier one.
		return fail(func(line string) error {
			return fmt.Errorf("mi: %s: not sent: another command of its batch is invalid", line)
		})
	}
	if err := ctx.Err(); err != nil {
		return fail(func(line string) error { return fmt.Errorf("mi: %s: %w", line, err) })
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return fail(func(line string) error { return fmt.Errorf("mi: %s: %w", line, err) })
	}
	calls := make([]*call, len(cmds))
	var b strings.Builder
	for i := range cmds {
		c.nextToken++
		cl := &call{
			token:   strconv.FormatUint(c.nextToken, 10),
			command: lines[i],
			reply:   make(chan *Record, 1),
		}
		c.pending[cl.token] = cl
		c.order = append(c.order, cl)
		calls[i] = cl
		b.WriteString(cl.token)
		b.WriteString(lines[i])
		b.WriteByte('\n')
	}
	c.mu.Unlock()

	if err := c.write(ctx, b.String()); err != nil {
		for _, cl := range calls {
			c.forget(cl)
		}
		if errors.Is(err, syscall.EPIPE) {
			// gdb's end of the pipe is closed: it has died, and the
			// reader is about to say how (killed by SIGKILL, say),
			// which tells the user more than a broken pipe.
			wait := time.NewTimer(goneWait)
			select {
			case <-c.done:
			case <-ctx.Done():
			case <-wait.C:
			}
			wait.Stop()
		}
		select {
		case <-c.done:
			return fail(func(line string) error { return fmt.Errorf("mi: %s: %w", line, c.Err()) })
		default:
		}
		return fail(func(line string) error { return fmt.Errorf("mi: %s: writing to gdb: %w", line, err) })
	}
	for i, cl := range calls {
		results[i], errs[i] = c.awaitCall(ctx, cl)
	}
	return results, errs
}

// awaitCall waits for the result of a sent call.
func (c *Client) awaitCall(ctx context.Context, cl *call) (*Result, error) {
	select {
	case rec := <-cl.reply:
		return cl.result(rec)
	case <-ctx.Done():
		c.abandon(cl)
		return nil, fmt.Errorf("mi: %s: %w", cl.command, ctx.Err())
	case <-c.done:
		select {
		case rec := <-cl.reply: // the answer came just before gdb went
			return cl.result(rec)
		default:
		}
		return nil, fmt.Errorf("mi: %s: %w", cl.command, c.Err())
	}
}

func (cl *call) result(rec *Record) (*Result, error) {
	if rec.Class == "error" {
		return nil, &Error{Command: cl.command, Msg: rec.String("msg"), Code: rec.String("code")}
	}
	return &Result{Class: rec.Class, Results: rec.Results, Streams: cl.streams}, nil
}

// forget drops a call that could not be written to gdb.
func (c *Client) forget(cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(cl)
}

// abandon marks a sent call whose Send gave up: its streams and its result,
// when they come, are dropped.
func (c *Client) abandon(cl *call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[cl.token] == cl {
		cl.abandoned = true
		cl.streams = nil
	}
}

// removeLocked takes cl out of the pending calls. c.mu must be held.
func (c *Client) removeLocked(cl *call) {
	delete(c.pending, cl.token)
	for i, o := range c.order {
		if o == cl {
			c.order = append(c.order[:i:i], c.order[i+1:]...)
			return
		}
	}
}

// goneWait bounds how long a command that found gdb's pipe closed waits
// for gdb's end to be collected.
const goneWait = 10 * time.Second

func (c *Client) write(ctx context.Context, s string) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.trace.line("-> ", []byte(s))
	// A pipe to gdb only blocks when gdb stops reading; bound that wait
	// by ctx's deadline when the writer supports deadlines.
	if f, ok := c.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		if d, ok := ctx.Deadline(); ok {
			if f.SetWriteDeadline(d) == nil {
				defer f.SetWriteDeadline(time.Time{})
			}
		}
	}
	_, err := io.WriteString(c.w, s)
	return err
}

// readLoop reads gdb's output line by line with no limit on line length
// until EOF or an error, which it returns.
func (c *Client) readLoop(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			long = append(long, line...)
			line = long
		}
		if len(line) > 0 {
			c.handleLine(line)
		}
		if cap(long) > 1<<20 {
			long = nil // do not pin the memory of one huge record
		} else {
			long = long[:0]
		}
		if err != nil {
			return err
		}
	}
}

func (c *Client) handleLine(line []byte) {
	c.trace.line("", line)
	line = trimEOL(line)
	rec, err := ParseRecord(line)
	if err != nil {
		c.push(&Record{Type: TypeUnparsed, Text: string(line), Err: err})
		return
	}
	switch {
	case rec.Type == TypePrompt:
		c.mu.Lock()
		if !c.sawPr {
			c.sawPr = true
			close(c.prompt)
		}
		c.mu.Unlock()
	case rec.Type == TypeResult:
		if rec.Class == "running" {
			c.running.Store(true)
		}
		c.mu.Lock()
		cl, ok := c.pending[rec.Token]
		if ok {
			c.removeLocked(cl)
			if !cl.abandoned {
				cl.reply <- rec
			}
		}
		issued := false
		if n, err := strconv.ParseUint(rec.Token, 10, 64); err == nil && n <= c.nextToken {
			issued = true
		}
		c.mu.Unlock()
		if !ok && !issued {
			c.push(rec)
		}
	case rec.Type.IsStream():
		c.mu.Lock()
		// gdb runs commands one at a time: a stream belongs to the oldest
		// call still waiting for its result.
		if len(c.order) > 0 {
			if cl := c.order[0]; !cl.abandoned {
				cl.streams = append(cl.streams, Stream{Type: rec.Type, Text: rec.Text})
			}
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.push(rec)
	default:
		if rec.Type == TypeExec {
			c.running.Store(rec.Class == "running")
		}
		c.push(rec)
	}
}

// Running reports whether the program ran when gdb last said: after a
// ^running result or a *running record and before the next *stopped.
// gdb reads no command while it says nothing, so the answer is as of
// the last line gdb wrote, which may be on its way still.
func (c *Client) Running() bool { return c.running.Load() }

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// push queues an event. It never blocks.
func (c *Client) push(r *Record) {
	c.q.qmu.Lock()
	r.Seq = c.q.pushed.Add(1)
	c.q.queue = append(c.q.queue, r)
	c.q.qmu.Unlock()
	c.signalQueue()
}

// Queued says how many records the reader has queued for Events so far
// (the last one's Seq), and how many of them the pump has put in the
// channel. A record gdb printed before a command's result is queued by
// the time the result is returned, but it may not be in Events yet: a
// reader of Events that must have every record printed so far
// (gdb.Conn.Drain) reads on until it has had the record numbered
// pushed, or sent says that record was in the channel.
func (c *Client) Queued() (pushed, sent uint64) {
	return c.q.pushed.Load(), c.q.sent.Load()
}

func (c *Client) signalQueue() {
	select {
	case c.q.qSignal <- struct{}{}:
	default:
	}
}

// pump moves queued records to the events channel, in order, until the
// reader has finished and the queue is empty, or until Close.
func (c *Client) pump() {
	defer close(c.q.events)
	for {
		c.q.qmu.Lock()
		batch, eof := c.q.queue, c.q.qEOF
		c.q.queue = nil
		c.q.qmu.Unlock()
		if len(batch) == 0 {
			if eof {
				return
			}
			select {
			case <-c.q.qSignal:
			case <-c.q.stop:
				return
			}
			continue
		}
		for _, r := range batch {
			select {
			case c.q.events <- r:
				c.q.sent.Add(1)
			case <-c.q.stop:
				return
			}
		}
	}
}

// finish records why the client ended and fails every pending Send. Only
// the first call has an effect.
func (c *Client) finish(err *ExitError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	err.Closed = c.closing
	c.err = err
	c.pending = map[string]*call{}
	c.order = nil
	close(c.done)
}

// Close ends the session: it sends -gdb-exit, waits a grace period for gdb
// to exit, then kills gdb's process group (gdb and what it started, such as
// vgdb). It returns when gdb and every goroutine of the client have ended.
// It always returns nil; Err tells how gdb ended. Calling it again does
// nothing.
//
// Close does not end the debugged program when gdb does not: a valgrind
// reached through vgdb keeps running after gdb exits, and its owner must
// end it.
func (c *Client) Close() error { return c.close(true) }

// CloseNow is Close without -gdb-exit: it kills gdb's process group at
// once. It is for a gdb with no live program left to kill or detach from,
// whose own exit then only finalizes its Python and frees its symbol
// tables: 35 ms after a native run of a program that read libc.
func (c *Client) CloseNow() error { return c.close(false) }

// Kill sends gdb's process group SIGKILL and returns at once: the kernel
// takes milliseconds to take apart a gdb that has read a program's
// symbols, which the caller can spend elsewhere before CloseNow waits.
func (c *Client) Kill() {
	if c.life.proc != nil {
		c.life.proc.Kill()
	}
}

func (c *Client) close(ask bool) error {
	c.life.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		alive := c.err == nil
		c.mu.Unlock()
		if c.life.proc != nil {
			if alive && ask {
				ctx, cancel := context.WithTimeout(context.Background(), c.life.closeGrace)
				c.Send(ctx, "-gdb-exit")
				select {
				case <-c.done:
				case <-ctx.Done():
				}
				cancel()
			}
			c.life.proc.Kill()
			<-c.done
		} else {
			if cl, ok := c.w.(io.Closer); ok {
				cl.Close()
			}
			if cl, ok := c.input.(io.Closer); ok {
				cl.Close()
			}
		}
		close(c.q.stop)
		c.life.wg.Wait()
		if c.life.proc != nil {
			c.life.proc.stdin.Close()
		}
		c.finish(&ExitError{})
	})
	return nil
}

// tracer writes every line exchanged with gdb to a writer, commands
// prefixed with "-> " and stderr with "stderr: ", so a transcript shows
// who said what.
type tracer struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *tracer) line(prefix string, b []byte) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	buf := make([]byte, 0, len(prefix)+len(b)+1)
	buf = append(buf, prefix...)
	buf = append(buf, b...)
	if len(buf) == 0 || buf[len(buf)-1] != '\n' {
		buf = append(buf, '\n')
	}
	t.w.Write(buf)
}
