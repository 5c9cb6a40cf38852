package gdb

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
)

// quietGDB is a debugger that answers every command with ^done and
// delivers the records a test puts in events.
type quietGDB struct {
	events chan *mi.Record
	done   chan struct{}
}

func newQuietGDB(buffered int) quietGDB {
	return quietGDB{events: make(chan *mi.Record, buffered), done: make(chan struct{})}
}

func (d *quietGDB) Send(context.Context, string, ...string) (*mi.Result, error) {
	return &mi.Result{}, nil
}

func (d *quietGDB) SendBatch(_ context.Context, cmds []mi.Command) ([]*mi.Result, []error) {
	return make([]*mi.Result, len(cmds)), make([]error, len(cmds))
}
func (d *quietGDB) Events() <-chan *mi.Record { return d.events }
func (d *quietGDB) Done() <-chan struct{}     { return d.done }
func (d *quietGDB) Err() error                { return nil }

// slowStop is a debugger whose target stops, and says so, a while after
// the first interrupt: a loaded machine, where gdb reports the stop late.
type slowStop struct {
	quietGDB
	after time.Duration
	once  sync.Once
	sent  int
}

func (d *slowStop) interrupt(context.Context) error {
	d.sent++
	d.once.Do(func() {
		time.AfterFunc(d.after, func() {
			d.events <- &mi.Record{Type: mi.TypeExec, Class: "stopped"}
		})
	})
	return nil
}

// Interrupt's wait is stretched by the machine's load: at a load of 3
// processes a processor, a target whose stop is reported 4.5 s after the
// interrupt (longer than a quiet machine's 3 s) is seen stopped, and one
// on a quiet machine is given up after about 3 s, the interrupt sent
// again every 500 ms meanwhile.
func TestInterruptStretchedByLoad(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stretch float64
		stopped bool
	}{{3, true}, {1, false}} {
		t.Run(fmt.Sprint(tc.stretch), func(t *testing.T) {
			t.Parallel()
			d := &slowStop{quietGDB: newQuietGDB(1), after: 4500 * time.Millisecond}
			c := NewConn(d, 0, time.Second, nil)
			c.SetInterrupt(d.interrupt)
			c.SetStretch(func() float64 { return tc.stretch })
			start := time.Now()
			rec := c.Interrupt()
			took := time.Since(start)
			if got := rec != nil; got != tc.stopped {
				t.Errorf("load stretch %v: Interrupt after %v gave %v, want the stop %v", tc.stretch, took, rec, tc.stopped)
			}
			if !tc.stopped && (took < interruptWait || d.sent < 2) {
				t.Errorf("quiet machine: Interrupt gave up after %v and %d interrupts, want %v and one every %v", took, d.sent, interruptWait, interruptResend)
			}
		})
	}
}

// The stretch is the load of the last minute per processor, from 1 to 20.
func TestStretchOf(t *testing.T) {
	for _, tc := range []struct {
		loadavg string
		cpus    int
		want    float64
	}{
		{"0.52 0.58 0.59 3/1123 4242", 2, 1},
		{"8.40 6.00 5.00 9/1123 4242", 2, 4.2},
		{"400.0 6.00 5.00 9/1123 4242", 2, 20},
		{"", 2, 1},
		{"x 1 1", 2, 1},
	} {
		if got := stretchOf(tc.loadavg, tc.cpus); got != tc.want {
			t.Errorf("stretchOf(%q, %d) = %v, want %v", tc.loadavg, tc.cpus, got, tc.want)
		}
	}
}
