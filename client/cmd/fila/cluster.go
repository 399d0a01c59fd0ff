package main

import (
	"context"
	"fmt"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) clusterCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "cluster", Short: "Inspect the cluster"})
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show the nodes, the meta leader and the rebalancing state",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var node uint64 // the node that answered
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.ClusterStatus, error) {
				st, err := c.GetClusterStatus(ctx)
				node = c.NodeID()
				return st, err
			}, func(st *fila.ClusterStatus) error { return a.printClusterStatus(st, node) })
		},
	})
	return cmd
}

// printClusterStatus prints the cluster's state as node, the one connected to, answered it.
func (a *app) printClusterStatus(st *fila.ClusterStatus, node uint64) error {
	rebalancing := st.Rebalancing.String()
	if !st.RebalancingPauseEndsAt.IsZero() {
		rebalancing += " until " + timeCell(st.RebalancingPauseEndsAt)
	}
	if err := a.printTable(nil, [][]string{
		{"meta leader", orDash(st.MetaLeaderNodeID)},
		{"rebalancing", rebalancing},
		{"connected to", fmt.Sprintf("node %d at %s", node, a.addr)},
	}); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout)
	rows := make([][]string, len(st.Nodes))
	for i, n := range st.Nodes {
		rows[i] = []string{num(n.NodeID), n.Addr, n.State.String(), num(n.QueueLeaderships)}
	}
	return a.printTable([]string{"NODE", "ADDR", "STATE", "LEADERSHIPS"}, rows)
}
