package native

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
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

// errCallAbandoned says that gdb gave up a call it made into the process,
// which then ran to its end: what it did was done, but its result is not
// known.
var errCallAbandoned = errors.New("gdb gave up the call, which then ran to its end")

// callPatience is how long a call that gdb abandoned is given to return,
// from the abandonment or the end of the caller's deadline: it is not
// cut short when the caller's time is up, since a thread left inside it
// is the process's death, and a function that has not returned in a
// minute of the process running is stuck.
const callPatience = time.Minute

// gdbCall sends cmd, a gdb command that calls a function in the stopped
// process (call, print or -data-evaluate-expression of a call), and
// leaves no thread inside the function however gdb answers: a call gdb
// abandoned is run to its end (finishCalls), and the error then wraps
// errCallAbandoned with gdb's message. No breakpoint of the plan may be
// enabled: the process runs meanwhile.
func gdbCall(ctx context.Context, c *gdb.Conn, cmd mi.Command) (*mi.Result, error) {
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
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callPatience)
	defer cancel()
	left, ferr := finishCalls(rctx, c)
	switch {
	case ferr != nil:
		return nil, fmt.Errorf("%s; a thread is still inside the function gdb called, and the process dies of SIGSEGV when it returns without gdb: %w", gdb.Message(err), ferr)
	case left:
		return nil, fmt.Errorf("%s: %w", gdb.Message(err), errCallAbandoned)
	}
	return nil, err
}

// finishCalls runs the process on until no call of gdb's is left in it
// (dummyFrames), and reports whether there was one. A call that does not
// end before ctx is interrupted, still pending, and the error says so;
// where gdb cannot list its calls at all, nothing is done.
func finishCalls(ctx context.Context, c *gdb.Conn) (bool, error) {
	for round := 0; ; round++ {
		n, err := dummyFrames(ctx, c)
		if err != nil {
			if round == 0 {
				return false, nil
			}
			return true, err
		}
		if n == 0 {
			return round > 0, nil
		}
		// The stop that ended the call is read already, or waits in the
		// events: the next one must be the continue's.
		c.Drain()
		if _, err := c.Do(ctx, gdb.Continue()); err != nil {
			return true, fmt.Errorf("continuing the process: %s", gdb.Message(err))
		}
		if _, err := c.WaitStopped(ctx); err != nil {
			c.Interrupt()
			return true, fmt.Errorf("the function did not return: %w", err)
		}
	}
}

// dummyFrames counts gdb's dummy frames, one for each call of gdb's not
// ended: `maint print dummy-frames` prints a line for each, naming its
// thread ("ptid=").
func dummyFrames(ctx context.Context, c *gdb.Conn) (int, error) {
	r, err := c.Do(ctx, gdb.Console("maint print dummy-frames"))
	if err != nil {
		return 0, fmt.Errorf("listing gdb's calls: %s", gdb.Message(err))
	}
	return strings.Count(r.Console(), "ptid="), nil
}

// callVoid runs line, a gdb `call` of a function whose result is not
// used, through gdbCall: a call that gdb abandoned and that then ran to
// its end did what it was made for.
func callVoid(ctx context.Context, c *gdb.Conn, line string) error {
	_, err := gdbCall(ctx, c, gdb.Console(line))
	if err == nil || errors.Is(err, errCallAbandoned) {
		return nil
	}
	return errors.New(gdb.Message(err))
}
