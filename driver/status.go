package driver

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// statusLine is the one-line progress display on a terminal: elapsed time,
// stops per breakpoint, the heap at the last stop and its change since the
// stop before. It is rewritten in place with \r and cleared at the end.
//
// Between stops a goroutine redraws it every tick so the elapsed time keeps
// moving while the program runs; the goroutine starts with the first
// update after the line was cleared and ends with clear.
type statusLine struct {
	w      io.Writer
	start  time.Time
	names  []string
	minGap time.Duration // the shortest time between two redraws at stops
	tick   time.Duration // the redraw period between stops

	mu    sync.Mutex
	stops map[string]int
	heap  int64
	delta int64
	seen  bool
	shown bool
	dirty bool // a stop was recorded but not drawn yet
	last  time.Time
	quit  chan struct{} // closed to end the redraw goroutine; nil when none runs
	done  chan struct{} // closed when the redraw goroutine has ended
}

func newStatusLine(w io.Writer, start time.Time, plan *breakpoints.Plan) *statusLine {
	s := &statusLine{
		w:      w,
		start:  start,
		stops:  make(map[string]int),
		minGap: 100 * time.Millisecond,
		tick:   time.Second,
	}
	for _, bp := range plan.Breakpoints {
		s.names = append(s.names, bp.Name)
	}
	return s
}

// update records a stop and redraws the line, at most every minGap so a
// fast stream of stops does not flood the terminal; a stop not drawn then
// is drawn by the next tick or by clear.
func (s *statusLine) update(bp, phase string, heap int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if phase == phaseHit {
		s.stops[bp]++
	}
	if s.seen {
		s.delta = heap - s.heap
	}
	s.heap, s.seen, s.dirty = heap, true, true
	if now := time.Now(); now.Sub(s.last) >= s.minGap {
		s.draw(now)
	}
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

// draw writes the line. s.mu must be held.
func (s *statusLine) draw(now time.Time) {
	s.last, s.dirty = now, false
	var b strings.Builder
	fmt.Fprintf(&b, "\r%s", now.Sub(s.start).Truncate(time.Second))
	for _, n := range s.names {
		fmt.Fprintf(&b, "  %s: %d", n, s.stops[n])
	}
	fmt.Fprintf(&b, "  heap %s (%s)\x1b[K", snapshots.FormatBytes(s.heap), snapshots.FormatDelta(s.delta))
	io.WriteString(s.w, b.String())
	s.shown = true
}

// clear ends the redraw goroutine, draws a stop the throttle held back so
// the last state is written, and erases the line. Nothing is written after
// it returns until the next update.
func (s *statusLine) clear() {
	s.mu.Lock()
	quit, done := s.quit, s.done
	s.quit, s.done = nil, nil
	if quit != nil {
		close(quit)
	}
	if s.dirty {
		s.draw(time.Now())
	}
	if s.shown {
		io.WriteString(s.w, "\r\x1b[K")
		s.shown = false
	}
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}
