package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func (a *app) clusterCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "cluster", Short: "Inspect the cluster"})
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show the nodes, the meta leader and the rebalancing state",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			st, err := c.GetClusterStatus(ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(st)
			}
			rebalancing := st.Rebalancing.String()
			if !st.RebalancingPauseEndsAt.IsZero() {
				rebalancing += " until " + timeCell(st.RebalancingPauseEndsAt)
			}
			if err := a.printTable(nil, [][]string{
				{"meta leader", orDash(st.MetaLeaderNodeID)},
				{"rebalancing", rebalancing},
				{"connected to", fmt.Sprintf("node %d at %s", c.NodeID(), a.addr)},
			}); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout)
			rows := make([][]string, len(st.Nodes))
			for i, n := range st.Nodes {
				rows[i] = []string{num(n.NodeID), n.Addr, n.State.String(), num(n.QueueLeaderships)}
			}
			return a.printTable([]string{"NODE", "ADDR", "STATE", "LEADERSHIPS"}, rows)
		},
	})
	return cmd
}
