package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) configCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "config", Short: "Read and change the broker's runtime configuration"})
	cmd.AddCommand(
		&cobra.Command{
			Use:   "get KEY",
			Short: "Print a config value",
			Args:  exactArgs("KEY"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ctx, cancel, err := a.request(cmd)
				if err != nil {
					return err
				}
				defer cancel()
				v, err := c.GetConfig(ctx, args[0])
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]string{"key": args[0], "value": v})
				}
				_, err = fmt.Fprintln(a.stdout, v)
				return err
			},
		},
		&cobra.Command{
			Use:   "set KEY VALUE",
			Short: "Set a config value",
			Args:  exactArgs("KEY", "VALUE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ctx, cancel, err := a.request(cmd)
				if err != nil {
					return err
				}
				defer cancel()
				if err := c.SetConfig(ctx, args[0], args[1]); err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]string{"key": args[0], "value": args[1]})
				}
				_, err = fmt.Fprintf(a.stdout, "%s = %s\n", args[0], args[1])
				return err
			},
		},
		&cobra.Command{
			Use:   "list [PREFIX]",
			Short: "List config entries, optionally only those under PREFIX",
			Args:  rangeArgs(0, 1, "[PREFIX]"),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, ctx, cancel, err := a.request(cmd)
				if err != nil {
					return err
				}
				defer cancel()
				prefix := ""
				if len(args) == 1 {
					prefix = args[0]
				}
				entries, err := c.ListConfig(ctx, prefix)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(entries)
				}
				rows := make([][]string, len(entries))
				for i, e := range entries {
					rows[i] = []string{e.Key, e.Value}
				}
				return a.printTable([]string{"KEY", "VALUE"}, rows)
			},
		},
	)
	return cmd
}
