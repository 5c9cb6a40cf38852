package console

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

func TestStatusLine(t *testing.T) {
	names := []string{"request", "idle"}
	var buf bytes.Buffer
	s := NewStatus(&buf, time.Now().Add(-3*time.Second), names, "snapshot")
	s.minGap = 0
	s.tick = time.Hour // only the stops draw; buf is read unlocked
	s.Update("request", runjson.PhaseHit, 1024)
	s.Update("request", runjson.PhaseHit, 1040)
	s.Update("request", runjson.PhaseReturn, 1056)
	out := buf.String()
	last := out[strings.LastIndex(out, "\r"):]
	for _, want := range []string{"3s", "request: 2 snapshots", "idle: 0 snapshots", "heap 1.0 KiB", "(+16 B)"} {
		if !strings.Contains(last, want) {
			t.Errorf("status line %q lacks %q", last, want)
		}
	}
	s.Clear()
	if want := "\r" + strings.Repeat(" ", len(last)-1) + "\r"; !strings.HasSuffix(buf.String(), want) {
		t.Errorf("clear did not erase the line: %q", buf.String())
	}
	if strings.Contains(buf.String(), "\x1b") {
		t.Errorf("escape sequence in the status line: %q", buf.String())
	}
	n := buf.Len()
	s.Clear()
	if buf.Len() != n {
		t.Error("a second clear wrote again")
	}
}

// A stop the throttle held back is drawn before the line is cleared, so
// the last state is never lost.
func TestStatusLineDrawsFinalStateBeforeClear(t *testing.T) {
	names := []string{"request"}
	var buf testenv.Buffer
	s := NewStatus(&buf, time.Now(), names, "snapshot")
	s.minGap = time.Hour
	s.tick = time.Hour
	s.Update("request", runjson.PhaseHit, 1024)
	s.Update("request", runjson.PhaseHit, 2048) // held back by minGap
	if out := buf.String(); strings.Contains(out, "request: 2") {
		t.Fatalf("the throttle did not hold the second stop back: %q", out)
	}
	s.Clear()
	out := strings.TrimRight(buf.String(), " \r")
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
	names := []string{"request"}
	var buf testenv.Buffer
	// Elapsed is 2.8s at the stop; a tick shows 3s within ~200 ms.
	s := NewStatus(&buf, time.Now().Add(-2800*time.Millisecond), names, "snapshot")
	s.tick = 20 * time.Millisecond
	s.Update("request", runjson.PhaseHit, 1024)
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
	s.Clear()
	n := len(buf.String())
	time.Sleep(100 * time.Millisecond)
	if got := buf.String(); len(got) != n {
		t.Errorf("written after clear: %q", got[n:])
	}
	// An update after clear starts the redraws again; clear ends them.
	s.Update("request", runjson.PhaseHit, 2048)
	s.Clear()
}

// The program's output erases the line first; a line the program left
// unfinished keeps the status line off until it ends, and snapctl ends it
// at the end of the run.
func TestStatusLineGivesWayToOutput(t *testing.T) {
	names := []string{"request"}
	var status, prog bytes.Buffer
	// Both buffers stand for one terminal: the test interleaves them by
	// recording each write in order.
	var screen strings.Builder
	s := NewStatus(writerFunc(func(p []byte) { status.Write(p); screen.Write(p) }), time.Now(), names, "snapshot")
	s.minGap = 0
	s.tick = time.Hour
	out := writerFunc(func(p []byte) { prog.Write(p); screen.Write(p) })

	s.Update("request", runjson.PhaseHit, 1024)
	s.Output(out, []byte("request 1 done\n"))
	s.Update("request", runjson.PhaseHit, 1056)
	s.Output(out, []byte("prompt> "))
	s.Update("request", runjson.PhaseHit, 1088) // not drawn: the line is unfinished
	s.Clear()
	s.EndOutput()

	const line1 = "0s  request: 1 snapshot  heap 1.0 KiB (0 B)"
	const line2 = "0s  request: 2 snapshots  heap 1.0 KiB (+32 B)"
	want := "\r" + line1 + "\r" + strings.Repeat(" ", len(line1)) + "\r" +
		"request 1 done\n" +
		"\r" + line2 + "\r" + strings.Repeat(" ", len(line2)) + "\r" +
		"prompt> " + "\n"
	if got := screen.String(); got != want {
		t.Errorf("screen:\n got %q\nwant %q", got, want)
	}
	if got := prog.String(); got != "request 1 done\nprompt> \n" {
		t.Errorf("the program's output reached the terminal as %q", got)
	}
}

// The line shows what snapctl does before the program runs, and is cut to
// the terminal's width.
func TestStatusLinePhaseAndWidth(t *testing.T) {
	names := []string{"request"}
	var buf bytes.Buffer
	s := NewStatus(&buf, time.Now(), names, "snapshot")
	s.tick = time.Hour
	s.SetPhase("starting valgrind")
	s.width = 12
	s.SetPhase("")
	s.Clear()
	want := "\r0s  starting valgrind..." +
		"\r0s  request" + strings.Repeat(" ", len("0s  starting valgrind...")-len("0s  request")) +
		"\r" + strings.Repeat(" ", len("0s  request")) + "\r"
	if got := buf.String(); got != want {
		t.Errorf("wrote\n %q\nwant %q", got, want)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// Each count says what it counts: snapshots under massif, measurements
// natively, one or many.
func TestStatusLineLabelsCounts(t *testing.T) {
	for _, tc := range []struct {
		unit string
		want string
	}{
		{"snapshot", "0s  command: 1 snapshot  reset: 0 snapshots  heap 1.0 KiB (0 B)"},
		{"measurement", "0s  command: 1 measurement  reset: 0 measurements  heap 1.0 KiB (0 B)"},
	} {
		var buf bytes.Buffer
		s := NewStatus(&buf, time.Now(), []string{"command", "reset"}, tc.unit)
		s.minGap, s.tick = 0, time.Hour
		s.Update("command", runjson.PhaseHit, 1024)
		s.Clear()
		if got := strings.Trim(buf.String(), "\r "); got != tc.want {
			t.Errorf("unit %q: line %q, want %q", tc.unit, got, tc.want)
		}
	}
}

// A control character in a breakpoint's name is escaped on the status
// line: nothing but snapctl's own "\r" moves the cursor.
func TestStatusLineEscapesNames(t *testing.T) {
	names := []string{"req\x1b[2J"}
	var buf bytes.Buffer
	s := NewStatus(&buf, time.Now(), names, "snapshot")
	s.minGap = 0
	s.tick = time.Hour
	s.Update("req\x1b[2J", runjson.PhaseHit, 1024)
	s.Clear()
	if out := buf.String(); strings.Contains(out, "\x1b") || !strings.Contains(out, `req\x1b[2J: 1`) {
		t.Errorf("status line %q, want the name escaped", out)
	}
}
