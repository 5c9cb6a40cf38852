package tracer

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Counter is the kernel's count of the hits (uprobes.Counter): which
// measured hit a thread's stop is, and whether one is on its way.
type Counter interface {
	// Peek is the measured hit thread tid stopped at, not taken:
	// breakpoint id and hit (0: a held hit); ok false when the signal
	// was the program's own.
	Peek(tid int) (id int, hit uint64, ok bool)
	// Take is Peek, and takes it: the hold it set ends.
	Take(tid int) (id int, hit uint64, ok bool)
	// Measuring reports whether a measured stop is on its way.
	Measuring() (tid int, ok bool)
}

// Hit is a measured hit, every thread stopped.
type Hit struct {
	Tid int
	// ID is the counter's breakpoint; N the hit, after skip.
	ID int
	N  uint64
	// PC is where the thread stopped.
	PC uint64
}

// Signals are the stops' signals: Stop a measured hit's, Hold a held
// hit's (0: held hits stop with Stop, as hit 0).
type Signals struct {
	Stop, Hold syscall.Signal
}

// Loop takes the process's stops until it ends (its exit, a fatal
// signal, exec: the event is returned), stop is closed (ok false), or
// measure fails. At a measured hit every other thread is stopped, the
// hit taken, measure called with every thread stopped, and every thread
// resumed without the tracer's signals. A held hit's thread stays
// stopped until then (its stop signal is not passed), or goes on at once
// when no measured stop is on its way; a thread whose hold outlasts the
// tracer's patience goes on too. The program's own use of the signals
// reaches it.
// resumed, when not nil, is called once they run again.
//
// The whole loop runs on the tracer's thread, measure and resumed too
// (with Stopped to read the threads), so that a measured stop hands
// nothing between threads.
//
// Its wait for the next event blocks in the kernel; stop's closing
// wakes it with the hold signal (or the stop signal) sent to the
// process, a stop that Loop resumes without the signal (or, the stop
// signal, passes on: neither is caught by the program), again each
// patience until the loop has ended.
func (t *Tracer) Loop(c Counter, sigs Signals, stop <-chan struct{}, measure func(Hit, Stopped) error, resumed func()) (end Event, ok bool, err error) {
	done := make(chan struct{})
	defer close(done)
	if stop != nil {
		kick := sigs.Hold
		if kick == 0 {
			kick = sigs.Stop
		}
		// Read here, while the tracer's thread waits for requests:
		// Config.Patience is called on one goroutine at a time.
		every := t.patience()
		go func() {
			select {
			case <-stop:
			case <-done:
				return
			}
			for {
				syscall.Kill(t.pid, kick)
				select {
				case <-done:
					return
				case <-time.After(every):
				}
			}
		}()
	}
	ran := false
	t.do(func() {
		ran = true
		t.kicked = stop != nil
		defer func() { t.kicked = false }()
		end, ok, err = t.loop(c, sigs, stop, measure, resumed)
	})
	if !ran {
		return end, false, ErrEnded
	}
	return end, ok, err
}

func (t *Tracer) loop(c Counter, sigs Signals, stop <-chan struct{}, measure func(Hit, Stopped) error, resumed func()) (end Event, ok bool, err error) {
	for {
		ev, ok, err := t.next(stop)
		if err != nil || !ok {
			return ev, ok, err
		}
		if ev.Kind != Signal {
			return ev, true, nil
		}
		measured, err := t.signalled(c, sigs, ev, measure)
		if err != nil {
			return Event{}, false, err
		}
		if measured && resumed != nil {
			resumed()
		}
	}
}

// signalled takes the stop of a watched signal.
func (t *Tracer) signalled(c Counter, sigs Signals, ev Event, measure func(Hit, Stopped) error) (measured bool, err error) {
	if sigs.Hold != 0 && ev.Sig == sigs.Hold {
		t.holdOrGo(c, ev.Tid)
		return false, nil
	}
	_, hit, ok := c.Peek(ev.Tid)
	switch {
	case !ok:
		// The program's own signal.
		t.cont(ev.Tid, ev.Sig)
		return false, nil
	case hit == 0:
		c.Take(ev.Tid)
		t.holdOrGo(c, ev.Tid)
		return false, nil
	}
	more, err := t.stopAllWatched()
	if err != nil {
		return false, fmt.Errorf("at measured hit %d of thread %d: %w", hit, ev.Tid, err)
	}
	var hits []Hit
	for _, e := range append([]Event{ev}, more...) {
		id, n, ok := c.Take(e.Tid)
		switch {
		case !ok:
			t.deliver(e.Tid, e.Sig)
		case n > 0:
			h := Hit{Tid: e.Tid, ID: id, N: n}
			var regs unix.PtraceRegs
			if unix.PtraceGetRegs(e.Tid, &regs) == nil {
				h.PC = regs.Rip
			}
			hits = append(hits, h)
		}
	}
	for _, h := range hits {
		if err := measure(h, Stopped{t}); err != nil {
			t.resumeAll()
			return false, err
		}
	}
	t.resumeAll()
	return len(hits) > 0, nil
}

// holdOrGo keeps a held thread stopped while a measured stop is on its
// way, and lets it go without the signal when none is.
func (t *Tracer) holdOrGo(c Counter, tid int) {
	if _, ok := c.Measuring(); ok {
		t.hold(tid)
		return
	}
	t.cont(tid, 0)
}
