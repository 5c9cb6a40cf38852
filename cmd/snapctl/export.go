package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newExportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "export FILE[#N]",
		Short: "not yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("export: not yet")
		},
	}
}
