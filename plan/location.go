package plan

import (
	"fmt"
	"strings"
)

// explicitOptions are the options of a gdb explicit location.
var explicitOptions = []string{"source", "function", "label", "line", "qualified"}

// LocationOption is one option of a gdb explicit location: "source" with
// "leak.c", "line" with "15", "qualified" with no value.
type LocationOption struct {
	Name, Value string
}

// ExplicitLocation reads a gdb explicit location ("-source leak.c -line
// 15", "-function handle_request -label retry") into its options, in
// order. It returns nil for a location that does not start with '-', and
// an error for an option it does not know or a missing value. As in gdb,
// an option may be abbreviated to a unique prefix; a value runs to the
// next option, so it may contain spaces ("-function ns::f(int, char)").
func ExplicitLocation(loc string) ([]LocationOption, error) {
	if !strings.HasPrefix(loc, "-") {
		return nil, nil
	}
	var args []LocationOption
	var value []string
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		last := &args[len(args)-1]
		switch {
		case last.Name == "qualified" && len(value) > 0:
			return fmt.Errorf("-qualified takes no value, got %q", strings.Join(value, " "))
		case last.Name != "qualified" && len(value) == 0:
			return fmt.Errorf("-%s needs a value", last.Name)
		}
		last.Value = strings.Join(value, " ")
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
		args = append(args, LocationOption{Name: opt})
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

// GdbLocation returns the location as snapctl gives it to gdb: the plan's,
// except that a function named in single quotes
// ('ns::Box<long>::operator<<(int)', 'ns::f(int, char)') becomes the
// explicit location "-function NAME". gdb 13 resolves the quoted form
// when the program's symbols are there, but a pending breakpoint with it
// never resolves when they come: its linespec lexer keeps the closing
// quote ("Function \"ns::Box<long>::operator<<(int)'\" not defined"), and
// under valgrind every breakpoint is pending until the dynamic loader has
// run. An explicit location takes the name whole, without quotes.
func (b Breakpoint) GdbLocation() string {
	if fn, ok := quotedFunction(b.Location); ok {
		return "-function " + fn
	}
	return b.Location
}

// quotedFunction returns the name inside a location that is one function
// name in single quotes, and whether it is one.
func quotedFunction(loc string) (string, bool) {
	if len(loc) < 3 || loc[0] != '\'' || loc[len(loc)-1] != '\'' {
		return "", false
	}
	name := strings.TrimSpace(loc[1 : len(loc)-1])
	if name == "" || strings.ContainsRune(name, '\'') || strings.HasPrefix(name, "-") {
		return "", false
	}
	return name, true
}
