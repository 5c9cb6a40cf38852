package driver

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/snapctl/snapctl/internal/term"
)

// console stands between the target and the terminal the status line is
// on. The target writes to a pseudo-terminal, so it still sees a terminal
// (its stdio stays line-buffered, its colours stay on), and snapctl copies
// what it writes to the real terminal through the status line, which
// erases itself first: the program's lines and the status line never share
// a line.
type console struct {
	status  *statusLine
	masters []*os.File
	slaves  []*os.File // snapctl's copies, closed at the end (closeSlaves)
	copies  sync.WaitGroup
}

// openConsole returns the writers the target gets for stdout and stderr:
// a pseudo-terminal for each that is a terminal, the writer itself for the
// others. When both are the same terminal, they share one pseudo-terminal,
// as they share the real one: the order of the target's stdout and stderr
// lines is kept.
func openConsole(status *statusLine, stdout, stderr io.Writer) (*console, io.Writer, io.Writer, error) {
	c := &console{status: status}
	wrap := func(w io.Writer) (io.Writer, error) {
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
		go c.copy(w, master)
		return slave, nil
	}
	out, err := wrap(stdout)
	if err != nil {
		return nil, nil, nil, err
	}
	if stderr == stdout || term.Same(stdout, stderr) {
		return c, out, out, nil
	}
	errw, err := wrap(stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, out, errw, nil
}

// copy writes what the target writes to master to w until the last holder
// of the slave closes it (the master then reads EIO) or master is closed.
func (c *console) copy(w io.Writer, master *os.File) {
	defer c.copies.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			c.status.output(w, buf[:n])
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

// close waits up to grace for the copies to reach the end of the target's
// output, then closes the masters. A process the target left behind that
// still holds a slave loses what it writes later.
func (c *console) close(grace time.Duration) {
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
	for _, m := range c.masters {
		m.Close()
	}
	c.copies.Wait()
	c.status.endOutput()
}

// targetOutput returns the writers for the target's stdout and stderr. With
// a status line, it shows "starting valgrind" and opens the console; if no
// pseudo-terminal can be had, the run goes on without a status line rather
// than with one that runs into the program's output.
func (s *session) targetOutput() (stdout, stderr io.Writer) {
	if s.status == nil {
		return s.opts.Stdout, s.opts.Stderr
	}
	con, stdout, stderr, err := openConsole(s.status, s.opts.Stdout, s.opts.Stderr)
	if err != nil {
		s.status.clear()
		s.status = nil
		return s.opts.Stdout, s.opts.Stderr
	}
	s.console = con
	s.status.setPhase("starting valgrind")
	return stdout, stderr
}
