package heaptrack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/snapctl/snapctl/snapshots"
)

// Recorder reads a program's heaptrack stream as it comes: the raw
// stream from a FIFO, forwarded to heaptrack_interpret, whose output it
// replays. Cut gives the heap at a stop, Finish the heap when the stream
// ends.
type Recorder struct {
	fifo   string
	rd     *os.File // the FIFO, read end
	hold   *os.File // a write end kept open until Finish, so that reads wait for the program
	interp *exec.Cmd
	in     io.WriteCloser // interpreter's stdin
	stderr limitedWriter  // the interpreter's stderr, its first 64 KiB

	reqs   chan cutRequest
	cuts   chan cutResult
	fwdErr chan error // the forwarder's end
	repErr chan error // the replayer's end
	rep    *Replayer

	mu       sync.Mutex
	checked  bool // the library's fd was checked against the FIFO
	finished bool
}

type cutRequest struct {
	index   int
	pending []byte
	done    chan error
}

type cutResult struct {
	index int
	snap  *snapshots.Snapshot
}

// Start makes the FIFO fifo (which must not exist), opens it and starts
// the interpreter. The program is then started with tools.Env(fifo) in
// its environment; its library opens the FIFO at its first allocation.
func Start(tools Tools, fifo string) (*Recorder, error) {
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("making heaptrack's FIFO: %w", err)
	}
	// Opened without blocking (no writer yet), then held open for
	// writing too, so that a read waits for the program instead of
	// reading an end.
	rd, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		os.Remove(fifo)
		return nil, fmt.Errorf("opening heaptrack's FIFO: %w", err)
	}
	hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		rd.Close()
		os.Remove(fifo)
		return nil, fmt.Errorf("opening heaptrack's FIFO: %w", err)
	}
	r := &Recorder{fifo: fifo, rd: rd, hold: hold, reqs: make(chan cutRequest, 1), cuts: make(chan cutResult, 64),
		fwdErr: make(chan error, 1), repErr: make(chan error, 1), rep: NewReplayer()}
	cmd := exec.Command(tools.Interpret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.stderr.n = 64 << 10
	cmd.Stderr = &r.stderr
	in, err := cmd.StdinPipe()
	if err == nil {
		var out io.ReadCloser
		out, err = cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			r.interp, r.in = cmd, in
			go r.replay(out)
			go r.forward()
			return r, nil
		}
	}
	rd.Close()
	hold.Close()
	os.Remove(fifo)
	return nil, fmt.Errorf("starting heaptrack_interpret: %w", err)
}

// FIFO returns the FIFO's path, for Tools.Env.
func (r *Recorder) FIFO() string { return r.fifo }

// Replayer returns the replayer, for its totals once Finish has
// returned: until then the stream is being replayed into it.
func (r *Recorder) Replayer() *Replayer { return r.rep }

// filler follows a cut marker: 5,000 bytes of lines the interpreter passes
// through, more than its 4,096-byte buffer holds, so that it writes the
// marker out at once.
var filler = bytes.Repeat(append(append([]byte{'#'}, bytes.Repeat([]byte{'.'}, 998)...), '\n'), 5)

// forward copies the FIFO to the interpreter. The bytes a cut forwarded
// from the process's memory (ahead) come again through the FIFO when the
// library flushes its buffer: they are checked and dropped.
func (r *Recorder) forward() {
	var ahead []byte
	last := byte('\n') // the last byte forwarded
	buf := make([]byte, 64<<10)
	send := func(b []byte) error {
		n := min(len(ahead), len(b))
		if !bytes.Equal(ahead[:n], b[:n]) {
			return errors.New("heaptrack's stream does not continue with the buffer read at the last stop")
		}
		ahead = ahead[n:]
		if len(b) > n {
			last = b[len(b)-1]
			if _, err := r.in.Write(b[n:]); err != nil {
				return fmt.Errorf("writing to heaptrack_interpret: %w", err)
			}
		}
		return nil
	}
	end := func(err error) {
		r.in.Close()
		r.fwdErr <- err
	}
	for {
		n, err := r.rd.Read(buf)
		if n > 0 {
			if err := send(buf[:n]); err != nil {
				end(err)
				return
			}
		}
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			req := <-r.reqs
			r.rd.SetReadDeadline(time.Time{})
			err := r.drain(send)
			if err == nil {
				err = r.mark(req, &ahead, &last)
			}
			req.done <- err
			if err != nil {
				end(err)
				return
			}
		case err == io.EOF:
			// Bytes still ahead were read at a stop and never written
			// out: the program ended without exit() (_exit, a signal),
			// so the library did not flush its last buffer. They were
			// forwarded already; what followed them is lost.
			end(nil)
			return
		case err != nil:
			end(fmt.Errorf("reading heaptrack's FIFO: %w", err))
			return
		}
	}
}

// mark forwards, after what the FIFO held, the library's buffer as read
// at a stop (the part not forwarded at an earlier stop: what is still
// ahead must begin it), then the cut's marker line and the filler that
// makes the interpreter write the marker out.
func (r *Recorder) mark(req cutRequest, ahead *[]byte, last *byte) error {
	if len(req.pending) < len(*ahead) || !bytes.Equal(req.pending[:len(*ahead)], *ahead) {
		return errors.New("heaptrack's buffer at this stop does not continue the one read at the last stop")
	}
	rest := req.pending[len(*ahead):]
	if len(rest) > 0 {
		*last = rest[len(rest)-1]
	}
	if *last != '\n' {
		// A thread wrote without the lock held: not heaptrack's code
		// as this package knows it.
		return errors.New("heaptrack's stream would be cut inside a line")
	}
	*ahead = append((*ahead)[:0:0], req.pending...)
	_, err := r.in.Write(append(append(rest[:len(rest):len(rest)], cutPrefix+strconv.Itoa(req.index)+"\n"...), filler...))
	return err
}

// drain forwards what the FIFO holds now: with every writer stopped, all
// the library has written.
func (r *Recorder) drain(send func([]byte) error) error {
	for {
		var n int
		var errno syscall.Errno
		if err := r.syscallConn(func(fd uintptr) {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		}); err != nil {
			return err
		}
		if errno != 0 {
			return fmt.Errorf("reading the size of heaptrack's FIFO: %w", errno)
		}
		if n == 0 {
			return nil
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r.rd, b); err != nil {
			return fmt.Errorf("reading heaptrack's FIFO: %w", err)
		}
		if err := send(b); err != nil {
			return err
		}
	}
}

func (r *Recorder) syscallConn(fn func(fd uintptr)) error {
	c, err := r.rd.SyscallConn()
	if err != nil {
		return err
	}
	return c.Control(fn)
}

// replay reads the interpreter's output line by line.
func (r *Recorder) replay(out io.Reader) {
	br := bufio.NewReaderSize(out, 64<<10)
	var long []byte
	for {
		l, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, l...)
			continue
		}
		if long != nil {
			l = append(long, l...)
			long = nil
		}
		if len(l) > 0 && l[len(l)-1] == '\n' {
			l = l[:len(l)-1]
		}
		if len(l) > 0 {
			k, isCut, lerr := r.rep.Line(l)
			if lerr != nil {
				r.repErr <- lerr
				io.Copy(io.Discard, br)
				return
			}
			if isCut {
				r.cuts <- cutResult{index: k, snap: r.rep.Snapshot(k)}
			}
		}
		if err == io.EOF {
			r.repErr <- nil
			return
		}
		if err != nil {
			r.repErr <- fmt.Errorf("reading heaptrack_interpret: %w", err)
			return
		}
	}
}

// Cut returns the heap of target, stopped by gdb with every thread, as
// snapshot index: every event the library wrote before the stop and none
// after. A *BusyError says that a thread was stopped inside the library
// and must be let out first; the stream is then as it was. It is Mark,
// then Snapshot.
func (r *Recorder) Cut(ctx context.Context, t *Target, index int) (*snapshots.Snapshot, error) {
	if err := r.Mark(ctx, t, index); err != nil {
		return nil, err
	}
	return r.Snapshot(ctx, index)
}

// Mark cuts the stream of target, stopped by gdb with every thread, at
// mark index: it returns once the library's unwritten events and the
// mark are in the interpreter's input, and the target may run on while
// the interpreter catches up; Snapshot gives the heap at the mark. A
// *BusyError says that a thread was stopped inside the library and must
// be let out first; the stream is then as it was.
func (r *Recorder) Mark(ctx context.Context, t *Target, index int) error {
	st, err := t.Pending()
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return errors.New("heaptrack's stream has ended")
	}
	if !r.checked {
		if !t.WritesTo(st.Fd, r.fifo) {
			return fmt.Errorf("process %d: heaptrack's output (fd %d) is not %s: not the layout of %s", t.Pid, st.Fd, r.fifo, t.Layout.Lib)
		}
		r.checked = true
	}
	req := cutRequest{index: index, pending: st.Pending, done: make(chan error, 1)}
	r.reqs <- req
	r.rd.SetReadDeadline(time.Now())
	select {
	case err := <-req.done:
		return err
	case err := <-r.fwdErr:
		r.fwdErr <- err
		return fmt.Errorf("heaptrack's stream ended before the cut: %v", err)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Snapshot waits for the heap at mark index (Mark), which the replay
// took when it read the mark. Marks are taken in order: the heaps of
// earlier marks nobody asked for are dropped.
func (r *Recorder) Snapshot(ctx context.Context, index int) (*snapshots.Snapshot, error) {
	for {
		select {
		case c := <-r.cuts:
			if c.index == index {
				return c.snap, nil
			}
		case err := <-r.repErr:
			r.repErr <- err
			return nil, fmt.Errorf("heaptrack_interpret ended before the cut: %v%s", err, r.stderrText())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Finish waits for the stream to end (the program exited, or the library
// stopped) and returns the heap at its end, numbered index: what the
// program had not freed. The library writes its last buffer out from an
// atexit handler: a program that ends by _exit or a signal loses up to
// 4 KiB of its last events. For an exact end, cut at a stop on the
// exit_group system call instead.
func (r *Recorder) Finish(ctx context.Context, index int) (*snapshots.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		r.finished = true
		r.hold.Close()
	}
	var ferr, rerr error
	select {
	case ferr = <-r.fwdErr:
		r.fwdErr <- ferr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case rerr = <-r.repErr:
		r.repErr <- rerr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ferr != nil {
		return nil, ferr
	}
	if rerr != nil {
		return nil, fmt.Errorf("%w%s", rerr, r.stderrText())
	}
	if err := r.interp.Wait(); err != nil {
		return nil, fmt.Errorf("heaptrack_interpret: %w%s", err, r.stderrText())
	}
	return r.rep.Snapshot(index), nil
}

// Close ends the interpreter if it still runs and removes the FIFO.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		r.finished = true
		r.hold.Close()
	}
	r.rd.Close()
	if r.interp.ProcessState == nil {
		r.interp.Process.Kill()
		r.interp.Wait()
	}
	return os.Remove(r.fifo)
}

func (r *Recorder) stderrText() string {
	if s := r.stderr.String(); s != "" {
		return "; heaptrack_interpret said: " + s
	}
	return ""
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rest := l.n - l.b.Len(); rest > 0 {
		l.b.Write(p[:min(rest, len(p))])
	}
	return len(p), nil
}

func (l *limitedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(bytes.TrimSpace(l.b.Bytes()))
}
