package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd(version string) *cobra.Command {
	root := &cobra.Command{
		Use:   "snapctl",
		Short: "Find the allocation call sites that grow between breakpoints",
		Long: `snapctl runs a C or C++ program under valgrind's massif heap profiler,
stops it through gdb at the breakpoints a plan declares, takes a detailed
massif snapshot at every stop and reports which allocation call sites grow
between stops, with their stacks.

    snapctl run plan.yaml ./binary [args...]`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError{err}
	})
	root.AddCommand(
		newRunCmd(),
		newDiffCmd(),
		newShowCmd(),
		newExportCmd(),
		newDoctorCmd(),
	)
	return root
}
