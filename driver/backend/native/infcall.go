package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/proc"
)

// Calls of gdb's into the process attached to or started (heaptrack's
// inject and stop, the SIGTRAP handler's mmap and sigaction, the moves of
// heaptrack's descriptors). gdb runs such a call with every thread
// resumed, and gives it up when another thread stops meanwhile (a signal
// gdb stops at: the SIGINT of an interrupt of snapctl's that a breakpoint's
// stop overtook, which gdb holds until the next resume; the program's own
// SIGUSR1 or SIGPIPE) or the calling thread takes a signal: the command
// fails, and the calling thread stays inside the function, gdb's dummy
// frame under it, whose return address is on the thread's stack. Once
// gdb detaches or dies, the function returns there and the process dies
// of SIGSEGV (docs/facts.md, fact 137). So a call that gdb abandoned is
// run to its end before anything else: the process is continued (each
// signal as gdb's handle table says: snapctl's SIGINT is not passed on)
// until the function has returned into the dummy frame, which gdb then
// pops, putting the thread back as it was before the call.
//
// A function that does not return within its patience (callPatience) is
// not left running: the process is interrupted and the frames of the call,
// gdb's dummy frame with them, are popped (gdb's `return` from the frame
// right above the dummy one), which puts back every register gdb saved
// before the call. The thread is where it was, and what the function did
// until then stays done: a lock it took stays taken (docs/facts.md, fact
// 139).

// errCallAbandoned says that gdb gave up a call it made into the process,
// which then ran to its end: what it did was done, but its result is not
// known.
var errCallAbandoned = errors.New("gdb gave up the call, which then ran to its end")

// errCallUnwound says that a call gdb gave up did not return within its
// patience and was taken back: its thread is where it was before the
// call, and the function did not finish.
var errCallUnwound = errors.New("gdb gave up the call, which did not return in time: its thread was put back where it was before the call")

// errProcessEnded says that the process ended while a call gdb gave up
// was being run to its end: it died of a signal (its own, or a fault in
// the function) or exited.
var errProcessEnded = errors.New("the process ended")

// endedError is errProcessEnded with how, from gdb's *stopped record of
// the end: "was killed by SIGSEGV", "exited with status 1".
func endedError(rec *mi.Record) error {
	switch rec.String("reason") {
	case "exited-signalled":
		return fmt.Errorf("%w: it was killed by %s", errProcessEnded, rec.String("signal-name"))
	case "exited":
		code, _ := strconv.ParseInt(rec.String("exit-code"), 8, 32) // gdb prints it in octal
		return fmt.Errorf("%w: it exited with status %d", errProcessEnded, code)
	}
	return fmt.Errorf("%w: it exited with status 0", errProcessEnded)
}

// ended reports whether gdb's *stopped record rec is the process's end.
func ended(rec *mi.Record) bool {
	return strings.HasPrefix(rec.String("reason"), "exited")
}

// callPatience is how long a call that gdb abandoned is given to return,
// from the abandonment or the end of the caller's deadline: it is not
// cut short when the caller's time is up. The wait lasts while the
// calling thread makes progress (it runs, waits for a core, or uses CPU
// time) and ends once it has made none for Idle, or after Limit in all,
// each stretched by the machine's load (loadStretch): on a loaded
// machine a thread that runs a few microseconds of code can wait seconds
// for a core. withCallPatience sets another for the calls made with a
// context.
var callPatience = patience{Idle: 10 * time.Second, Limit: time.Minute}

type patienceKey struct{}

// withCallPatience gives the calls of gdbCall made with ctx the patience
// p rather than callPatience.
func withCallPatience(ctx context.Context, p patience) context.Context {
	return context.WithValue(ctx, patienceKey{}, p)
}

// callPatienceOf is the patience of the calls made with ctx.
func callPatienceOf(ctx context.Context) patience {
	if p, ok := ctx.Value(patienceKey{}).(patience); ok {
		return p
	}
	return callPatience
}

// patience bounds a wait for a thread: no progress for Idle, or Limit in
// all, each on a quiet machine.
type patience struct {
	Idle, Limit time.Duration
}

// maxStretch bounds loadStretch, as 20 times a quiet machine's wait.
const maxStretch = 20

// loadStretch is how many times longer than on a quiet machine a wait of
// the product may take now: the load average of the last minute per
// processor, from 1 to maxStretch.
func loadStretch() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 1
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 1
	}
	return min(max(1, load/float64(max(runtime.NumCPU(), 1))), maxStretch)
}

// progressWatch follows one thread's progress against a patience.
type progressWatch struct {
	w                   threadWatch
	process             int // the thread's process, 0 when unknown
	p                   patience
	start, lastProgress time.Time
	last                threadState
}

// watchProgress starts following thread tid of process pid (pid may be
// tid itself: /proc has every thread at its own number).
func watchProgress(pid, tid int, p patience) *progressWatch {
	w := threadWatch{pid: pid, tid: tid}
	now := time.Now()
	pw := &progressWatch{w: w, p: p, start: now, lastProgress: now, last: w.read()}
	if st, err := proc.Status(tid); err == nil {
		pw.process, _ = strconv.Atoi(st["Tgid"])
	}
	return pw
}

// ended is errProcessEnded saying how the thread's process ended ("was
// killed by SIGSEGV"), nil while it runs or when its process is not
// known. A process that died in a call of gdb's is not always reported
// by gdb: through gdbserver, the death of a process another process is
// the parent of was never reported while gdb ran it on.
func (pw *progressWatch) ended() error {
	if pw.process == 0 {
		return nil
	}
	if fate := endOf(pw.process); fate != "" {
		return fmt.Errorf("%w: it %s", errProcessEnded, fate)
	}
	return nil
}

// over looks at the thread once more and says why its patience is spent,
// "" while it is not: a thread that runs, waits for a core, sits in a
// stop its tracer has not reported (t) or used CPU time since the last
// look makes progress.
func (pw *progressWatch) over() string {
	now := time.Now()
	st := pw.w.read()
	if st.ok && (st.state == 'R' || st.state == 't' || st.cpu != pw.last.cpu) {
		pw.lastProgress = now
	}
	if st.ok {
		pw.last = st
	}
	stretch := loadStretch()
	idle := time.Duration(float64(pw.p.Idle) * stretch)
	limit := time.Duration(float64(pw.p.Limit) * stretch)
	switch {
	case now.Sub(pw.lastProgress) >= idle:
		return fmt.Sprintf("no progress in %v (state %c, system call %d)", idle.Round(time.Millisecond), st.state, st.syscall)
	case now.Sub(pw.start) >= limit:
		return fmt.Sprintf("still running after %v", limit.Round(time.Millisecond))
	}
	return ""
}

// gdbCall sends cmd, a gdb command that calls a function in the stopped
// process (call, print or -data-evaluate-expression of a call), and
// leaves no thread inside the function however gdb answers: a call gdb
// abandoned is run to its end (finishCalls), and the error then wraps
// errCallAbandoned with gdb's message; one that does not end within its
// patience is taken back, and the error wraps errCallUnwound. No
// breakpoint of the plan may be enabled: the process runs meanwhile.
//
// A command whose arguments hold a string has gdb call malloc first, for
// the string's room in the process; a signal during that call abandons
// it, malloc runs to its end, and the command's own function is never
// called (docs/facts.md, fact 145). Such a command is sent again, up
// to allocTries times in all: the function did not run, so it runs once.
// callVoid makes no such command: it puts a line's strings into the
// process first, as a malloc gdb gives up inside another call's setup
// moves registers between threads (placeStrings, fact 147).
func gdbCall(ctx context.Context, c *gdb.Conn, cmd mi.Command) (*mi.Result, error) {
	for tries := 1; ; tries++ {
		r, err := gdbCallOnce(ctx, c, cmd)
		if err == nil || !errors.Is(err, errCallAbandoned) || !abandonedAllocation(err.Error(), cmd) {
			return r, err
		}
		if tries == allocTries || ctx.Err() != nil {
			// Not errCallAbandoned: the function was not called.
			return nil, fmt.Errorf("%s (%d times): the function was not called", strings.TrimSuffix(err.Error(), ": "+errCallAbandoned.Error()), tries)
		}
	}
}

// allocTries bounds the sendings of a command whose string's allocation a
// signal abandoned each time (gdbCall): a program that takes a signal
// every 10 ms had one call's allocation in 2 to 20 abandoned.
const allocTries = 20

// abandonedRe finds the function gdb names in its message for a call it
// gave up: "Evaluation of the expression containing the function\n(NAME)
// will be abandoned."
var abandonedRe = regexp.MustCompile(`containing the function\s*\(([^)]*)\)\s*will be abandoned`)

// mallocCallRe finds a call of malloc in a command.
var mallocCallRe = regexp.MustCompile(`\bmalloc\s*\(`)

// abandonedAllocation reports whether gdb's message msg says that the call
// it gave up was malloc's, which gdb makes to put cmd's strings into the
// process, when cmd itself calls no malloc: then cmd's function was never
// called. libc's malloc is named so, or by its inner names
// (__GI___libc_malloc with libc's debug information).
func abandonedAllocation(msg string, cmd mi.Command) bool {
	m := abandonedRe.FindStringSubmatch(msg)
	if m == nil || !strings.HasSuffix(m[1], "malloc") {
		return false
	}
	return !mallocCallRe.MatchString(strings.Join(append([]string{cmd.Name}, cmd.Args...), " "))
}

// gdbCallOnce is one sending of gdbCall's command.
func gdbCallOnce(ctx context.Context, c *gdb.Conn, cmd mi.Command) (*mi.Result, error) {
	r, err := c.Do(ctx, cmd)
	if err == nil {
		return r, nil
	}
	select {
	case <-c.Done():
		return nil, err
	default:
	}
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		// gdb may still be waiting for the function, and answers no
		// command meanwhile: it stops the process as a Ctrl-C would,
		// which ends the call as a signal does.
		c.InterruptCommand()
	}
	left, ferr := finishCalls(context.WithoutCancel(ctx), c, callPatienceOf(ctx))
	switch {
	case errors.Is(ferr, errCallUnwound), errors.Is(ferr, errProcessEnded):
		return nil, fmt.Errorf("%s: %w", gdb.Message(err), ferr)
	case ferr != nil:
		return nil, fmt.Errorf("%s; a thread is still inside the function gdb called, and the process dies of SIGSEGV when it returns without gdb: %w", gdb.Message(err), ferr)
	case left:
		return nil, fmt.Errorf("%s: %w", gdb.Message(err), errCallAbandoned)
	}
	return nil, err
}

// callPoll is how often finishCalls looks at the calling thread while
// the process runs.
const callPoll = 50 * time.Millisecond

// finishCalls runs the process on until no call of gdb's is left in it
// (dummyFrames), and reports whether there was one. A call whose thread
// spends its patience p (progressWatch) is taken back (unwindCalls): the
// error then wraps errCallUnwound. The patience is looked at while the
// process runs and at each of its stops: a program whose signals stop it
// every few milliseconds (gdb stops at each and passes it on) never ran
// a whole poll without one, and a call that did not return was run on
// for good. Where gdb cannot list its calls at all, nothing is done.
func finishCalls(ctx context.Context, c *gdb.Conn, p patience) (bool, error) {
	var watch *progressWatch
	for round := 0; ; round++ {
		lwps, err := dummyFrames(ctx, c)
		if err != nil {
			if round == 0 {
				return false, nil
			}
			return true, err
		}
		if len(lwps) == 0 {
			return round > 0, nil
		}
		if watch == nil {
			watch = watchProgress(lwps[0], lwps[0], p)
		} else if err := watch.ended(); err != nil {
			return true, err
		} else if why := watch.over(); why != "" {
			// Stopped already, by the stop that ended the last wait.
			return true, takeBack(ctx, c, why)
		}
		// The stop that ended the call is read already, or waits in the
		// events: the next one must be the continue's.
		c.Drain()
		if _, err := c.Do(ctx, gdb.Continue()); err != nil {
			return true, fmt.Errorf("continuing the process: %s", gdb.Message(err))
		}
		for {
			wctx, cancel := context.WithTimeout(ctx, callPoll)
			rec, err := c.WaitStopped(wctx)
			cancel()
			if err == nil && ended(rec) {
				return true, endedError(rec)
			}
			if err == nil {
				break
			}
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				c.Interrupt()
				return true, fmt.Errorf("the function did not return: %w", err)
			}
			if err := watch.ended(); err != nil {
				return true, err
			}
			if why := watch.over(); why != "" {
				if c.Interrupt() == nil {
					return true, fmt.Errorf("the function did not return (%s), and the process could not be stopped", why)
				}
				return true, takeBack(ctx, c, why)
			}
		}
	}
}

// takeBack takes back the calls left in the stopped process, whose
// patience is spent (why), and returns finishCalls' error.
func takeBack(ctx context.Context, c *gdb.Conn, why string) error {
	if err := unwindCalls(ctx, c); err != nil {
		return fmt.Errorf("the function did not return (%s), and its call could not be taken back: %w", why, err)
	}
	return fmt.Errorf("%w (%s)", errCallUnwound, why)
}

// unwindCalls takes back every call of gdb's left in the stopped
// process: in each calling thread, gdb's `return` from the frame right
// above the dummy frame pops that frame, the frames under it and the
// dummy frame, whose registers (saved by gdb before the call) the thread
// gets back.
func unwindCalls(ctx context.Context, c *gdb.Conn) error {
	for range 8 {
		lwps, err := dummyFrames(ctx, c)
		if err != nil {
			return err
		}
		if len(lwps) == 0 {
			return nil
		}
		r, err := c.Do(ctx, gdb.ThreadInfo())
		if err != nil {
			return errors.New(gdb.Message(err))
		}
		id, err := gdbThread(r.List("threads"), lwps[0])
		if err != nil {
			return err
		}
		f, err := c.Do(ctx, gdb.ThreadFrames(id))
		if err != nil {
			return errors.New(gdb.Message(err))
		}
		level := -1
		for _, fr := range f.List("stack") {
			if fr.String("func") == dummyFrameName {
				level, _ = strconv.Atoi(fr.String("level"))
				break
			}
		}
		if level < 0 {
			return fmt.Errorf("no dummy frame in thread %d's stack", lwps[0])
		}
		// The dummy frame itself at the top (the function returned into
		// it as it was stopped): popping it is the same restore.
		level = max(level-1, 0)
		if _, err := c.Do(ctx, gdb.SelectThread(id)); err != nil {
			return errors.New(gdb.Message(err))
		}
		// Where gdb cannot write the thread's vector registers, the
		// agent puts them back before gdb's restore (agent/calls.py,
		// _Vectors); where the agent is not loaded nothing is done.
		c.Do(ctx, gdb.Console(gdb.PythonLine(fmt.Sprintf("vectors_unwinding(%d)", lwps[0]))))
		if _, err := c.Do(ctx, gdb.SelectFrame(strconv.Itoa(level))); err != nil {
			return errors.New(gdb.Message(err))
		}
		if _, err := c.Do(ctx, gdb.Console("return")); err != nil {
			return fmt.Errorf("popping the call's frames in thread %d: %s", lwps[0], gdb.Message(err))
		}
	}
	return errors.New("gdb's calls are still listed after popping them")
}

// dummyFrameName is how gdb names its dummy frame in a stack.
const dummyFrameName = "<function called from gdb>"

// ptidRe finds the LWP of a line of `maint print dummy-frames`:
// "ptid=PID.LWP.0".
var ptidRe = regexp.MustCompile(`ptid=\d+\.(\d+)\.`)

// dummyFrames lists gdb's dummy frames, one for each call of gdb's not
// ended, by the LWP of the thread each is in: `maint print dummy-frames`
// prints a line for each, naming its thread ("ptid=").
func dummyFrames(ctx context.Context, c *gdb.Conn) ([]int, error) {
	r, err := c.Do(ctx, gdb.Console("maint print dummy-frames"))
	if err != nil {
		return nil, fmt.Errorf("listing gdb's calls: %s", gdb.Message(err))
	}
	var lwps []int
	for _, m := range ptidRe.FindAllStringSubmatch(r.Console(), -1) {
		n, _ := strconv.Atoi(m[1])
		lwps = append(lwps, n)
	}
	return lwps, nil
}

// callVoid runs line, a gdb `call` of a function whose result is not
// used, through gdbCall: a call that gdb abandoned and that then ran to
// its end did what it was made for. The line's string literals are put
// into the process first (placeStrings).
func callVoid(ctx context.Context, c *gdb.Conn, line string) error {
	line, err := placeStrings(ctx, c, line)
	if err != nil {
		return err
	}
	_, err = gdbCall(ctx, c, gdb.Console(line))
	if err == nil || errors.Is(err, errCallAbandoned) {
		return nil
	}
	return errors.New(gdb.Message(err))
}

// placeStrings puts each C string literal of line into the process, in a
// block of its own that a call of malloc made by itself allocates, and
// returns line with each literal replaced by the block's address.
//
// gdb would allocate a literal's room with a call of malloc nested in
// the function's call, after it saved the calling thread's registers
// for that call. When a signal in another thread has gdb give up that
// malloc, gdb, unwinding its own unfinished call, writes the calling
// thread's saved registers into the thread it has selected by then: the
// one that took the signal, which then runs on with another thread's
// stack pointer and program counter (docs/facts.md, fact 147). A malloc
// called by itself has no call around it to unwind: given up, it runs
// to its end (finishCalls), and the literal is allocated again. Like
// gdb's, the blocks are not freed: the functions snapctl calls may keep
// the pointers.
func placeStrings(ctx context.Context, c *gdb.Conn, line string) (string, error) {
	var b strings.Builder
	for {
		start := strings.IndexByte(line, '"')
		if start < 0 {
			b.WriteString(line)
			return b.String(), nil
		}
		s, n, err := cLiteral(line[start:])
		if err != nil {
			return "", err
		}
		addr, err := placeString(ctx, c, s)
		if err != nil {
			return "", err
		}
		b.WriteString(line[:start])
		fmt.Fprintf(&b, "(char *) %#x", addr)
		line = line[start+n:]
	}
}

// placeString allocates len(s)+1 bytes in the process with a call of
// malloc and writes s and its terminating NUL there. A malloc that gdb
// gave up ran to its end with its result unknown: that block is lost,
// and malloc is called again, up to allocTries times.
func placeString(ctx context.Context, c *gdb.Conn, s []byte) (uint64, error) {
	expr := fmt.Sprintf("(unsigned long) ((void *(*)(unsigned long)) malloc)(%d)", len(s)+1)
	for tries := 1; ; tries++ {
		r, err := gdbCall(ctx, c, gdb.Evaluate(expr))
		if errors.Is(err, errCallAbandoned) && tries < allocTries && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("allocating a string in the process: %s", gdb.Message(err))
		}
		addr, perr := strconv.ParseUint(strings.Fields(r.String("value") + " x")[0], 0, 64)
		if perr != nil || addr == 0 {
			return 0, fmt.Errorf("allocating a string in the process: malloc returned %q", r.String("value"))
		}
		if _, err := c.Do(ctx, gdb.WriteMemory(addr, append(append([]byte(nil), s...), 0))); err != nil {
			return 0, fmt.Errorf("writing a string into the process: %s", gdb.Message(err))
		}
		return addr, nil
	}
}

// cLiteral decodes the C string literal at the start of text (its first
// byte a double quote) as cQuote and heaptrack's quoting write it:
// backslash escapes of a quote, a backslash and octal bytes, and C's
// letter escapes. It returns the bytes and the literal's length in text.
func cLiteral(text string) ([]byte, int, error) {
	var s []byte
	for i := 1; i < len(text); i++ {
		switch ch := text[i]; ch {
		case '"':
			return s, i + 1, nil
		case '\\':
			i++
			if i == len(text) {
				break
			}
			e := text[i]
			switch {
			case e >= '0' && e <= '7':
				v, j := 0, i
				for ; j < len(text) && j < i+3 && text[j] >= '0' && text[j] <= '7'; j++ {
					v = v*8 + int(text[j]-'0')
				}
				s = append(s, byte(v))
				i = j - 1
			case strings.IndexByte("abfnrtv", e) >= 0:
				s = append(s, "\a\b\f\n\r\t\v"[strings.IndexByte("abfnrtv", e)])
			default:
				s = append(s, e)
			}
		default:
			s = append(s, ch)
		}
	}
	return nil, 0, fmt.Errorf("unterminated string in %q", text)
}
