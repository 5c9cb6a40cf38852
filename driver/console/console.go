package console

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Console stands between the target and the terminal its output goes to.
// The target writes to a pseudo-terminal, so it still sees a terminal
// (its stdio stays line-buffered, its colours stay on), and snapctl copies
// what it writes to the real terminal, through the status line when there
// is one, which erases itself first: the program's lines and the status
// line never share a line.
type Console struct {
	status  *Status // nil: the output is copied as it comes
	masters []*os.File
	slaves  []*os.File // snapctl's copies, closed at the end (closeSlaves)
	copies  sync.WaitGroup
	// tail keeps the end of what the shared pseudo-terminal carried, when
	// stdout and stderr share one: valgrind writes its stderr straight to
	// it, and says there what stops it before its log is open.
	tail *Tail
}

// Open returns the writers the target gets for stdout and stderr:
// a pseudo-terminal for each that is a terminal, the writer itself for the
// others. When both are the same terminal, they share one pseudo-terminal,
// as they share the real one: the order of the target's stdout and stderr
// Lines is kept, and the console keeps the tail of both.
func Open(status *Status, stdout, stderr io.Writer) (*Console, io.Writer, io.Writer, error) {
	c := &Console{status: status}
	wrap := func(w io.Writer, tail *Tail) (io.Writer, error) {
		if !term.IsTerminal(w) {
			return w, nil
		}
		master, slave, err := term.OpenPTY(w)
		if err != nil {
			c.Close(0)
			return nil, err
		}
		c.masters, c.slaves = append(c.masters, master), append(c.slaves, slave)
		c.copies.Add(1)
		go c.copy(w, master, tail)
		return slave, nil
	}
	if stderr == stdout || term.Same(stdout, stderr) {
		c.tail = NewTail(io.Discard, TailMax)
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
func (c *Console) copy(w io.Writer, master *os.File, tail *Tail) {
	defer c.copies.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := master.Read(buf)
		if n > 0 {
			if tail != nil {
				tail.Write(buf[:n])
			}
			if c.status != nil {
				c.status.Output(w, buf[:n])
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
func (c *Console) closeSlaves() {
	for _, s := range c.slaves {
		s.Close()
	}
	c.slaves = nil
}

// Drain closes snapctl's copies of the slaves and waits up to grace for
// the copies to reach the end of the target's output, which they do once
// every process that held a slave has closed it.
func (c *Console) Drain(grace time.Duration) {
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

// Close drains the console (see drain), then closes the masters. A
// process the target left behind that still holds a slave loses what it
// writes later.
func (c *Console) Close(grace time.Duration) {
	c.Drain(grace)
	for _, m := range c.masters {
		m.Close()
	}
	c.copies.Wait()
	if c.status != nil {
		c.status.EndOutput()
	}
}

// Tail is the tail the console keeps of the target's shared terminal, nil
// when stdout and stderr are not one terminal.
func (c *Console) Tail() *Tail { return c.tail }

// Status is the one-line progress display on a terminal: elapsed time,
// then what snapctl is doing while the run starts ("starting valgrind...")
// and, once the program runs, the snapshots (natively, measurements) taken
// per breakpoint, each count named ("request: 14 snapshots"), the heap at
// the last stop and its change since the stop before. It is rewritten in
// place and erased at the end.
//
// It moves the cursor with "\r" alone and erases with spaces, never with an
// escape sequence, and it is cut to the terminal's width so it never wraps.
//
// The target's output to the same terminal passes through output (see
// Console.go), which erases the line before the output and leaves it off
// while the output's last line is unfinished: the program's lines and the
// status line never share a line.
//
// Between stops a goroutine redraws it every tick so the elapsed time keeps
// moving while the program runs; the goroutine starts with the first
// Update after the line was cleared and ends with clear.
type Status struct {
	w      io.Writer
	start  time.Time
	names  []string
	unit   string        // what a count counts: "snapshot", natively "measurement"
	width  int           // the terminal's columns; 0 when unknown
	minGap time.Duration // the shortest time between two redraws at stops
	tick   time.Duration // the redraw period between stops

	mu      sync.Mutex
	phase   string // what snapctl is doing before the first stop, "" once the program runs
	stops   map[string]int
	heap    int64
	delta   int64
	seen    bool
	screen  screen
	redraws redraws
}

// screen is what the terminal shows of the status line.
type screen struct {
	drawn   int       // the length of the line on screen, 0 when none is
	dirty   bool      // a stop was recorded but not drawn yet
	midLine bool      // the target's output ended without a newline
	lastOut io.Writer // where the target's output last went
	last    time.Time // when the line was last drawn
}

// redraws is the goroutine that redraws the line between stops.
type redraws struct {
	quit chan struct{} // closed to end the redraw goroutine; nil when none runs
	done chan struct{} // closed when the redraw goroutine has ended
}

func NewStatus(w io.Writer, start time.Time, names []string, unit string) *Status {
	s := &Status{
		w:      w,
		start:  start,
		width:  term.Width(w),
		stops:  make(map[string]int),
		minGap: 100 * time.Millisecond,
		tick:   time.Second,
		names:  names,
		unit:   unit,
	}
	return s
}

// SetPhase shows what snapctl is doing until the program runs; "" shows
// the stops.
func (s *Status) SetPhase(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.screen.dirty = phase, true
	s.draw(time.Now())
	s.startRedraw()
}

// Update records a stop and redraws the line, at most every minGap so a
// fast stream of stops does not flood the terminal; a stop not drawn then
// is drawn by the next tick or by clear.
func (s *Status) Update(bp, phase string, heap int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if phase == runjson.PhaseHit {
		s.stops[bp]++
	}
	if s.seen {
		s.delta = heap - s.heap
	}
	s.heap, s.seen, s.screen.dirty = heap, true, true
	s.phase = ""
	if now := time.Now(); now.Sub(s.screen.last) >= s.minGap {
		s.draw(now)
	}
	s.startRedraw()
}

// Output writes p, the target's Output, to w, which shows on the same
// terminal as the line: the line is erased first, and drawn again by the
// next stop or tick once the Output's last line is finished.
func (s *Status) Output(w io.Writer, p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.screen.drawn > 0 {
		s.erase() // drawn again by the next stop or tick
	}
	if len(p) > 0 {
		s.screen.midLine, s.screen.lastOut = p[len(p)-1] != '\n', w
	}
	return w.Write(p)
}

// EndOutput ends the target's last line when the target did not, so that
// what snapctl prints next starts on a line of its own.
func (s *Status) EndOutput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.screen.midLine {
		io.WriteString(s.screen.lastOut, "\n")
		s.screen.midLine = false
	}
}

// startRedraw starts the redraw goroutine unless it runs. s.mu must be
// held.
func (s *Status) startRedraw() {
	if s.redraws.quit == nil {
		s.redraws.quit, s.redraws.done = make(chan struct{}), make(chan struct{})
		go s.redraw(s.redraws.quit, s.redraws.done)
	}
}

// redraw draws the line every tick until quit is closed.
func (s *Status) redraw(quit, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case now := <-t.C:
			s.mu.Lock()
			select {
			case <-quit: // clear ran while this tick waited for the lock
				s.mu.Unlock()
				return
			default:
			}
			s.draw(now)
			s.mu.Unlock()
		}
	}
}

// draw writes the line over the one on screen, unless the target's output
// stopped in the middle of a line. s.mu must be held.
func (s *Status) draw(now time.Time) {
	if s.screen.midLine {
		return
	}
	s.screen.last, s.screen.dirty = now, false
	var b strings.Builder
	b.WriteString(now.Sub(s.start).Truncate(time.Second).String())
	if s.phase != "" {
		fmt.Fprintf(&b, "  %s...", s.phase)
	} else {
		for _, n := range s.names {
			if c := s.stops[n]; c == 1 {
				fmt.Fprintf(&b, "  %s: 1 %s", n, s.unit)
			} else {
				fmt.Fprintf(&b, "  %s: %d %ss", n, c, s.unit)
			}
		}
		if s.seen {
			fmt.Fprintf(&b, "  heap %s (%s)", snapshots.FormatBytes(s.heap), snapshots.FormatDelta(s.delta))
		}
	}
	// A breakpoint's name may hold anything; ESC must not reach the
	// terminal raw.
	line := snapshots.Printable(b.String())
	// The last column stays free: a line that fills it makes some
	// terminals wrap, and "\r" would then return to the wrong line.
	if s.width > 1 && len(line) > s.width-1 {
		line = line[:s.width-1]
	}
	pad := max(s.screen.drawn-len(line), 0)
	io.WriteString(s.w, "\r"+line+strings.Repeat(" ", pad))
	s.screen.drawn = len(line)
}

// erase blanks the line on screen and returns the cursor to its start.
// s.mu must be held.
func (s *Status) erase() {
	io.WriteString(s.w, "\r"+strings.Repeat(" ", s.screen.drawn)+"\r")
	s.screen.drawn = 0
}

// Clear ends the redraw goroutine, draws a stop the throttle held back so
// the last state is written, and erases the line. Nothing is written after
// it returns until the next update.
func (s *Status) Clear() {
	if s == nil {
		return
	}
	s.mu.Lock()
	quit, done := s.redraws.quit, s.redraws.done
	s.redraws.quit, s.redraws.done = nil, nil
	if quit != nil {
		close(quit)
	}
	if s.screen.dirty {
		s.draw(time.Now())
	}
	if s.screen.drawn > 0 {
		s.erase()
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Tail passes everything on to w and keeps the last bytes written,
// so that a message can quote what a child said on its stderr, which the
// user's terminal also got (valgrind writes there what stops it before
// its log file is open: a bad option, a log file it cannot create).
type Tail struct {
	w   io.Writer
	max int

	mu   sync.Mutex
	tail []byte
}

// TailMax is how much of a child's stderr a Tail keeps.
const TailMax = 4096

func NewTail(w io.Writer, max int) *Tail {
	return &Tail{w: w, max: max}
}

func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// Lines returns the last n complete or partial Lines kept.
func (t *Tail) Lines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.tail), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SameFile reports whether a and b write to the same place: the same
// writer, or open files on one inode (a shell's 2>&1).
func SameFile(a, b io.Writer) bool {
	if a == b {
		return true
	}
	fa, oka := a.(*os.File)
	fb, okb := b.(*os.File)
	if !oka || !okb || fa == nil || fb == nil {
		return false
	}
	sa, erra := fa.Stat()
	sb, errb := fb.Stat()
	return erra == nil && errb == nil && os.SameFile(sa, sb)
}
