package console

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/runjson"
)

// The target's stdout and stderr on one terminal share one pseudo-terminal,
// whose output reaches the real terminal through the status line; a writer
// that is no terminal is passed as it is.
func TestConsole(t *testing.T) {
	master, tty, err := term.OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	status := NewStatus(tty, time.Now(), []string{"request"}, "snapshot")
	status.tick = time.Hour

	con, stdout, stderr, err := Open(status, tty, tty)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != stderr || stdout == io.Writer(tty) || !term.IsTerminal(stdout) {
		t.Fatalf("stdout %v and stderr %v: want one new terminal for both", stdout, stderr)
	}
	status.Update("request", runjson.PhaseHit, 1024)
	io.WriteString(stdout, "out 1\n")
	io.WriteString(stderr, "unfinished")
	con.Close(5 * time.Second)
	status.Clear()
	tty.Close()
	got, _ := io.ReadAll(master)
	const line = "0s  request: 1 snapshot  heap 1.0 KiB (0 B)"
	erase := "\r" + string(bytes.Repeat([]byte(" "), len(line))) + "\r"
	if want := "\r" + line + erase + "out 1\nunfinished\n"; string(got) != want {
		t.Errorf("the terminal got\n %q\nwant %q", got, want)
	}

	var buf bytes.Buffer
	con, stdout, stderr, err = Open(status, &buf, &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer con.Close(0)
	if stdout != io.Writer(&buf) || stderr != io.Writer(&buf) {
		t.Errorf("a buffer was replaced: %v %v", stdout, stderr)
	}
}
