package breakpoints

import (
	"strconv"
	"strings"
)

// InsertArgs returns the arguments of the MI command -break-insert for b,
// each one MI word, already quoted where MI needs it, so that the command
// line is "-break-insert " + strings.Join(args, " "):
//
//	-c "id % 10 == 0" -p 2 -i 5 handle_request
//	"Scheduler::submit(int, char)"
//
// Every, MaxHits and AroundCall are the stop loop's business and do not
// appear. A location that starts with '-' (a gdb explicit location such as
// "-source leak.c -line 15") follows "--" so gdb does not take it for an
// option.
func (b Breakpoint) InsertArgs() []string {
	var args []string
	if b.Condition != "" {
		args = append(args, "-c", quoteMI(b.Condition))
	}
	if b.Thread > 0 {
		args = append(args, "-p", strconv.Itoa(b.Thread))
	}
	if b.Skip > 0 {
		args = append(args, "-i", strconv.Itoa(b.Skip))
	}
	if strings.HasPrefix(b.Location, "-") {
		args = append(args, "--")
	}
	return append(args, quoteMI(b.Location))
}

// quoteMI returns s as one word of an MI command: unchanged when gdb's MI
// argument splitter would read it back as is, else as a C string with
// backslash escapes (octal for other control bytes), which gdb decodes.
func quoteMI(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\r\v\f\"\\'") && !hasControl(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if c < 0x20 || c == 0x7f {
				b.WriteByte('\\')
				b.WriteByte('0' + c>>6)
				b.WriteByte('0' + c>>3&7)
				b.WriteByte('0' + c&7)
				continue
			}
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
