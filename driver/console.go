package driver

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/snapctl/snapctl/internal/term"
)

// console stands between the target and the terminal its output goes to.
// The target writes to a pseudo-terminal, so it still sees a terminal
// (its stdio stays line-buffered, its colours stay on), and snapctl copies
// what it writes to the real terminal, through the status line when there
// is one, which erases itself first: the program's lines and the status
// line never share a line.
type console struct {
	status  *statusLine // nil: the output is copied as it comes
	masters []*os.File
	slaves  []*os.File // snapctl's copies, closed at the end (closeSlaves)
	copies  sync.WaitGroup
	// tail keeps the end of what the shared pseudo-terminal carried, when
	// stdout and stderr share one: valgrind writes its stderr straight to
	// it, and says there what stops it before its log is open.
	tail *tailWriter
}

// openConsole returns the writers the target gets for stdout and stderr:
// a pseudo-terminal for each that is a terminal, the writer itself for the
// others. When both are the same terminal, they share one pseudo-terminal,
// as they share the real one: the order of the target's stdout and stderr
// lines is kept, and the console keeps the tail of both.
func openConsole(status *statusLine, stdout, stderr io.Writer) (*console, io.Writer, io.Writer, error) {
	c := &console{status: status}
	wrap := func(w io.Writer, tail *tailWriter) (io.Writer, error) {
		if !term.IsTerminal(w) {
			return w, nil
		}
		master, slave, err := term.OpenPTY(w)
		if err != nil {
			c.close(0)
			return nil, err
		}
		c.masters, c.slaves = append(c.masters, master), append(c.slaves, slave)
		c.copies.Add(1)
		go c.copy(w, master, tail)
		return slave, nil
	}
	if stderr == stdout || term.Same(stdout, stderr) {
		c.tail = newTailWriter(io.Discard, tailMax)
		out, err := wrap(stdout, c.tail)
		if err != nil {
			return nil, nil, nil, err
		}
		return c, out, out, nil
	}
	out, err := wrap(stdout, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	errw, err := wrap(stderr, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, out, errw, nil
}

// copy writes what the target writes to master to w until the last holder
// of the slave closes it (the master then reads EIO) or master is closed.
func (c *console) copy(w io.Writer, master *os.File, tail *tailWriter) {
	defer c.copies.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			if tail != nil {
				tail.Write(buf[:n])
			}
			if c.status != nil {
				c.status.output(w, buf[:n])
			} else {
				w.Write(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// closeSlaves closes snapctl's copies of the slaves, so the copies end when
// the target's last process closes them. It waits for close: valgrind's
// stderr reaches a slave through snapctl until valgrind has exited.
func (c *console) closeSlaves() {
	for _, s := range c.slaves {
		s.Close()
	}
	c.slaves = nil
}

// drain closes snapctl's copies of the slaves and waits up to grace for
// the copies to reach the end of the target's output, which they do once
// every process that held a slave has closed it.
func (c *console) drain(grace time.Duration) {
	c.closeSlaves()
	done := make(chan struct{})
	go func() {
		c.copies.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
	}
}

// close drains the console (see drain), then closes the masters. A
// process the target left behind that still holds a slave loses what it
// writes later.
func (c *console) close(grace time.Duration) {
	c.drain(grace)
	for _, m := range c.masters {
		m.Close()
	}
	c.copies.Wait()
	if c.status != nil {
		c.status.endOutput()
	}
}

// targetOutput returns the writers for the target's stdout and stderr. With
// a status line, it shows "starting valgrind" (natively "starting gdb")
// and opens the console; if no
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
	con, stdout, stderr, err := openConsole(s.status, s.opts.Stdout, s.opts.Stderr)
	if err != nil {
		if s.status != nil {
			s.status.clear()
			s.status = nil
		}
		return s.opts.Stdout, s.opts.Stderr
	}
	s.console = con
	if s.status != nil {
		s.status.setPhase("starting " + s.backend.Tool())
	}
	return stdout, stderr
}

// consoleTail returns the tail the console keeps of the target's shared
// terminal, or nil when there is none.
func (s *session) consoleTail() *tailWriter {
	if s.console == nil {
		return nil
	}
	return s.console.tail
}
