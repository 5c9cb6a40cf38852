package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newDoctorCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "doctor [BINARY]",
		Short: "not yet",
		RunE: func(*cobra.Command, []string) error {
			return errors.New("doctor: not yet")
		},
	}
}
