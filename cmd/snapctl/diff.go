package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDiffCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "diff A B",
		Short: "not yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("diff: not yet")
		},
	}
}
