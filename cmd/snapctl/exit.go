package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/snapshots"
)

// Exit codes. They are documented in README.md ("Exit codes") and decided
// by driver.ExitStatus, which run.json's exit_code uses too; CI jobs rely
// on them, so a code never changes meaning.
const (
	exitOK          = driver.ExitOK
	exitFailure     = driver.ExitFailure
	exitUsage       = driver.ExitUsage
	exitPlan        = driver.ExitPlan
	exitEnvironment = driver.ExitEnvironment
	exitInput       = driver.ExitInput
	exitNoProcess   = driver.ExitNoProcess
	exitNotTracable = driver.ExitNotTracable
	exitTraced      = driver.ExitTraced
	exitExec        = driver.ExitExec
	exitLeak        = driver.ExitLeak
	exitNeverHit    = driver.ExitNeverHit
	exitCrashed     = driver.ExitCrashed
	exitEndedEarly  = driver.ExitEndedEarly
	exitNoInject    = driver.ExitNoInject
	exitTimeout     = driver.ExitTimeout
	exitInterrupted = driver.ExitInterrupted
)

// exitCodes are the codes with what each means, as `snapctl run --help`
// lists them; README.md's "Exit codes" table has the same codes.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "the run completed, every declared breakpoint hit, no fail_on limit exceeded"},
	{exitFailure, "snapctl or one of its tools (gdb, gdbserver, vgdb, valgrind, heaptrack) failed, or an I/O error"},
	{exitUsage, "bad command line"},
	{exitPlan, "the plan is invalid, or names a location gdb cannot resolve"},
	{exitEnvironment, "a required tool is missing or unusable"},
	{exitInput, "the target binary or the run directory cannot be used (not empty, not writable)"},
	{exitNoProcess, "snapctl attach: no such process, or it exited while snapctl attached"},
	{exitNotTracable, "snapctl attach: the process is another user's, or ptrace is refused"},
	{exitTraced, "snapctl attach: the process is already traced by a debugger"},
	{exitExec, "native backend: the target called exec; the stops taken before are kept"},
	{exitLeak, "a report.fail_on limit was exceeded: a leak, for CI"},
	{exitNeverHit, "a declared breakpoint never hit"},
	{exitCrashed, "the target crashed"},
	{exitEndedEarly, "the target exited with a failure before any breakpoint took a snapshot: nothing measured"},
	{exitNoInject, "snapctl attach --sites: injecting heaptrack would crash the process (a program that is not PIE and takes malloc's address)"},
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

// describe maps an error to its exit code and the one line printed for it,
// with control characters escaped: a message may quote a function or file
// name from the program's debug information. A usage error, a reader
// (show, diff, export, compare) ended by a signal and the errors of
// snapctl compare are the commands' own; every other error is mapped by
// driver.ExitStatus.
func describe(err error) (int, string) {
	code, msg := describeRaw(err)
	return code, snapshots.PrintableLines(msg)
}

func describeRaw(err error) (int, string) {
	var (
		ue          usageError
		runDir      *runDirError
		notFixed    *notFixedError
		interrupted *fsutil.InterruptedError
	)
	switch {
	case errors.As(err, &ue):
		return exitUsage, fmt.Sprintf("%v (see 'snapctl help')", err)
	case errors.As(err, &interrupted):
		// main cancels the commands' context on SIGINT, SIGTERM or
		// SIGHUP; a reader returns this as it stops.
		return exitInterrupted, err.Error()
	case errors.As(err, &runDir):
		return exitInput, err.Error()
	case errors.As(err, &notFixed):
		return exitLeak, err.Error()
	}
	code, _ := driver.ExitStatus(err)
	return code, err.Error()
}
