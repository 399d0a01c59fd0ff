package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) aclCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "acl", Short: "Set and read an API key's permissions (superadmin)"})
	cmd.AddCommand(a.aclSetCommand(), a.aclGetCommand())
	return cmd
}

// parsePermission reads KIND:PATTERN.
func parsePermission(s string) (fila.Permission, error) {
	kind, pattern, ok := strings.Cut(s, ":")
	if !ok || kind == "" || pattern == "" {
		return fila.Permission{}, usagef("permission %q: want KIND:PATTERN, such as produce:orders or consume:'jobs.*'", s)
	}
	return fila.Permission{Kind: kind, Pattern: pattern}, nil
}

func (a *app) aclSetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "set KEY_ID [KIND:PATTERN...]",
		Short: "Replace a key's permissions (kinds produce, consume, admin on queues, throttle on throttle names; * in a pattern matches any run of characters)",
		Long: "Replace a key's permissions with the ones given (none: the key may do nothing). Kinds: produce\n" +
			"(Enqueue), consume (Consume, Ack, Nack, ExtendLease), admin (create, update, delete, stats,\n" +
			"redrive), and throttle (declaring and reading the throttles whose names match; Fila's\n" +
			"addition to the FIBP kinds). A pattern is a queue name, or for throttle a throttle name, where *\n" +
			"matches any run of characters: orders does not match orders.dlq, orders* matches both.",
		Args: rangeArgs(1, 1<<16, "KEY_ID [KIND:PATTERN...]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			perms := make([]fila.Permission, 0, len(args)-1)
			for _, s := range args[1:] {
				p, err := parsePermission(s)
				if err != nil {
					return err
				}
				perms = append(perms, p)
			}
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (fila.ACL, error) {
				return fila.ACL{KeyID: args[0], Permissions: perms}, c.SetACL(ctx, args[0], perms)
			}, func(fila.ACL) error { return a.printf("%s: %d permissions\n", args[0], len(perms)) })
		},
	}
}

func (a *app) aclGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get KEY_ID",
		Short: "Print a key's permissions",
		Args:  exactArgs("KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.ACL, error) {
				return c.GetACL(ctx, args[0])
			}, func(acl *fila.ACL) error {
				if acl.IsSuperadmin {
					fmt.Fprintf(a.stdout, "%s is a superadmin key: it may do everything\n", acl.KeyID)
				}
				rows := make([][]string, len(acl.Permissions))
				for i, p := range acl.Permissions {
					rows[i] = []string{p.Kind, p.Pattern}
				}
				return a.printTable([]string{"KIND", "PATTERN"}, rows)
			})
		},
	}
}
