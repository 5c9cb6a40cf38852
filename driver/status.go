package driver

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/snapshots"
)

// statusLine is the one-line progress display on a terminal: elapsed time,
// stops per breakpoint, the heap at the last stop and its change since the
// stop before. It is rewritten in place with \r and cleared at the end.
type statusLine struct {
	w      io.Writer
	start  time.Time
	names  []string
	stops  map[string]int
	heap   int64
	delta  int64
	seen   bool
	shown  bool
	last   time.Time
	minGap time.Duration
}

func newStatusLine(w io.Writer, start time.Time, plan *breakpoints.Plan) *statusLine {
	s := &statusLine{w: w, start: start, stops: make(map[string]int), minGap: 100 * time.Millisecond}
	for _, bp := range plan.Breakpoints {
		s.names = append(s.names, bp.Name)
	}
	return s
}

// update records a stop and redraws the line, at most every minGap so a
// fast stream of stops does not flood the terminal.
func (s *statusLine) update(bp, phase string, heap int64) {
	if phase == phaseHit {
		s.stops[bp]++
	}
	if s.seen {
		s.delta = heap - s.heap
	}
	s.heap, s.seen = heap, true
	now := time.Now()
	if now.Sub(s.last) < s.minGap {
		return
	}
	s.last = now
	var b strings.Builder
	fmt.Fprintf(&b, "\r%s", now.Sub(s.start).Truncate(time.Second))
	for _, n := range s.names {
		fmt.Fprintf(&b, "  %s: %d", n, s.stops[n])
	}
	fmt.Fprintf(&b, "  heap %s (%s)\x1b[K", snapshots.FormatBytes(s.heap), snapshots.FormatDelta(s.delta))
	io.WriteString(s.w, b.String())
	s.shown = true
}

// clear erases the line.
func (s *statusLine) clear() {
	if s.shown {
		io.WriteString(s.w, "\r\x1b[K")
		s.shown = false
	}
}
