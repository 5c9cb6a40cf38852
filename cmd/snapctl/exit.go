package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapctl/snapctl/breakpoints"
	"github.com/snapctl/snapctl/driver"
)

// Exit codes. They are documented in README.md ("Exit codes"); CI jobs rely
// on them, so a code never changes meaning.
const (
	exitOK          = 0
	exitFailure     = 1   // snapctl or one of its tools failed (gdb, vgdb or valgrind died, I/O error)
	exitUsage       = 2   // bad command line
	exitPlan        = 3   // the plan is invalid or names a location gdb cannot resolve
	exitEnvironment = 4   // a required tool is missing or unusable
	exitInput       = 5   // the target binary, the output directory or a run directory to compare cannot be used
	exitLeak        = 10  // a report.fail_on limit was exceeded, or compare shows no fix
	exitNeverHit    = 11  // a declared breakpoint never hit
	exitCrashed     = 12  // the target crashed (fatal signal)
	exitTimeout     = 124 // --timeout expired (as timeout(1))
	exitInterrupted = 130 // SIGINT, SIGTERM or SIGHUP (128+SIGINT, as shells report it)
)

// exitCodes are the codes with what each means, as `snapctl run --help`
// lists them; README.md's "Exit codes" table has the same codes.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "the run completed, every declared breakpoint hit, no fail_on limit exceeded"},
	{exitFailure, "snapctl or one of its tools (gdb, vgdb, valgrind) failed, or an I/O error"},
	{exitUsage, "bad command line"},
	{exitPlan, "the plan is invalid, or names a location gdb cannot resolve"},
	{exitEnvironment, "a required tool is missing or unusable"},
	{exitInput, "the target binary cannot be used, or the run directory is not empty"},
	{exitLeak, "a report.fail_on limit was exceeded: a leak, for CI"},
	{exitNeverHit, "a declared breakpoint never hit"},
	{exitCrashed, "the target crashed"},
	{exitTimeout, "--timeout expired"},
	{exitInterrupted, "interrupted by SIGINT, SIGTERM or SIGHUP"},
}

// exitCodeHelp is the "Exit codes" section of `snapctl run --help`.
func exitCodeHelp() string {
	var b strings.Builder
	b.WriteString("\nExit codes:\n")
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %3d  %s\n", e.code, e.meaning)
	}
	return b.String()
}

// usageError marks an error in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// describe maps an error to its exit code and the one line printed for it.
// It is the only place that knows the codes. The order matters where an
// error wraps several kinds: the cause that ended the run wins.
func describe(err error) (int, string) {
	var (
		ue       usageError
		planErr  *breakpoints.Error
		planErrs breakpoints.ErrorList
		missing  *driver.MissingToolError
		binErr   *driver.BinaryError
		dirErr   *driver.OutputDirError
		crash    *driver.CrashError
		neverHit *driver.NeverHitError
		leak     *driver.LeakError
		runDir   *runDirError
		notFixed *notFixedError
	)
	switch {
	case errors.As(err, &ue):
		return exitUsage, fmt.Sprintf("%v (see 'snapctl help')", err)
	case errors.Is(err, driver.ErrInterrupted):
		return exitInterrupted, err.Error()
	case errors.Is(err, driver.ErrTimeout):
		return exitTimeout, err.Error()
	case errors.As(err, &crash):
		return exitCrashed, err.Error()
	case errors.As(err, &planErrs), errors.As(err, &planErr):
		return exitPlan, err.Error()
	case errors.As(err, &missing):
		return exitEnvironment, err.Error()
	case errors.As(err, &binErr), errors.As(err, &dirErr), errors.As(err, &runDir):
		return exitInput, err.Error()
	case errors.As(err, &neverHit):
		return exitNeverHit, err.Error()
	case errors.As(err, &leak), errors.As(err, &notFixed):
		return exitLeak, err.Error()
	}
	return exitFailure, err.Error()
}
