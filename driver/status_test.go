package driver

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/breakpoints"
)

func TestStatusLine(t *testing.T) {
	plan := &breakpoints.Plan{Breakpoints: []breakpoints.Breakpoint{{Name: "request"}, {Name: "idle"}}}
	var buf bytes.Buffer
	s := newStatusLine(&buf, time.Now().Add(-3*time.Second), plan)
	s.minGap = 0
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
