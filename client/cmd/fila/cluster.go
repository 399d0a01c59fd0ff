package main

import (
	"context"
	"fmt"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

func (a *app) clusterCommand() *cobra.Command {
	cmd := group(&cobra.Command{Use: "cluster", Short: "Inspect and operate the cluster"})
	cmd.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Show the nodes, the meta leader and the rebalancing state",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var node uint64 // the node that answered
			var addr string
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) (*fila.ClusterStatus, error) {
				st, err := c.GetClusterStatus(ctx)
				node, addr = c.NodeID(), c.Addr()
				return st, err
			}, func(st *fila.ClusterStatus) error { return a.printClusterStatus(st, node, addr) })
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "routes [QUEUE...]",
		Short: "Show which node leads each queue (every queue without arguments)",
		Long: "Show which node leads each queue, and each shard of a sharded queue, as the node\n" +
			"connected to knows it: its copy of the cluster's state may be a moment behind.",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, queues []string) error {
			return ask(a, cmd, func(ctx context.Context, c *fila.Client) ([]routeRow, error) {
				routes, err := c.GetRoutes(ctx, queues...)
				if err != nil {
					return nil, err
				}
				return routeRows(routes), nil
			}, a.printRoutes)
		},
	})
	cmd.AddCommand(a.clusterOpCommands()...) // cluster_ops.go
	cmd.AddCommand(a.rebalanceCommand())     // cluster_rebalance.go
	cmd.AddCommand(a.memberCommands()...)    // cluster_members.go
	cmd.AddCommand(a.joinCommand())          // cluster_join.go
	return cmd
}

// routeRow is one queue's (or shard's) leader, as printed and as --json.
type routeRow struct {
	Queue        string  `json:"queue"`
	Shard        *uint32 `json:"shard,omitempty"` // nil: the queue is not sharded
	LeaderNodeID uint64  `json:"leader_node_id"`  // 0: the node does not know
	LeaderAddr   string  `json:"leader_addr"`     // empty: the node does not know
}

func routeRows(routes []fila.RouteEntry) []routeRow {
	rows := []routeRow{}
	for _, r := range routes {
		if len(r.Shards) == 0 {
			rows = append(rows, routeRow{Queue: r.Queue, LeaderNodeID: r.LeaderNodeID, LeaderAddr: r.LeaderAddr})
		}
		for _, s := range r.Shards {
			rows = append(rows, routeRow{Queue: r.Queue, Shard: &s.ShardIndex, LeaderNodeID: s.LeaderNodeID, LeaderAddr: s.LeaderAddr})
		}
	}
	return rows
}

func (a *app) printRoutes(rows []routeRow) error {
	table := make([][]string, len(rows))
	for i, r := range rows {
		shard := "-"
		if r.Shard != nil {
			shard = num(*r.Shard)
		}
		table[i] = []string{r.Queue, shard, orDash(r.LeaderNodeID), orDash(r.LeaderAddr)}
	}
	return a.printTable([]string{"QUEUE", "SHARD", "LEADER", "ADDR"}, table)
}

// printClusterStatus prints the cluster's state as node, the one connected to, answered it.
func (a *app) printClusterStatus(st *fila.ClusterStatus, node uint64, addr string) error {
	rebalancing := st.Rebalancing.String()
	if !st.RebalancingPauseEndsAt.IsZero() {
		rebalancing += " until " + timeCell(st.RebalancingPauseEndsAt)
	}
	if err := a.printTable(nil, [][]string{
		{"meta leader", orDash(st.MetaLeaderNodeID)},
		{"rebalancing", rebalancing},
		{"connected to", fmt.Sprintf("node %d at %s", node, addr)},
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
