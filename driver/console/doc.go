// Package console is the run's terminal: the one-line status display and
// the target's output on its way to the user's terminal.
package console
