package backend

import (
	"fmt"
	"strings"
)

// ToolError reports a child process (valgrind, vgdb or gdb) that failed or
// died, with the last lines it printed.
type ToolError struct {
	Tool string // "valgrind", "vgdb" or "gdb"
	Msg  string // what went wrong, lowercase
	Tail string // the last lines of the tool's output, may be empty
	Err  error
}

func (e *ToolError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", e.Tool, e.Msg)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	if t := strings.TrimSpace(e.Tail); t != "" {
		b.WriteString("\n")
		for _, line := range strings.Split(t, "\n") {
			b.WriteString("    " + line + "\n")
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

func (e *ToolError) Unwrap() error { return e.Err }

// LeakError reports suspects growing faster than the plan's
// report.fail_on limits.
type LeakError struct {
	GrowthPerHit int64    // the limit per hit, 0 for none
	TotalGrowth  int64    // the limit over the run, 0 for none
	LostPerHit   int64    // the limit of lost bytes per hit, 0 for none
	Suspects     []string // "handle_request (leak.c:20) +24 B per hit at breakpoint \"request\""
	// Of names what exceeded the limits: "site(s)" when empty, or
	// "breakpoint(s)" for the native backend's in-use heap without sites.
	Of string
}

func (e *LeakError) Error() string {
	of := e.Of
	if of == "" {
		of = "site(s)"
	}
	return fmt.Sprintf("fail_on exceeded by %d %s: %s", len(e.Suspects), of, strings.Join(e.Suspects, "; "))
}

// TargetKilledError reports a target that died as it started, before a
// stop: gdb's start of it failed because the process was gone. A traced
// process that vanishes was killed with SIGKILL, the one signal its
// tracer cannot intercept. The run ends as a crash (exit 12).
type TargetKilledError struct {
	Signal string // "SIGKILL"
	Err    error  // what gdb said
}

func (e *TargetKilledError) Error() string {
	return "the target was killed with " + e.Signal + " as it started: " + e.Err.Error()
}

func (e *TargetKilledError) Unwrap() error { return e.Err }
