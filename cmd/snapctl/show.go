package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show FILE",
		Short: "not yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("show: not yet")
		},
	}
}
