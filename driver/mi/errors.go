package mi

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/snapctl/snapctl/internal/child"
)

// Error is gdb's ^error answer to a command.
type Error struct {
	Command string // the command line as sent, without its token
	Msg     string // gdb's msg field
	Code    string // gdb's code field, such as "undefined-command"; often empty
}

func (e *Error) Error() string {
	return fmt.Sprintf("gdb: %s: %s", e.Command, e.Msg)
}

// ErrExited matches (with errors.Is) every error that reports gdb gone.
var ErrExited = errors.New("gdb exited")

// ErrClosed matches (with errors.Is) the error of a Send made after, or cut
// short by, Close.
var ErrClosed = errors.New("mi client closed")

// ExitError reports that gdb exited, crashed or was killed, or that its
// output ended. Every pending and later Send returns it, wrapped with the
// command it was sending.
type ExitError struct {
	Pid int
	// State is gdb's exit state; nil for a client that has no process of
	// its own (NewClient).
	State *os.ProcessState
	// Stderr is the tail of what gdb wrote on its standard error.
	Stderr string
	// Closed is set when gdb went away because Close asked it to.
	Closed bool
	// Err is the error that ended the client, when there was one (waiting
	// for gdb, or reading a NewClient's input).
	Err error
}

func (e *ExitError) Error() string {
	var b strings.Builder
	switch {
	case e.State != nil:
		fmt.Fprintf(&b, "gdb (pid %d) %s", e.Pid, child.Describe(e.State))
	case e.Err != nil:
		fmt.Fprintf(&b, "gdb's output ended: %v", e.Err)
	default:
		b.WriteString("gdb's output ended")
	}
	if e.Closed {
		b.WriteString(" after close")
	}
	if tail := strings.TrimSpace(e.Stderr); tail != "" {
		fmt.Fprintf(&b, "; stderr: %s", tail)
	}
	return b.String()
}

// ExitCode is gdb's exit status, -1 when a signal killed it or when there
// is no process.
func (e *ExitError) ExitCode() int {
	if e.State == nil {
		return -1
	}
	return e.State.ExitCode()
}

// Is makes errors.Is(err, ErrExited) true for every ExitError, and
// errors.Is(err, ErrClosed) true for one caused by Close.
func (e *ExitError) Is(target error) bool {
	return target == ErrExited || (e.Closed && target == ErrClosed)
}

// Unwrap returns the underlying error, if any.
func (e *ExitError) Unwrap() error { return e.Err }
