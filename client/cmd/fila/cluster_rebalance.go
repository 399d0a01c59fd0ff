package main

import (
	"context"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

// `fila cluster rebalance enable|pause DURATION|disable`: the cluster's automatic leadership
// rebalancing, and the mode it is in afterwards.

// rebalanceRow is the rebalancing mode as printed with --json (the fields of the cluster status).
type rebalanceRow struct {
	Rebalancing fila.RebalancingMode `json:"rebalancing"`
	PauseEndsAt time.Time            `json:"rebalancing_pause_ends_at,omitzero"` // zero unless paused
}

func (a *app) rebalanceCommand() *cobra.Command {
	cmd := group(&cobra.Command{
		Use:   "rebalance",
		Short: "Enable, pause or disable the automatic spreading of queue leaderships",
		Long: "While rebalancing is enabled (the default), the cluster moves queue leaderships, a few at a\n" +
			"time, until every node that is up and not draining leads as many queues as the others, give or\n" +
			"take one. A pause lasts the given time and then rebalancing resumes by itself; disabled, it\n" +
			"stays off until enabled again. The mode is the cluster's, kept across restarts; 'fila cluster\n" +
			"status' shows it.",
	})
	set := func(use, short string, mode fila.RebalancingMode, args cobra.PositionalArgs) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  args,
			RunE: func(cmd *cobra.Command, args []string) error {
				var pause time.Duration
				if mode == fila.RebalancingPaused {
					d, err := time.ParseDuration(args[0])
					if err != nil || d < time.Millisecond {
						return usagef("DURATION %q is not a duration of 1ms or more, such as 30s, 10m or 2h", args[0])
					}
					pause = d
				}
				return ask(a, cmd, func(ctx context.Context, c *fila.Client) (rebalanceRow, error) {
					if err := c.SetRebalancing(ctx, mode, pause); err != nil {
						return rebalanceRow{}, err
					}
					st, err := c.GetClusterStatus(ctx)
					if err != nil {
						return rebalanceRow{}, err
					}
					return rebalanceRow{Rebalancing: st.Rebalancing, PauseEndsAt: st.RebalancingPauseEndsAt}, nil
				}, a.printRebalancing)
			},
		}
	}
	cmd.AddCommand(
		set("enable", "Spread queue leaderships evenly across the nodes, from now on", fila.RebalancingEnabled, noArgs),
		set("pause DURATION", "Stop moving leaderships for DURATION (such as 30m), then resume by itself", fila.RebalancingPaused,
			exactArgs("DURATION")),
		set("disable", "Stop moving leaderships until 'fila cluster rebalance enable'", fila.RebalancingDisabled, noArgs),
	)
	return cmd
}

// printRebalancing shows the mode the cluster is in.
func (a *app) printRebalancing(r rebalanceRow) error {
	switch r.Rebalancing {
	case fila.RebalancingPaused:
		return a.printf("rebalancing: paused until %s (it resumes by itself then)\n", timeCell(r.PauseEndsAt))
	case fila.RebalancingDisabled:
		return a.printf("rebalancing: disabled (until 'fila cluster rebalance enable')\n")
	}
	return a.printf("rebalancing: %s\n", r.Rebalancing)
}
