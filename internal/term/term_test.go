package term

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"unsafe"
)

func TestIsTerminal(t *testing.T) {
	master, slave, err := OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if !IsTerminal(slave) {
		t.Error("a pseudo-terminal is not a terminal")
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if IsTerminal(null) {
		t.Error("/dev/null, a character device, is taken for a terminal")
	}
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is taken for a terminal")
	}
}

// What the program writes to the slave arrives on the master byte for byte,
// and once the slave is closed the master reads to the end of it.
func TestOpenPTYPassesBytes(t *testing.T) {
	master, slave, err := OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	const want = "line one\nno newline\ttab \x1b[1mbold\x1b[0m"
	if _, err := io.WriteString(slave, want); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	got, err := io.ReadAll(master)
	if err != nil && !errors.Is(err, syscall.EIO) {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("master read %q, want %q", got, want)
	}
}

func TestOpenPTYCopiesWidth(t *testing.T) {
	outerMaster, outer, err := OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer outerMaster.Close()
	defer outer.Close()
	ws := winsize{Row: 40, Col: 123}
	if err := ioctl(outer, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		t.Fatal(err)
	}
	if got := Width(outer); got != 123 {
		t.Fatalf("Width = %d, want 123", got)
	}
	master, slave, err := OpenPTY(outer)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if got := Width(slave); got != 123 {
		t.Errorf("the new terminal is %d columns wide, want 123 as the one it was made like", got)
	}
	if got := Width(&bytes.Buffer{}); got != 0 {
		t.Errorf("Width of a buffer = %d, want 0", got)
	}
}

func TestColor(t *testing.T) {
	master, slave, err := OpenPTY(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	for _, tt := range []struct {
		term, noColor string
		want          bool
	}{
		{"xterm-256color", "", true},
		{"xterm-256color", "1", false},
		{"dumb", "", false},
		{"", "", false},
	} {
		t.Setenv("TERM", tt.term)
		t.Setenv("NO_COLOR", tt.noColor)
		if got := Color(slave); got != tt.want {
			t.Errorf("TERM=%q NO_COLOR=%q: Color = %v, want %v", tt.term, tt.noColor, got, tt.want)
		}
	}
	t.Setenv("TERM", "xterm")
	t.Setenv("NO_COLOR", "")
	if Color(&bytes.Buffer{}) {
		t.Error("colour for a buffer")
	}
}
