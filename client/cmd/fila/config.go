package main

import (
	"context"

	"github.com/filamq/fila/client/fila"
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
				return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]string, error) {
					v, err := c.GetConfig(ctx, args[0])
					return map[string]string{"key": args[0], "value": v}, err
				}, func(kv map[string]string) error { return a.printf("%s\n", kv["value"]) })
			},
		},
		&cobra.Command{
			Use:   "set KEY VALUE",
			Short: "Set a config value",
			Args:  exactArgs("KEY", "VALUE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]string, error) {
					return map[string]string{"key": args[0], "value": args[1]}, c.SetConfig(ctx, args[0], args[1])
				}, func(map[string]string) error { return a.printf("%s = %s\n", args[0], args[1]) })
			},
		},
		&cobra.Command{
			Use:   "list [PREFIX]",
			Short: "List config entries, optionally only those under PREFIX",
			Args:  rangeArgs(0, 1, "[PREFIX]"),
			RunE: func(cmd *cobra.Command, args []string) error {
				prefix := ""
				if len(args) == 1 {
					prefix = args[0]
				}
				return ask(a, cmd, func(ctx context.Context, c *fila.Client) ([]fila.ConfigEntry, error) {
					return c.ListConfig(ctx, prefix)
				}, func(entries []fila.ConfigEntry) error {
					rows := make([][]string, len(entries))
					for i, e := range entries {
						rows[i] = []string{e.Key, e.Value}
					}
					return a.printTable([]string{"KEY", "VALUE"}, rows)
				})
			},
		},
	)
	return cmd
}
