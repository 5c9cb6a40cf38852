package breakpoints

import (
	"fmt"
	"strconv"
	"strings"
)

// InsertArgs returns the arguments of the MI command -break-insert for b,
// each one MI word, already quoted where MI needs it, so that the command
// line is "-break-insert " + strings.Join(args, " "):
//
//	-i 5 -c "$_thread == 2 && (id % 10 == 0)" handle_request
//	"Scheduler::submit(int, char)"
//
// Skip becomes gdb's ignore count (-i). Thread becomes part of the
// condition ($_thread == N) rather than -p: the thread may not exist yet
// when the breakpoint is inserted, and gdb refuses -p for an unknown
// thread. Every, MaxHits and AroundCall are the stop loop's business and
// do not appear. A location that starts with '-' (a gdb explicit location
// such as "-source leak.c -line 15") follows "--" so gdb does not take it
// for an option.
func (b Breakpoint) InsertArgs() []string {
	var args []string
	if b.Skip > 0 {
		args = append(args, "-i", strconv.Itoa(b.Skip))
	}
	if c := b.GdbCondition(); c != "" {
		args = append(args, "-c", quoteMI(c))
	}
	if strings.HasPrefix(b.Location, "-") {
		args = append(args, "--")
	}
	return append(args, quoteMI(b.Location))
}

// GdbCondition returns the condition gdb evaluates for b: Condition,
// restricted to Thread when one is set.
func (b Breakpoint) GdbCondition() string {
	switch {
	case b.Thread > 0 && b.Condition != "":
		return fmt.Sprintf("$_thread == %d && (%s)", b.Thread, b.Condition)
	case b.Thread > 0:
		return fmt.Sprintf("$_thread == %d", b.Thread)
	}
	return b.Condition
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
