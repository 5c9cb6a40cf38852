package snapshots

import "testing"

func TestPrintable(t *testing.T) {
	for _, tt := range []struct{ in, want, lines string }{
		{"main", "main", "main"},
		{"leak.c", "leak.c", "leak.c"},
		{"\x1b[31mred\x1b[0m.c", `\x1b[31mred\x1b[0m.c`, `\x1b[31mred\x1b[0m.c`},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"csi\u009b2J", `csi\u009b2J`, `csi\u009b2J`},
		{"bad\xffbyte\x9b", `bad\xffbyte\x9b`, `bad\xffbyte\x9b`},
		{"std::vector<café, ünï>", "std::vector<café, ünï>", "std::vector<café, ünï>"},
		{"\x00", `\x00`, `\x00`},
	} {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := PrintableLines(tt.in); got != tt.lines {
			t.Errorf("PrintableLines(%q) = %q, want %q", tt.in, got, tt.lines)
		}
	}
}

// A frame's text for the terminal escapes control characters in every
// part; the frame itself keeps them.
func TestFrameStringPrintable(t *testing.T) {
	f := Frame{Function: "f\x1b[2J", File: "\x1b[31mred.c", Line: 3}
	if got, want := FrameString(f), `f\x1b[2J (\x1b[31mred.c:3)`; got != want {
		t.Errorf("FrameString = %q, want %q", got, want)
	}
	if got, want := briefName("ns::g\x1b]0;title\x07(int)"), `ns::g\x1b]0;title\x07`; got != want {
		t.Errorf("briefName = %q, want %q", got, want)
	}
	if f.File != "\x1b[31mred.c" {
		t.Errorf("the frame changed: %q", f.File)
	}
}
