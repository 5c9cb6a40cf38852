// Command snapctl drives valgrind's massif heap profiler through gdb from a
// plan, snapshots the heap at chosen breakpoints and reports which allocation
// call sites grow between stops.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version may be set at build time with -ldflags "-X main.version=...";
// left empty, it comes from the build information Go records in the
// binary (see versionOf).
var version = ""

func main() {
	// snapctl's live heap is small (per-site summaries, one compact tree
	// per breakpoint), but every stop parses a snapshot, megabytes at a
	// big heap, into short-lived buffers. With Go's default GOGC=100 the
	// peak is about twice the live heap; at 50 it is about 1.5 times, for
	// no CPU that bench/bigheap.sh can see (10,000 sites x 20 frames: 53
	// MiB instead of 66 MiB, snapctl's own CPU 2.7 s either way). GOGC in
	// the environment still decides.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	os.Exit(run())
}

// run builds the root command, executes it with a context that is cancelled
// on the first SIGINT, SIGTERM or SIGHUP, prints the error once and returns
// the exit code the error maps to.
func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	bi, _ := debug.ReadBuildInfo()
	root := newRootCmd(versionOf(version, bi))
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

// versionOf is the version --version prints: the one set at build time, or
// else the module version Go stamped into the binary (a tagged release, or
// for `go install ./cmd/snapctl` in a clone a pseudo-version naming the
// commit, "+dirty" with uncommitted changes), or else the commit the
// binary was built from, or "dev".
func versionOf(set string, bi *debug.BuildInfo) string {
	if set != "" {
		return set
	}
	if bi == nil {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "-dirty"
	}
	return "dev-" + rev
}
