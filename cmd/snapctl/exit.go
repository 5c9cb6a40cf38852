package main

import (
	"errors"
	"fmt"

	"github.com/snapctl/snapctl/driver"
)

// Exit codes. They are documented in README.md ("Exit codes") and decided
// by driver.ExitStatus, which run.json's exit_code uses too.
const (
	exitOK          = driver.ExitOK
	exitFailure     = driver.ExitFailure
	exitUsage       = driver.ExitUsage
	exitPlan        = driver.ExitPlan
	exitEnvironment = driver.ExitEnvironment
	exitInput       = driver.ExitInput
	exitLeak        = driver.ExitLeak
	exitNeverHit    = driver.ExitNeverHit
	exitCrashed     = driver.ExitCrashed
	exitTimeout     = driver.ExitTimeout
	exitInterrupted = driver.ExitInterrupted
)

// usageError marks an error in the command line itself.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// describe maps an error to its exit code and the one line printed for it.
// A usage error is the command's own; every other error is mapped by
// driver.ExitStatus.
func describe(err error) (int, string) {
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage, fmt.Sprintf("%v (see 'snapctl help')", err)
	}
	code, _ := driver.ExitStatus(err)
	return code, err.Error()
}
