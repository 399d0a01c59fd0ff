package main

import (
	"fmt"

	"github.com/filamq/fila/client/internal/buildinfo"
	"github.com/spf13/cobra"
)

// versionCommand prints the CLI's own build (it does not contact the broker).
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the CLI's version, commit and Go version",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			bi := buildinfo.Read()
			if a.json {
				return a.printJSON(bi)
			}
			_, err := fmt.Fprintln(a.stdout, bi.String("fila"))
			return err
		},
	}
}
