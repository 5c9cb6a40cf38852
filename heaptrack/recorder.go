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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/snapshots"
	"golang.org/x/sys/unix"
)

// Recorder reads a program's heaptrack stream as it comes: the raw
// stream from a FIFO, forwarded to heaptrack_interpret, whose output it
// replays. A stop is marked in the stream by a mark written into the FIFO
// while every thread of the program is stopped (FIFOMark: gdb's agent
// writes it, from what Target reads of the library) and Snapshot gives
// the heap there. Close ends the reading.
type Recorder struct {
	fifo   string
	rd     int      // the FIFO, read end, non-blocking, read by forward alone
	hold   *os.File // a write end kept open until Close, so that the FIFO reads empty, not ended, while the program runs
	interp *exec.Cmd
	in     io.WriteCloser // interpreter's stdin
	stderr limitedWriter  // the interpreter's stderr, its first 64 KiB

	quit    chan struct{} // closed by Close: the forwarder ends
	kick    chan struct{} // a Snapshot waits: the forwarder polls now
	fwdDone chan struct{} // closed by the forwarder as it ends
	fwdErr  chan error    // the forwarder's end
	repErr  chan error    // the replayer's end
	// rep is the replay, which repMu guards: the replay goroutine feeds
	// it line by line, and Snapshot makes a cut's tree of it.
	repMu sync.Mutex
	rep   *Replayer
	mods  *Modules
	// cuts holds the heaps the replay took at marks nobody has asked
	// for yet, by mark, each as the live bytes and blocks of its stacks
	// (Replayer.live): the stop loop can be hundreds of stops behind
	// the replay, and a tree for each was snapctl's memory growing with
	// that backlog (docs/facts.md, fact 130). cutReady is closed and
	// replaced at every one.
	cutMu    sync.Mutex
	cuts     map[int][]liveStack
	cutReady chan struct{}

	mu       sync.Mutex
	finished bool // Close has run

	// replayed counts the interpreter's lines replayed (see Progress).
	replayed atomic.Int64
}

// ErrEnded says that the recording is over before the program: the
// interpreter or the stream ended, and no later stop can be cut.
var ErrEnded = errors.New("heaptrack_interpret ended")

// Start makes the FIFO fifo (which must not exist), opens it and starts
// the interpreter. The program is then started with tools.Env(fifo) in
// its environment; its library opens the FIFO at its first allocation.
func Start(tools Tools, fifo string) (*Recorder, error) {
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		return nil, fmt.Errorf("making heaptrack's FIFO: %w", err)
	}
	// Opened without blocking (no writer yet), then held open for
	// writing too, so that the FIFO reads empty rather than ended until
	// the program ends. The read end is polled (see forward), not waited
	// on in Go's poller.
	rd, err := syscall.Open(fifo, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(fifo)
		return nil, fmt.Errorf("opening heaptrack's FIFO: %w", err)
	}
	hold, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		syscall.Close(rd)
		os.Remove(fifo)
		return nil, fmt.Errorf("opening heaptrack's FIFO: %w", err)
	}
	// A larger pipe lets the library write on while the forwarder
	// sleeps between polls; where the system refuses, 64 KiB it is.
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(rd), syscall.F_SETPIPE_SZ, fifoSize)
	r := &Recorder{fifo: fifo, rd: rd, hold: hold, quit: make(chan struct{}), kick: make(chan struct{}, 1), fwdDone: make(chan struct{}),
		cuts: make(map[int][]liveStack), cutReady: make(chan struct{}),
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
			// The interpreter's first work, reading the debug information
			// of every module (fact 71), waits for idle time rather than
			// take it from the program and gdb.
			syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, interpNice)
			// An interpreter that aborts on a stream it cannot parse
			// leaves no core file in the user's directory: snapctl
			// says why the recording failed (its stderr) instead.
			unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_CORE, &unix.Rlimit{}, nil)
			r.mods = NewModules(tools.Preload)
			r.rep.Mods = r.mods
			r.interp, r.in = cmd, &moduleScanner{w: in, mods: r.mods, bol: true}
			go r.replay(out)
			go r.forward()
			return r, nil
		}
	}
	syscall.Close(rd)
	hold.Close()
	os.Remove(fifo)
	return nil, fmt.Errorf("starting heaptrack_interpret: %w", err)
}

// fifoSize is the FIFO's capacity asked for (Linux's default
// pipe-max-size), and pollMin and pollMax how long the forwarder sleeps
// when the FIFO is empty, doubling while it stays empty.
const (
	interpNice = 10
	fifoSize   = 1 << 20
	pollMin    = time.Millisecond
	pollMax    = 8 * time.Millisecond
)

// FIFO returns the FIFO's path, for Tools.Env.
func (r *Recorder) FIFO() string { return r.fifo }

// Modules returns the process's modules as the stream lists them.
func (r *Recorder) Modules() *Modules { return r.mods }

// filler follows a cut marker: 5,000 bytes of lines the interpreter passes
// through, more than its 4,096-byte buffer holds, so that it writes the
// marker out at once.
var filler = bytes.Repeat(append(append([]byte{'#'}, bytes.Repeat([]byte{'.'}, 998)...), '\n'), 5)

// forward copies the FIFO to the interpreter, and a mark in it (see
// markReader) with the library's buffer it carries. Those bytes (ahead)
// come again through the FIFO when the library writes its buffer out:
// they are checked and dropped.
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
	m := &markReader{send: send, mark: func(index int, pending []byte) error {
		return r.mark(index, pending, &ahead, &last)
	}}
	defer close(r.fwdDone)
	end := func(err error) {
		r.in.Close()
		r.fwdErr <- err
		if err != nil {
			r.discard(buf)
		}
	}
	// The FIFO is polled, never waited on: a writer that wakes its
	// reader waits, on a small machine, while the reader and then the
	// interpreter run (about 0.2 ms a write, against 20 us); at a stop
	// that is gdb's agent writing a mark, every thread stopped.
	sleep := time.NewTimer(0)
	<-sleep.C
	delay := pollMin
	for {
		n, err := syscall.Read(r.rd, buf)
		switch {
		case n > 0:
			delay = pollMin
			if err := m.feed(buf[:n]); err != nil {
				end(err)
				return
			}
			continue
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			sleep.Reset(delay)
			delay = min(2*delay, pollMax)
			select {
			case <-sleep.C:
			case <-r.quit:
				end(errors.New("heaptrack's stream was closed"))
				return
			case <-r.kick:
				sleep.Stop()
				delay = pollMin
			}
		case err == nil:
			// Bytes still ahead were read at a stop and never written
			// out: the program ended without exit() (_exit, a signal),
			// so the library did not flush its last buffer. They were
			// forwarded already; what followed them is lost.
			end(nil)
			return
		default:
			end(fmt.Errorf("reading heaptrack's FIFO: %w", err))
			return
		}
	}
}

// discard reads the FIFO and throws it away until the library closes it
// or Close: the recording has failed, and a FIFO nobody empties would
// stop the program at its next write, and gdb's agent with it.
func (r *Recorder) discard(buf []byte) {
	for {
		n, err := syscall.Read(r.rd, buf)
		switch {
		case n > 0, err == syscall.EINTR:
		case err == syscall.EAGAIN:
			select {
			case <-time.After(pollMax):
			case <-r.quit:
				return
			}
		default:
			return
		}
	}
}

// mark forwards, after what the FIFO held, the library's buffer as read
// at a stop (pending: the part not forwarded at an earlier stop, what is
// still ahead, must begin it), then mark index's marker line and the
// filler that makes the interpreter write the marker out.
func (r *Recorder) mark(index int, pending []byte, ahead *[]byte, last *byte) error {
	if len(pending) < len(*ahead) || !bytes.Equal(pending[:len(*ahead)], *ahead) {
		return errors.New("heaptrack's buffer at this stop does not continue the one read at the last stop")
	}
	rest := pending[len(*ahead):]
	if len(rest) > 0 {
		*last = rest[len(rest)-1]
	}
	if *last != '\n' {
		// A thread wrote without the lock held: not heaptrack's code
		// as this package knows it.
		return errors.New("heaptrack's stream would be cut inside a line")
	}
	*ahead = append((*ahead)[:0:0], pending...)
	_, err := r.in.Write(append(append(rest[:len(rest):len(rest)], cutPrefix+strconv.Itoa(index)+"\n"...), filler...))
	return err
}

// FIFOMark starts the record that a cut made from inside gdb, every
// thread of the program stopped, writes into the FIFO (gdb's agent.py,
// SiteCutter): "\x00snapctl-mark K N\n", then the N bytes the library
// held unwritten in its buffer at the stop. Written while no thread of
// the library can write, it comes after everything the library wrote
// before the stop; Snapshot(K) gives the heap there. It begins with a NUL
// byte, which heaptrack's text never holds, because it need not begin a
// line: the library writes a module's line in pieces and may write out
// its buffer between them (fact 75), the rest of the line then waiting
// in the buffer.
const FIFOMark = "\x00snapctl-mark "

// markReader splits the FIFO's bytes into the library's, which go to
// send, and marks written into it (FIFOMark), which go to mark.
type markReader struct {
	send func([]byte) error
	mark func(index int, pending []byte) error
	// head is a mark's first line while its end has not come yet.
	head []byte
	// A mark's record being read: its index, the bytes of the library's
	// buffer read so far and how many are still to come (0: no mark).
	index int
	body  []byte
	need  int
}

func (m *markReader) feed(b []byte) error {
	for len(b) > 0 {
		switch {
		case m.need > 0:
			k := min(m.need, len(b))
			m.body = append(m.body, b[:k]...)
			b, m.need = b[k:], m.need-k
			if m.need == 0 {
				if err := m.endMark(); err != nil {
					return err
				}
			}
		case m.head != nil:
			i := bytes.IndexByte(b, '\n')
			if i < 0 || len(m.head)+i > 64 {
				m.head = append(m.head, b...)
				if len(m.head) > 64 {
					return fmt.Errorf("heaptrack's FIFO has a NUL byte not followed by a mark: %q", m.head[:64])
				}
				return nil
			}
			line := append(m.head, b[:i+1]...)
			m.head, b = nil, b[i+1:]
			if err := m.beginMark(line); err != nil {
				return err
			}
		default:
			i := bytes.IndexByte(b, 0)
			if i < 0 {
				return m.send(b)
			}
			if i > 0 {
				if err := m.send(b[:i]); err != nil {
					return err
				}
			}
			m.head, b = []byte{}, b[i:]
		}
	}
	return nil
}

// beginMark reads a mark's first line, "\x00snapctl-mark K N\n".
func (m *markReader) beginMark(line []byte) error {
	var k, n int
	rec, ok := bytes.CutPrefix(line, []byte(FIFOMark))
	if ok {
		_, err := fmt.Sscanf(string(rec), "%d %d\n", &k, &n)
		ok = err == nil && k > 0 && n >= 0 && n <= bufferCap
	}
	if !ok {
		return fmt.Errorf("heaptrack's FIFO has a bad mark %q", bytes.TrimSpace(line))
	}
	m.index, m.need, m.body = k, n, make([]byte, 0, n)
	if n == 0 {
		return m.endMark()
	}
	return nil
}

func (m *markReader) endMark() error {
	body := m.body
	m.body = nil
	return m.mark(m.index, body)
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
			r.replayed.Add(1)
			r.repMu.Lock()
			k, isCut, lerr := r.rep.Line(l)
			var live []liveStack
			if isCut && lerr == nil {
				live = r.rep.live()
			}
			r.repMu.Unlock()
			if lerr != nil {
				r.repErr <- lerr
				io.Copy(io.Discard, br)
				return
			}
			if isCut {
				r.keepCut(k, live)
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

// Progress grows while the pipeline works: the lines of the
// interpreter's output replayed, plus the CPU time heaptrack_interpret
// has used (clock ticks), which reads debug information for a while
// before it writes. A caller waiting for a Snapshot on a loaded machine
// waits as long as it grows.
func (r *Recorder) Progress() int64 {
	n := r.replayed.Load()
	if r.interp == nil || r.interp.Process == nil {
		return n
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.interp.Process.Pid))
	if err != nil {
		return n
	}
	if i := bytes.LastIndexByte(data, ')'); i >= 0 {
		// From the state on, utime and stime are fields 12 and 13.
		if f := strings.Fields(string(data[i+1:])); len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			n += u + st
		}
	}
	return n
}

// Snapshot waits for the heap at mark index (a mark written into the
// FIFO: see FIFOMark), which the replay took when it read the
// mark. Marks are asked for in order: the heaps of earlier marks nobody
// asked for are dropped.
func (r *Recorder) Snapshot(ctx context.Context, index int) (*snapshots.Snapshot, error) {
	for {
		r.cutMu.Lock()
		live, ok := r.cuts[index]
		ready := r.cutReady
		if ok {
			for k := range r.cuts {
				if k <= index {
					delete(r.cuts, k)
				}
			}
		}
		r.cutMu.Unlock()
		if ok {
			r.repMu.Lock()
			defer r.repMu.Unlock()
			return r.rep.tree(index, live), nil
		}
		select {
		case r.kick <- struct{}{}:
		default:
		}
		select {
		case <-ready:
		case err := <-r.repErr:
			r.repErr <- err
			r.cutMu.Lock()
			_, ok := r.cuts[index]
			r.cutMu.Unlock()
			if ok {
				// The replay ended right after it took the cut.
				continue
			}
			why := fmt.Sprint(err)
			select {
			case ferr := <-r.fwdErr:
				r.fwdErr <- ferr
				if ferr != nil {
					why = ferr.Error()
				}
			default:
			}
			return nil, fmt.Errorf("%w before the cut: %s%s", ErrEnded, why, r.stderrText())
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// keepCut keeps the heap at mark index for Snapshot.
func (r *Recorder) keepCut(index int, live []liveStack) {
	r.cutMu.Lock()
	defer r.cutMu.Unlock()
	r.cuts[index] = live
	close(r.cutReady)
	r.cutReady = make(chan struct{})
}

// Close ends the interpreter if it still runs and removes the FIFO.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		r.finished = true
		r.hold.Close()
	}
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	if r.interp.ProcessState == nil {
		r.interp.Process.Kill()
		r.interp.Wait()
	}
	// The forwarder ends at its next poll, or once its write to the
	// interpreter, gone now, fails; only then is its descriptor closed.
	<-r.fwdDone
	if r.rd < 0 {
		return nil
	}
	syscall.Close(r.rd)
	r.rd = -1
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
