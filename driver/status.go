package driver

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// statusLine is the one-line progress display on a terminal: elapsed time,
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
// console.go), which erases the line before the output and leaves it off
// while the output's last line is unfinished: the program's lines and the
// status line never share a line.
//
// Between stops a goroutine redraws it every tick so the elapsed time keeps
// moving while the program runs; the goroutine starts with the first
// update after the line was cleared and ends with clear.
type statusLine struct {
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
	drawn   int       // the length of the line on screen, 0 when none is
	dirty   bool      // a stop was recorded but not drawn yet
	midLine bool      // the target's output ended without a newline
	lastOut io.Writer // where the target's output last went
	last    time.Time
	quit    chan struct{} // closed to end the redraw goroutine; nil when none runs
	done    chan struct{} // closed when the redraw goroutine has ended
}

func newStatusLine(w io.Writer, start time.Time, plan *plan.Plan) *statusLine {
	s := &statusLine{
		w:      w,
		start:  start,
		width:  term.Width(w),
		stops:  make(map[string]int),
		minGap: 100 * time.Millisecond,
		tick:   time.Second,
		unit:   "snapshot",
	}
	if plan.Backend == BackendNative {
		s.unit = "measurement"
	}
	for _, bp := range plan.Breakpoints {
		s.names = append(s.names, bp.Name)
	}
	return s
}

// setPhase shows what snapctl is doing until the program runs; "" shows
// the stops.
func (s *statusLine) setPhase(phase string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phase, s.dirty = phase, true
	s.draw(time.Now())
	s.startRedraw()
}

// update records a stop and redraws the line, at most every minGap so a
// fast stream of stops does not flood the terminal; a stop not drawn then
// is drawn by the next tick or by clear.
func (s *statusLine) update(bp, phase string, heap int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if phase == runjson.PhaseHit {
		s.stops[bp]++
	}
	if s.seen {
		s.delta = heap - s.heap
	}
	s.heap, s.seen, s.dirty = heap, true, true
	s.phase = ""
	if now := time.Now(); now.Sub(s.last) >= s.minGap {
		s.draw(now)
	}
	s.startRedraw()
}

// output writes p, the target's output, to w, which shows on the same
// terminal as the line: the line is erased first, and drawn again by the
// next stop or tick once the output's last line is finished.
func (s *statusLine) output(w io.Writer, p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drawn > 0 {
		s.erase() // drawn again by the next stop or tick
	}
	if len(p) > 0 {
		s.midLine, s.lastOut = p[len(p)-1] != '\n', w
	}
	return w.Write(p)
}

// endOutput ends the target's last line when the target did not, so that
// what snapctl prints next starts on a line of its own.
func (s *statusLine) endOutput() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.midLine {
		io.WriteString(s.lastOut, "\n")
		s.midLine = false
	}
}

// startRedraw starts the redraw goroutine unless it runs. s.mu must be
// held.
func (s *statusLine) startRedraw() {
	if s.quit == nil {
		s.quit, s.done = make(chan struct{}), make(chan struct{})
		go s.redraw(s.quit, s.done)
	}
}

// redraw draws the line every tick until quit is closed.
func (s *statusLine) redraw(quit, done chan struct{}) {
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
func (s *statusLine) draw(now time.Time) {
	if s.midLine {
		return
	}
	s.last, s.dirty = now, false
	var b strings.Builder
	b.WriteString(now.Sub(s.start).Truncate(time.Second).String())
	if s.phase != "" {
		fmt.Fprintf(&b, "  %s...", s.phase)
	} else {
		for _, n := range s.names {
			fmt.Fprintf(&b, "  %s: %s", n, plural(s.stops[n], s.unit))
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
	pad := max(s.drawn-len(line), 0)
	io.WriteString(s.w, "\r"+line+strings.Repeat(" ", pad))
	s.drawn = len(line)
}

// erase blanks the line on screen and returns the cursor to its start.
// s.mu must be held.
func (s *statusLine) erase() {
	io.WriteString(s.w, "\r"+strings.Repeat(" ", s.drawn)+"\r")
	s.drawn = 0
}

// clear ends the redraw goroutine, draws a stop the throttle held back so
// the last state is written, and erases the line. Nothing is written after
// it returns until the next update.
func (s *statusLine) clear() {
	if s == nil {
		return
	}
	s.mu.Lock()
	quit, done := s.quit, s.done
	s.quit, s.done = nil, nil
	if quit != nil {
		close(quit)
	}
	if s.dirty {
		s.draw(time.Now())
	}
	if s.drawn > 0 {
		s.erase()
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}
