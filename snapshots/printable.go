package snapshots

import (
	"io"
	"unicode/utf8"
)

// Printable returns s as it may be written to a terminal: every control
// character (C0, DEL and C1, ESC among them) and every byte that is not
// UTF-8 is written as a Go escape ("\x1b", "\n", "\u009b", "\xff").
// Function and file names come from the program's debug information, and
// a name holding ESC [ 31m would otherwise recolour or rewrite the user's
// terminal. The text renderers print names through it; run.json and the
// JSON formats keep them whole.
func Printable(s string) string { return printable(s, false) }

// PrintableLines is Printable for a message of several lines: newlines and
// tabs are kept.
func PrintableLines(s string) string { return printable(s, true) }

func printable(s string, lines bool) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f || i < len(s) && lines && (s[i] == '\n' || s[i] == '\t') {
		i++
	}
	if i == len(s) {
		return s // the common case: printable ASCII
	}
	return string(appendPrintable(make([]byte, 0, len(s)+8), s, lines))
}

// appendPrintable appends s to b as Printable (or, with lines,
// PrintableLines) writes it.
func appendPrintable(b []byte, s string, lines bool) []byte {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c >= 0x20 && c < 0x7f:
			b = append(b, c)
			i++
			continue
		case lines && (c == '\n' || c == '\t'):
			b = append(b, c)
			i++
			continue
		case c < 0x80:
			b = appendEscape(b, rune(c))
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, '\\', 'x', "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		case r >= 0x80 && r < 0xa0:
			b = appendEscape(b, r)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}

// appendEscape appends the Go escape of a control character: "\n", "\t",
// "\r", otherwise "\x1b" or, for C1, "\u009b".
func appendEscape(b []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	switch r {
	case '\n':
		return append(b, `\n`...)
	case '\t':
		return append(b, `\t`...)
	case '\r':
		return append(b, `\r`...)
	}
	if r < 0x80 {
		return append(b, '\\', 'x', hex[r>>4], hex[r&0xf])
	}
	return append(b, '\\', 'u', '0', '0', hex[r>>4&0xf], hex[r&0xf])
}

// appendPrintableBytes is appendPrintable for a line read from a file,
// without copying it into a string when, as nearly always, it is plain.
func appendPrintableBytes(b, text []byte) []byte {
	for _, c := range text {
		if c < 0x20 || c >= 0x7f {
			return appendPrintable(b, string(text), false)
		}
	}
	return append(b, text...)
}

// PrintableWriter returns a writer that writes to w what it is given with
// control characters escaped as PrintableLines does. Each Write must hold
// whole characters (one fmt.Fprintf, one line), as it is escaped alone.
func PrintableWriter(w io.Writer) io.Writer { return printableWriter{w} }

type printableWriter struct{ w io.Writer }

func (p printableWriter) Write(b []byte) (int, error) {
	if _, err := io.WriteString(p.w, PrintableLines(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}
