package main

import (
	"context"
	"fmt"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) keyCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "key", Short: "Create, revoke and list API keys (superadmin)"})
	cmd.AddCommand(a.keyCreateCommand(), a.keyRevokeCommand(), a.keyListCommand())
	return cmd
}

func (a *app) keyCreateCommand() *cobra.Command {
	var superadmin bool
	var expires duration
	var expiresAt string
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create an API key and print its secret (shown this once only)",
		Args:  exactArgs("NAME"),
	}
	cmd.Flags().BoolVar(&superadmin, "superadmin", false, "the key may do everything, key management included")
	cmd.Flags().DurationVar(&expires.Duration, "expires", 0, "the key expires after this long, such as 720h (default: never)")
	cmd.Flags().StringVar(&expiresAt, "expires-at", "", "the key expires at this RFC 3339 time")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var at time.Time
		switch {
		case expires.Duration != 0 && expiresAt != "":
			return usagef("give --expires or --expires-at, not both")
		case expires.Duration < 0:
			return usagef("--expires %v: must be positive", expires.Duration)
		case expires.Duration > 0:
			at = time.Now().Add(expires.Duration)
		case expiresAt != "":
			t, err := time.Parse(time.RFC3339, expiresAt)
			if err != nil {
				return usagef("--expires-at %q: want an RFC 3339 time such as 2027-01-31T00:00:00Z", expiresAt)
			}
			at = t
		}
		return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.APIKey, error) {
			return c.CreateAPIKey(ctx, args[0], at, superadmin)
		}, func(k *fila.APIKey) error {
			if err := a.printTable(nil, [][]string{{"key id", k.ID}, {"secret", k.Key}, {"superadmin", fmt.Sprint(k.IsSuperadmin)}, {"expires", timeCell(at)}}); err != nil {
				return err
			}
			_, err := fmt.Fprintln(a.stderr, "fila: the secret is shown once and not stored; give it to the client (--api-key or FILA_API_KEY)")
			return err
		})
	}
	return cmd
}

func (a *app) keyRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key; connections using it are refused at their next request",
		Args:  exactArgs("KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (map[string]any, error) {
				return map[string]any{"key_id": args[0], "revoked": true}, c.RevokeAPIKey(ctx, args[0])
			}, func(map[string]any) error { return a.printf("revoked %s\n", args[0]) })
		},
	}
}

func (a *app) keyListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List API keys (never their secrets)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) ([]fila.APIKeyInfo, error) {
				return c.ListAPIKeys(ctx)
			}, func(keys []fila.APIKeyInfo) error {
				rows := make([][]string, len(keys))
				for i, k := range keys {
					rows[i] = []string{k.ID, k.Name, timeCell(k.CreatedAt), timeCell(k.ExpiresAt), fmt.Sprint(k.IsSuperadmin)}
				}
				return a.printTable([]string{"KEY ID", "NAME", "CREATED", "EXPIRES", "SUPERADMIN"}, rows)
			})
		},
	}
}
