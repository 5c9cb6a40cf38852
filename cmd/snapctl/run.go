package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run PLAN BINARY [ARGS...]",
		Short: "not yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("run: not yet")
		},
	}
}
