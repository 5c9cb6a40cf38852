package driver

import (
	"errors"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/child"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
)

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
	ReasonNoProcess   = AttachNoProcess
	ReasonNotTracable = AttachNotPermitted
	ReasonTraced      = AttachTraced
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
		attach   *AttachError
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
		case AttachNoProcess:
			return ExitNoProcess, ReasonNoProcess
		case AttachTraced:
			return ExitTraced, ReasonTraced
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
