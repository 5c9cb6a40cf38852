package backend

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Outcome is a finished run as the report sections take it.
type Outcome struct {
	Dir      string // the run directory
	Manifest *runjson.Manifest
	// Report is the analysis as the renderers take it; nil when the run
	// has none.
	Report *snapshots.Report
	// Stops and Diffs count the stops and diffs in run.json.
	Stops, Diffs int
	// MaxFrames is the number of callers shown per stack (the plan's
	// report.depth).
	MaxFrames int
}

// ShownSites is how many sites report.html lists per diff.
const ShownSites = 20

// Facts is the header of report.html: what ran and how it ended, with
// each breakpoint's line as line gives it.
func Facts(o *Outcome, line func(b runjson.BreakpointSummary) string) []snapshots.Fact {
	m := o.Manifest
	facts := []snapshots.Fact{
		{Label: "Command", Value: CommandLine(m.Target.Argv)},
		{Label: "Status", Value: string(m.Status) + ExitNote(m)},
	}
	if m.Error != "" {
		facts = append(facts, snapshots.Fact{Label: "Error", Value: m.Error})
	}
	facts = append(facts, snapshots.Fact{Label: "Stops", Value: strconv.Itoa(o.Stops)})
	if m.Native != nil && m.Native.TrimProbe {
		facts = append(facts, snapshots.Fact{Label: "native.trim_probe", Value: "on: every stop called malloc_trim(0) after measuring"})
	}
	for _, b := range m.Breakpoints {
		facts = append(facts, snapshots.Fact{Label: "Breakpoint " + b.Name, Value: b.Location + ": " + line(b)})
	}
	return facts
}

// ExitNote says how the target ended, " (target exit code 1)", or "".
func ExitNote(m *runjson.Manifest) string {
	switch {
	case m.Target.Signal != nil:
		note := fmt.Sprintf(" (target killed by %s", *m.Target.Signal)
		if c := m.Target.Crash; c != nil {
			if f := UserFrame(c.Backtrace); f != nil {
				note += " in " + f.String()
			}
		}
		return note + ")"
	case m.Target.ExitCode != nil:
		return fmt.Sprintf(" (target exit code %d)", *m.Target.ExitCode)
	}
	return ""
}

// Plural counts n words: "1 hit", "2 hits".
func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// UnchangedNote says how many snapshots keep_snapshots: changed dropped.
func UnchangedNote(b runjson.BreakpointSummary) string {
	if b.Unchanged == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d unchanged, not kept)", b.Unchanged)
}

// UserFrame returns the innermost frame of the program's own code: the
// first whose source file is on this machine (the C library's sources
// usually are not), else the first with a file, else the first.
func UserFrame(frames []runjson.Frame) *runjson.Frame {
	for i := range frames {
		if f := frames[i].FullName; f != "" {
			if _, err := os.Stat(f); err == nil {
				return &frames[i]
			}
		}
	}
	for i := range frames {
		if frames[i].File != "" {
			return &frames[i]
		}
	}
	if len(frames) > 0 {
		return &frames[0]
	}
	return nil
}

// MeasuredNothing reports whether the run's breakpoints took no
// snapshot. A run.json without breakpoints, which a plan cannot give,
// says nothing of it.
func MeasuredNothing(m *runjson.Manifest) bool {
	if len(m.Breakpoints) == 0 {
		return false
	}
	for _, b := range m.Breakpoints {
		if b.Snapshots > 0 {
			return false
		}
	}
	return true
}

// WhyNothing says why a run took no snapshot, from what run.json says of
// it: how the target, or the run, ended before any breakpoint took one,
// and the pending locations that never resolved.
func WhyNothing(m *runjson.Manifest) string {
	var why string
	switch {
	case m.Status == runjson.StatusCompleted && m.Target.ExitCode != nil:
		why = fmt.Sprintf("the target exited with status %d before any breakpoint took a snapshot", *m.Target.ExitCode)
	case m.Status == runjson.StatusCompleted && m.Target.Signal != nil:
		why = fmt.Sprintf("snapctl ended the target (%s) before any breakpoint took a snapshot", *m.Target.Signal)
	case m.Status == runjson.StatusCrashed && m.Target.Signal != nil:
		why = fmt.Sprintf("the target was killed by %s before any breakpoint took a snapshot", *m.Target.Signal)
	default:
		why = fmt.Sprintf("the run ended (%s) before any breakpoint took a snapshot", m.Status)
	}
	var unresolved []string
	for _, b := range m.Breakpoints {
		if b.Unresolved {
			unresolved = append(unresolved, b.Name)
		}
	}
	switch len(unresolved) {
	case 0:
	case 1:
		why += fmt.Sprintf("; the location of breakpoint %q never resolved", unresolved[0])
	default:
		why += fmt.Sprintf("; the locations of breakpoints %s never resolved", QuoteList(unresolved))
	}
	return why
}

// QuoteList quotes names and joins them with commas.
func QuoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// CommandLine is argv as a shell would take it back: an argument that is
// empty, or has spaces or characters the shell reads, is single-quoted
// (an empty --save shows as a quoted empty word, not as a double space).
func CommandLine(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellWord(a)
	}
	return strings.Join(out, " ")
}

func shellWord(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "" {
		return a
	}
	if strings.IndexFunc(a, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		// Control characters: the reports escape them (\x1b), which
		// quotes would not turn back into the character.
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}
