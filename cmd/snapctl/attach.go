package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/driver/backend"
)

// newAttachCmd is `snapctl attach [flags] PLAN PID`: the native backend,
// attached to a running process. Its flags are run's.
func newAttachCmd() *cobra.Command {
	// attach's --guard, on by default: the command's own, as every flag
	// is, so that command trees made side by side (tests in parallel)
	// do not share it.
	var guard bool
	cmd := newRunCmdWith(func(cmd *cobra.Command, o *runOptions) error {
		pid, err := strconv.Atoi(o.Binary)
		if err != nil || pid <= 0 || len(o.Args) > 0 {
			return usageError{fmt.Errorf("attach needs a PLAN and a PID: snapctl attach PLAN PID (got %q)", append([]string{o.Binary}, o.Args...))}
		}
		attaches := driver.BackendWith(func(t backend.Traits) bool { return t.Attaches })
		if t, _ := driver.BackendTraits(o.Backend); o.Backend != "" && !t.Attaches {
			return usageError{fmt.Errorf("attach: the %s backend cannot attach to a running process, it must start the program; attach uses the %s backend", o.Backend, attaches)}
		}
		if o.Backend == "" {
			o.Backend = attaches
		}
		o.Pid, o.Binary, o.Guard = pid, "", guard
		return runRun(cmd, o)
	})
	cmd.Use = "attach [flags] PLAN PID"
	cmd.Short = "Attach to a running process, measure its memory at the plan's breakpoints, then detach"
	cmd.Long = `attach attaches gdb to the running process PID (the native backend: no
valgrind), inserts the breakpoints of PLAN and records at every stop the
process's resident memory and its allocator's state (glibc's or jemalloc's). The run ends when
every breakpoint has reached its max_hits, --timeout passes, Ctrl-C is
pressed or the plan's workload ends; snapctl then deletes its breakpoints and
detaches, and the process goes on running as before. When gdb cannot (it
was stopped, killed, or met an internal error), snapctl continues it, or
takes the breakpoints out of the process itself, and says what became of
the process. By default gdbserver (Debian's gdbserver package) traces the
process and gdb reaches it through gdbserver, so that the process survives
even a gdb killed while its threads run into breakpoints; without
gdbserver, or with --guard=false, gdb traces it itself (see
docs/native.md).

Attaching needs ptrace permission over the process: it must be yours (or
snapctl must hold CAP_SYS_PTRACE), dumpable and not traced already, and
kernel.yama.ptrace_scope must allow it (see snapctl doctor).`
	cmd.Example = `  snapctl attach --timeout 5m plan.yaml $(pidof server)`
	// attach is the native backend's: valgrind's flag and the choice of
	// backend are run's alone (--backend native is still taken).
	cmd.Flags().MarkHidden("valgrind")
	cmd.Flags().MarkHidden("backend")
	cmd.Flags().Lookup("sites").Usage = "also record every allocation's call site with heaptrack, injected into the process, for per-site diffs between stops as massif gives them, at native speed"
	cmd.Flags().BoolVar(&guard, "guard", true, "have gdbserver trace the process, so that it survives gdb being killed while a breakpoint is in it; --guard=false has gdb trace it itself: a stop costs about 5 times less, and threads that take a fast signal timer (hundreds of Hz) are not held at a repeated breakpoint, but a gdb killed while the process runs into a breakpoint takes the process with it")
	return cmd
}
