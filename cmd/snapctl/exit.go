package main

import (
	"errors"
	"fmt"
)

// Exit codes. They are documented in README.md ("Exit codes"); CI jobs rely
// on them, so a code never changes meaning.
const (
	exitOK          = 0
	exitFailure     = 1   // snapctl or one of its tools failed (gdb, vgdb or valgrind died, I/O error)
	exitUsage       = 2   // bad command line
	exitPlan        = 3   // the plan is invalid or names a location gdb cannot resolve
	exitEnvironment = 4   // a required tool is missing or unusable
	exitInput       = 5   // the target binary or the output directory cannot be used
	exitLeak        = 10  // a report.fail_on limit was exceeded
	exitNeverHit    = 11  // a declared breakpoint never hit
	exitCrashed     = 12  // the target crashed (fatal signal)
	exitTimeout     = 124 // --timeout expired (as timeout(1))
	exitInterrupted = 130 // SIGINT, SIGTERM or SIGHUP (128+SIGINT, as shells report it)
)

// usageError marks an error in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// describe maps an error to its exit code and the one line printed for it.
// It is the only place that knows the codes.
func describe(err error) (int, string) {
	var ue usageError
	switch {
	case errors.As(err, &ue):
		return exitUsage, fmt.Sprintf("%v (see 'snapctl help')", err)
	}
	return exitFailure, err.Error()
}
