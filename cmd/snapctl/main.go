// Command snapctl drives valgrind's massif heap profiler through gdb from a
// plan, snapshots the heap at chosen breakpoints and reports which allocation
// call sites grow between stops.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run())
}

// run builds the root command, executes it with a context that is cancelled
// on the first SIGINT, SIGTERM or SIGHUP, prints the error once and returns
// the exit code the error maps to.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	root := newRootCmd(version)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code, msg := describe(err)
	if msg != "" {
		fmt.Fprintf(os.Stderr, "snapctl: %s\n", msg)
	}
	return code
}
