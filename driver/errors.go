package driver

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
	"github.com/snapctl/snapctl/runjson"
)

// Sentinel errors for the ways a session ends early. Run returns them wrapped,
// after the partial run has been written; callers test with errors.Is.
var (
	// ErrInterrupted: the caller's context was cancelled (SIGINT, SIGTERM or
	// SIGHUP in snapctl).
	ErrInterrupted = errors.New("interrupted")
	// ErrTimeout: Options.Timeout expired.
	ErrTimeout = errors.New("timeout expired")
)

// OutputDirError reports a run directory that cannot be used: it exists and
// is not empty (without Force), or it cannot be created.
type OutputDirError struct {
	Path string
	Err  error
}

func (e *OutputDirError) Error() string {
	return fmt.Sprintf("output directory %q: %v", e.Path, e.Err)
}

func (e *OutputDirError) Unwrap() error { return e.Err }

// errDirNotEmpty is wrapped in an OutputDirError for an existing, non-empty
// run directory.
var errDirNotEmpty = errors.New("exists and is not empty (use --force to write into it)")

// ToolError reports a child process (valgrind, vgdb or gdb) that failed or
// died, with the last lines it printed.
type ToolError = backend.ToolError

// CrashError reports a target that died of a signal.
type CrashError struct {
	Signal string         // "SIGSEGV"
	Frame  *runjson.Frame // where it died, when gdb could tell
	// Err is what snapctl was doing when it died, when not running it,
	// or how snapctl knows of a death gdb did not report (the backend's
	// TargetKilledError: "gdb did not report it", a tracer gone with it).
	Err error
}

func (e *CrashError) Error() string {
	msg := "target crashed with " + e.Signal
	if e.Frame != nil && e.Frame.Function != "" {
		msg += " in " + e.Frame.String()
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *CrashError) Unwrap() error { return e.Err }

// killedCrash is the crash of a target the backend found killed, with
// how the backend knows of it.
func killedCrash(k *backend.TargetKilledError) *CrashError {
	return &CrashError{Signal: k.Signal, Err: k.Err}
}

// ExecError reports a target that called exec under the native backend:
// the program the plan's breakpoints and the allocator probe refer to is
// gone, so the run ends there with the stops taken before.
type ExecError struct {
	Pid     int
	Program string // what the process runs now
	Stops   int    // the stops taken before the exec
	// Attached is set for snapctl attach: snapctl detaches and the
	// process goes on running the new program; else gdb ends it.
	Attached bool
}

func (e *ExecError) Error() string {
	then := "snapctl ended it"
	if e.Attached {
		then = "snapctl detached and it goes on running"
	}
	return fmt.Sprintf("the target called exec: process %d now runs %s, and the plan's breakpoints and allocator probe belong to the program it replaced; the run ends with the %d stops taken before (%s); to measure the new program, run snapctl on it or attach to it",
		e.Pid, e.Program, e.Stops, then)
}

// NeverHitError lists declared, non-optional breakpoints that never hit.
type NeverHitError struct {
	Breakpoints []string
	// Unresolved are those whose location no library loaded during the
	// run defined (pending breakpoints).
	Unresolved []string
	// Nothing says that no breakpoint took a snapshot: the run measured
	// nothing, and Breakpoints lists the optional ones too (none when
	// every breakpoint hit and no hit took a snapshot).
	Nothing bool
}

func (e *NeverHitError) Error() string {
	var msg string
	switch len(e.Breakpoints) {
	case 0:
	case 1:
		msg = fmt.Sprintf("breakpoint %q never hit", e.Breakpoints[0])
	default:
		msg = fmt.Sprintf("breakpoints %s never hit", quoteList(e.Breakpoints))
	}
	if e.Nothing {
		msg = strings.TrimSuffix("nothing measured: no breakpoint took a snapshot; "+msg, "; ")
	}
	if len(e.Unresolved) > 0 {
		msg += fmt.Sprintf("; the location of %s never resolved: no library loaded during the run defines it", quoteList(e.Unresolved))
	}
	return msg
}

// EndedEarlyError reports a target that exited with a failure, on its own,
// before any breakpoint took a snapshot: nothing was measured.
type EndedEarlyError struct {
	ExitCode int
}

func (e *EndedEarlyError) Error() string {
	return fmt.Sprintf("nothing measured: the target exited with status %d before any breakpoint took a snapshot: its own output says why", e.ExitCode)
}

// LeakError reports suspects growing faster than the plan's
// report.fail_on limits.
type LeakError = backend.LeakError

func quoteList(names []string) string { return backend.QuoteList(names) }

// gdbExit describes how gdb went, from the client's error.
func gdbExit(err error) (string, string) {
	var ee *mi.ExitError
	if errors.As(err, &ee) {
		if ee.State != nil {
			return child.Describe(ee.State) + " during the run", ee.Stderr
		}
		return "exited during the run", ee.Stderr
	}
	return "exited during the run", ""
}

// Exit codes of snapctl. They are documented in README.md ("Exit codes");
// CI jobs rely on them, so a code never changes meaning. ExitStatus maps an
// error to one, for the command's exit and run.json's exit_code alike.
const (
	ExitOK          = 0
	ExitFailure     = 1   // snapctl or one of its tools failed (gdb, vgdb or valgrind died, I/O error)
	ExitUsage       = 2   // bad command line
	ExitPlan        = 3   // the plan is invalid or names a location gdb cannot resolve
	ExitEnvironment = 4   // a required tool is missing or unusable
	ExitInput       = 5   // the target binary or the output directory cannot be used
	ExitNoProcess   = 6   // snapctl attach: no such process, or it exited while gdb attached
	ExitNotTracable = 7   // snapctl attach: the process is not ours, or ptrace is refused
	ExitTraced      = 8   // snapctl attach: the process is already traced
	ExitExec        = 9   // the target called exec (native backend)
	ExitLeak        = 10  // a report.fail_on limit was exceeded
	ExitNeverHit    = 11  // a declared breakpoint never hit
	ExitCrashed     = 12  // the target crashed (fatal signal)
	ExitEndedEarly  = 13  // the target exited with a failure before any breakpoint took a snapshot
	ExitNoInject    = 14  // snapctl attach --sites: injecting heaptrack is known to crash the process
	ExitTimeout     = 124 // --timeout expired (as timeout(1))
	ExitInterrupted = 130 // SIGINT, SIGTERM or SIGHUP (128+SIGINT, as shells report it)
)

// The reasons run.json's exit_reason gives for its exit_code.
const (
	ReasonOK          = "ok"
	ReasonFailed      = "failed"
	ReasonPlan        = "plan-error"
	ReasonEnvironment = "tool-missing"
	ReasonInput       = "bad-input"
	ReasonNoProcess   = attachNoProcess
	ReasonNotTracable = attachNotPermitted
	ReasonTraced      = attachTraced
	ReasonNoInject    = attachNoInject
	ReasonExec        = "target-exec"
	ReasonLeak        = "fail-on-exceeded"
	ReasonNeverHit    = "breakpoint-never-hit"
	ReasonCrashed     = "target-crashed"
	ReasonEndedEarly  = "target-ended-early"
	ReasonTimeout     = "timeout"
	ReasonInterrupted = "interrupted"
)

// ExitStatus maps the error a run ended with (nil for success) to snapctl's
// exit code and the reason run.json names. The order matters where an
// error wraps several kinds: the cause that ended the run wins.
func ExitStatus(err error) (code int, reason string) {
	var (
		planErr  *plan.Error
		planErrs plan.ErrorList
		missing  *preflight.MissingToolError
		binErr   *preflight.BinaryError
		dirErr   *OutputDirError
		crash    *CrashError
		neverHit *NeverHitError
		early    *EndedEarlyError
		leak     *LeakError
		attach   *attachError
		execed   *ExecError
	)
	switch {
	case err == nil:
		return ExitOK, ReasonOK
	case errors.Is(err, ErrInterrupted):
		return ExitInterrupted, ReasonInterrupted
	case errors.Is(err, ErrTimeout):
		return ExitTimeout, ReasonTimeout
	case errors.As(err, &crash):
		return ExitCrashed, ReasonCrashed
	case errors.As(err, &execed):
		return ExitExec, ReasonExec
	case errors.As(err, &planErrs), errors.As(err, &planErr):
		return ExitPlan, ReasonPlan
	case errors.As(err, &missing):
		return ExitEnvironment, ReasonEnvironment
	case errors.As(err, &attach):
		switch attach.Kind {
		case attachNoProcess:
			return ExitNoProcess, ReasonNoProcess
		case attachTraced:
			return ExitTraced, ReasonTraced
		case attachNoInject:
			return ExitNoInject, ReasonNoInject
		}
		return ExitNotTracable, ReasonNotTracable
	case errors.As(err, &binErr), errors.As(err, &dirErr):
		return ExitInput, ReasonInput
	case errors.As(err, &early):
		return ExitEndedEarly, ReasonEndedEarly
	case errors.As(err, &neverHit):
		return ExitNeverHit, ReasonNeverHit
	case errors.As(err, &leak):
		return ExitLeak, ReasonLeak
	}
	return ExitFailure, ReasonFailed
}
