package driver

import (
	"fmt"
	"io"

	"github.com/snapctl/snapctl/driver/console"
	"github.com/snapctl/snapctl/internal/term"
)

// targetOutput returns the writers for the target's stdout and stderr. With
// a status line, it shows what starts (startPhase) and opens the console; if no
// pseudo-terminal can be had, the run goes on without a status line rather
// than with one that runs into the program's output. Without a status
// line, a target whose stdout and stderr are one terminal still gets a
// pseudo-terminal of its own, shared by both: valgrind's stderr would
// otherwise reach the terminal through a pipe of snapctl's, out of order
// with the program's stdout.
func (s *session) targetOutput() (stdout, stderr io.Writer) {
	shared := term.Same(s.opts.Stdout, s.opts.Stderr)
	if s.status == nil && !shared {
		return s.opts.Stdout, s.opts.Stderr
	}
	con, stdout, stderr, err := console.Open(s.status, s.opts.Stdout, s.opts.Stderr)
	if err != nil {
		if s.status != nil {
			s.status.Clear()
			s.status = nil
		}
		return s.opts.Stdout, s.opts.Stderr
	}
	s.console = con
	if s.status != nil {
		s.status.SetPhase(s.startPhase())
	}
	return stdout, stderr
}

// consoleTail returns the tail the console keeps of the target's shared
// terminal, or nil when there is none.
func (s *session) consoleTail() *console.Tail {
	if s.console == nil {
		return nil
	}
	return s.console.Tail()
}

// startPhase is what the status line says while the target starts: the
// attach, or the backend's tool starting (valgrind under massif, gdb
// natively).
func (s *session) startPhase() string {
	if s.opts.AttachPID != 0 {
		return fmt.Sprintf("attaching to process %d", s.opts.AttachPID)
	}
	return "starting " + s.backend.Tool()
}
