package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func newRootCmd(version string) *cobra.Command {
	root := &cobra.Command{
		Use:   "snapctl",
		Short: "Find the allocation call sites that grow between breakpoints",
		Long: `snapctl finds the memory a C or C++ program keeps. It stops the program
through gdb at the breakpoints a plan declares, measures the heap at every
stop and reports what grew between stops, and where. Three backends
measure (the plan's backend, or --backend):

  massif    the default: the program runs under valgrind's massif, slower;
            exact bytes and blocks per allocation call site at every stop
  memcheck  under valgrind's memcheck, slower still: massif's per-site
            figures, plus which growing blocks are lost and, for those
            still reachable, what holds them (a global, a thread's stack)
  native    the program runs at native speed under gdb: resident memory
            and the allocator (glibc's or jemalloc's) at every stop, and a
            verdict per breakpoint (leak, retention, growth outside the
            heap); --sites adds the per-site figures massif gives,
            recorded with heaptrack

    snapctl run plan.yaml ./binary [args...]
    snapctl run --sites plan.yaml ./binary [args...]
    snapctl attach plan.yaml PID      (native: a process already running)`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// The root runs so that cobra validates its arguments with Args
		// below: otherwise cobra reports an unknown subcommand with a
		// plain error, and "snapctl foo" would exit 1 instead of 2.
		Args: unknownCommand,
		RunE: needsCommand,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{err}
	})
	root.AddCommand(
		newRunCmd(),
		newAttachCmd(),
		newDiffCmd(),
		newShowCmd(),
		newExportCmd(),
		newCompareCmd(),
		newDoctorCmd(),
	)
	// cobra adds its completion command lazily; add it now so its
	// argument checks are wrapped below with the others.
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	groupsOnly(root)
	usageArgs(root)
	return root
}

// groupsOnly makes every command that only groups others (completion) fail
// as the root does when it is run without one of them or with one it does
// not have, and "help" fail for a command snapctl does not have; cobra
// would print the help and exit 0.
func groupsOnly(cmd *cobra.Command) {
	for _, sub := range cmd.Commands() {
		if sub.HasSubCommands() && !sub.Runnable() {
			sub.Args, sub.RunE = unknownCommand, needsCommand
		}
		if sub.Name() == "help" && sub.Parent() == cmd.Root() {
			sub.Args = helpTopic
		}
		groupsOnly(sub)
	}
}

// helpTopic rejects "snapctl help X" when X names no command; cobra would
// print the root's help and exit 0.
func helpTopic(cmd *cobra.Command, args []string) error {
	if _, rest, err := cmd.Root().Find(args); err != nil || len(rest) > 0 {
		return usageError{fmt.Errorf("unknown help topic %q", strings.Join(args, " "))}
	}
	return nil
}

// needsCommand is what a command that only groups others does when run
// alone: print its usage to stderr and fail as a usage error (exit 2).
func needsCommand(cmd *cobra.Command, _ []string) error {
	fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() && sub.Name() != "help" {
			names = append(names, sub.Name())
		}
	}
	last := len(names) - 1
	if last > 0 {
		names[last-1] += " or " + names[last]
		names = names[:last]
	}
	return usageError{fmt.Errorf("missing command for %q: %s", cmd.CommandPath(), strings.Join(names, ", "))}
}

// enumFlag makes the shell complete the values flag of cmd takes.
func enumFlag(cmd *cobra.Command, flag string, values ...string) {
	if err := cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err) // a flag name misspelt here
	}
}

// unknownCommand rejects arguments to the root: the first one names a
// subcommand snapctl does not have.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if !cmd.DisableSuggestions {
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %s?", strings.Join(s, " or "))
		}
	}
	return usageError{fmt.Errorf("%s", msg)}
}

// usageArgs makes every argument-count error of cmd and its subcommands a
// usageError, so a wrong number of arguments exits 2 whichever command,
// ours or one cobra adds, detects it.
func usageArgs(cmd *cobra.Command) {
	if validate := cmd.Args; validate != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := validate(c, args)
			var ue usageError
			if err == nil || errors.As(err, &ue) {
				return err
			}
			return usageError{err}
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}
