package gdb

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

// lateEvents is a debugger whose reader has read a record that reaches
// Events only a while later, as mi.Client's pump may deliver it on a
// loaded machine after the result of the command gdb printed it before.
type lateEvents struct {
	quietGDB
	pushed, sent atomic.Uint64
}

func (d *lateEvents) Queued() (pushed, sent uint64) { return d.pushed.Load(), d.sent.Load() }

// Drain takes the records gdb printed before it was called, also one
// still on its way to Events: valgrind's connection stop, left behind,
// was a stop the run did not expect.
func TestDrainWaitsForQueuedRecords(t *testing.T) {
	t.Parallel()
	d := &lateEvents{quietGDB: newQuietGDB(4)}
	d.pushed.Store(1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		// As mi.Client's pump: sent counts the record once it is in
		// the channel, after Drain may have read it.
		d.events <- &mi.Record{Type: mi.TypeExec, Class: "stopped", Seq: 1}
		time.Sleep(50 * time.Millisecond)
		d.sent.Add(1)
	}()
	if waited := drain(t, NewConn(d, 0, time.Second, nil)); waited < 40*time.Millisecond {
		t.Errorf("Drain returned after %v, before the record came", waited)
	}
	select {
	case rec := <-d.events:
		t.Errorf("Drain left %+v in Events", rec)
	default:
	}
}

// A record another reader took before Drain began, which the pump counts
// as sent only a while after the send, with no record after it: Drain
// returns once it is counted. It waited for ever so, gdb idle, in a call
// that finishCalls ran on (a busy .ci/run).
func TestDrainAfterAnUncountedRecord(t *testing.T) {
	t.Parallel()
	d := &lateEvents{quietGDB: newQuietGDB(4)}
	d.pushed.Store(1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		d.sent.Add(1)
	}()
	drain(t, NewConn(d, 0, time.Second, nil))
}

// drain runs c.Drain and returns how long it took; the test fails when it
// has not returned within 10 s (longer on a loaded machine), 100 times
// what the tests' records take to come.
func drain(t *testing.T, c *Conn) time.Duration {
	t.Helper()
	start := time.Now()
	drained := make(chan struct{})
	go func() { c.Drain(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(testenv.Scaled(10 * time.Second)):
		t.Fatal("Drain has not returned within 10 s")
	}
	return time.Since(start)
}
