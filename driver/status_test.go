package driver

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestStatusLine(t *testing.T) {
	plan := &breakpoints.Plan{Breakpoints: []breakpoints.Breakpoint{{Name: "request"}, {Name: "idle"}}}
	var buf bytes.Buffer
	s := newStatusLine(&buf, time.Now().Add(-3*time.Second), plan)
	s.minGap = 0
	s.tick = time.Hour // only the stops draw; buf is read unlocked
	s.update("request", phaseHit, 1024)
	s.update("request", phaseHit, 1040)
	s.update("request", phaseReturn, 1056)
	out := buf.String()
	last := out[strings.LastIndex(out, "\r"):]
	for _, want := range []string{"3s", "request: 2", "idle: 0", "heap 1.0 KiB", "(+16 B)"} {
		if !strings.Contains(last, want) {
			t.Errorf("status line %q lacks %q", last, want)
		}
	}
	s.clear()
	if !strings.HasSuffix(buf.String(), "\r\x1b[K") {
		t.Errorf("clear did not erase the line: %q", buf.String())
	}
	n := buf.Len()
	s.clear()
	if buf.Len() != n {
		t.Error("a second clear wrote again")
	}
}

// A stop the throttle held back is drawn before the line is cleared, so
// the last state is never lost.
func TestStatusLineDrawsFinalStateBeforeClear(t *testing.T) {
	plan := &breakpoints.Plan{Breakpoints: []breakpoints.Breakpoint{{Name: "request"}}}
	var buf testenv.Buffer
	s := newStatusLine(&buf, time.Now(), plan)
	s.minGap = time.Hour
	s.tick = time.Hour
	s.update("request", phaseHit, 1024)
	s.update("request", phaseHit, 2048) // held back by minGap
	if out := buf.String(); strings.Contains(out, "request: 2") {
		t.Fatalf("the throttle did not hold the second stop back: %q", out)
	}
	s.clear()
	out := strings.TrimSuffix(buf.String(), "\r\x1b[K")
	last := out[strings.LastIndex(out, "\r"):]
	for _, want := range []string{"request: 2", "heap 2.0 KiB", "(+1.0 KiB)"} {
		if !strings.Contains(last, want) {
			t.Errorf("line drawn before clear %q lacks %q", last, want)
		}
	}
}

// Between stops the line is redrawn every tick, so the elapsed time moves;
// nothing is written after clear.
func TestStatusLineTicksBetweenStops(t *testing.T) {
	plan := &breakpoints.Plan{Breakpoints: []breakpoints.Breakpoint{{Name: "request"}}}
	var buf testenv.Buffer
	// Elapsed is 2.8s at the stop; a tick shows 3s within ~200 ms.
	s := newStatusLine(&buf, time.Now().Add(-2800*time.Millisecond), plan)
	s.tick = 20 * time.Millisecond
	s.update("request", phaseHit, 1024)
	if out := buf.String(); !strings.HasPrefix(out, "\r2s ") {
		t.Fatalf("first line %q, want it to show 2s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "\r3s ") {
		if time.Now().After(deadline) {
			t.Fatalf("no redraw showed 3s elapsed: %q", buf.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.clear()
	n := len(buf.String())
	time.Sleep(100 * time.Millisecond)
	if got := buf.String(); len(got) != n {
		t.Errorf("written after clear: %q", got[n:])
	}
	// An update after clear starts the redraws again; clear ends them.
	s.update("request", phaseHit, 2048)
	s.clear()
}
