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
// do not appear. A gdb explicit location ("-source leak.c -line 15")
// becomes MI's options for it (--source leak.c --line 15), since MI does
// not parse explicit locations in the location string.
func (b Breakpoint) InsertArgs() []string {
	var args []string
	if b.Skip > 0 {
		args = append(args, "-i", strconv.Itoa(b.Skip))
	}
	if c := b.GdbCondition(); c != "" {
		args = append(args, "-c", quoteMI(c))
	}
	if opts, err := explicitArgs(b.Location); err == nil && opts != nil {
		return append(args, opts...)
	}
	return append(args, quoteMI(b.Location))
}

// explicitOptions are the options of a gdb explicit location, which MI's
// -break-insert takes as --source, --function, --label, --line and
// --qualified rather than in the location string.
var explicitOptions = []string{"source", "function", "label", "line", "qualified"}

// explicitArgs translates a gdb explicit location ("-source leak.c -line
// 15", "-function handle_request -label retry") into -break-insert
// options. It returns nil for a location that does not start with '-', and
// an error for an option it does not know or a missing value. As in gdb,
// an option may be abbreviated to a unique prefix; a value runs to the
// next option, so it may contain spaces ("-function ns::f(int, char)").
func explicitArgs(loc string) ([]string, error) {
	if !strings.HasPrefix(loc, "-") {
		return nil, nil
	}
	var args []string
	var value []string
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		last := args[len(args)-1]
		switch {
		case last == "--qualified" && len(value) > 0:
			return fmt.Errorf("-qualified takes no value, got %q", strings.Join(value, " "))
		case last != "--qualified" && len(value) == 0:
			return fmt.Errorf("%s needs a value", strings.TrimPrefix(last, "-"))
		case len(value) > 0:
			args = append(args, quoteMI(strings.Join(value, " ")))
		}
		value = nil
		return nil
	}
	for _, w := range strings.Fields(loc) {
		opt := ""
		if len(w) > 1 && w[0] == '-' && w[1] >= 'a' && w[1] <= 'z' {
			var matches []string
			for _, o := range explicitOptions {
				if strings.HasPrefix(o, w[1:]) {
					matches = append(matches, o)
				}
			}
			switch len(matches) {
			case 1:
				opt = matches[0]
			case 0:
				if len(args) == 0 {
					return nil, fmt.Errorf("unknown explicit location option %s (gdb knows -source, -function, -label, -line and -qualified)", w)
				}
			default:
				return nil, fmt.Errorf("explicit location option %s is ambiguous: -%s", w, strings.Join(matches, " or -"))
			}
		}
		if opt == "" {
			if len(args) == 0 {
				return nil, fmt.Errorf("an explicit location starts with an option such as -function, got %q", w)
			}
			value = append(value, w)
			continue
		}
		if err := flush(); err != nil {
			return nil, err
		}
		args = append(args, "--"+opt)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return args, nil
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
