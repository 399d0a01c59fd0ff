package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/spf13/cobra"
)

// The cluster's operations: drain and undrain a node, move a queue's leadership.

// drainPoll is how often `fila cluster drain` asks for the node's remaining leaderships;
// drainStall is how long they may stay the same before it gives up waiting.
var (
	drainPoll  = 250 * time.Millisecond
	drainStall = time.Minute
)

func (a *app) clusterOpCommands() []*cobra.Command {
	var noWait bool
	drain := &cobra.Command{
		Use:   "drain NODE_ID",
		Short: "Move every leadership off a node, and keep it leading nothing until undrained",
		Long: "Move every queue leadership (and the meta group's) off a node by controlled handovers, so\n" +
			"that it can be stopped, upgraded and started again without a queue losing a lease. The node\n" +
			"stays drained, across restarts, until 'fila cluster undrain NODE_ID'. Shows the node's\n" +
			"remaining leaderships until none is left, or returns at once with --no-wait.",
		Args: exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeArg(args[0])
			if err != nil {
				return err
			}
			if err := a.drainNode(cmd, id, true); err != nil {
				return err
			}
			if noWait {
				if a.json {
					return a.printJSON(drainRow{NodeID: id, Draining: true})
				}
				return a.printf("node %d is draining: its leaderships move to other nodes (see 'fila cluster status')\n", id)
			}
			return a.waitDrained(cmd, id)
		},
	}
	drain.Flags().BoolVar(&noWait, "no-wait", false, "return once the drain is recorded, without waiting for the leaderships to move")
	undrain := &cobra.Command{
		Use:   "undrain NODE_ID",
		Short: "Cancel a node's drain: it may lead queues again",
		Args:  exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeArg(args[0])
			if err != nil {
				return err
			}
			if err := a.drainNode(cmd, id, false); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(drainRow{NodeID: id, Draining: false})
			}
			return a.printf("node %d is no longer draining: it may lead queues again\n", id)
		},
	}
	move := &cobra.Command{
		Use:   "move QUEUE NODE_ID",
		Short: "Move a queue's leadership to a node that replicates it",
		Long: "Move a queue's leadership to a node that replicates the queue, and return once that node\n" +
			"leads it. The move pins nothing: a failover or a drain may move the leadership again.",
		Args: exactArgs("QUEUE", "NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			id, err := nodeArg(args[1])
			if err != nil {
				return err
			}
			c, ctx, cancel, err := a.request(cmd)
			if err != nil {
				return err
			}
			defer cancel()
			if err := c.MoveQueueLeader(ctx, queue, id); err != nil {
				if errors.Is(err, fila.ErrNodeNotFound) {
					return fmt.Errorf("node %d is no node of the cluster, or does not replicate queue %q: a queue's leader is one of its replicas (see 'fila cluster status')", id, queue)
				}
				if errors.Is(err, fila.ErrQueueNotFound) {
					return fmt.Errorf("queue %q does not exist", queue)
				}
				return err
			}
			if a.json {
				return a.printJSON(moveRow{Queue: queue, LeaderNodeID: id})
			}
			return a.printf("node %d leads queue %s now\n", id, queue)
		},
	}
	return []*cobra.Command{drain, undrain, move}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// moveRow is what move prints with --json.
type moveRow struct {
	Queue        string `json:"queue"`
	LeaderNodeID uint64 `json:"leader_node_id"`
}

// drainRow is what drain --no-wait and undrain print with --json.
type drainRow struct {
	NodeID   uint64 `json:"node_id"`
	Draining bool   `json:"draining"`
}

// nodeArg parses a node ID argument.
func nodeArg(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, usagef("NODE_ID %q is not a node ID (a number, 1 or more: see 'fila cluster status')", s)
	}
	return id, nil
}

// drainNode starts or cancels the drain of node id.
func (a *app) drainNode(cmd *cobra.Command, id uint64, drain bool) error {
	c, ctx, cancel, err := a.request(cmd)
	if err != nil {
		return err
	}
	defer cancel()
	if err := c.DrainNode(ctx, id, drain); err != nil {
		if errors.Is(err, fila.ErrNodeNotFound) {
			return fmt.Errorf("no node of the cluster has the ID %d (see 'fila cluster status')", id)
		}
		return err
	}
	return nil
}

// waitDrained shows the remaining leaderships of node id, as the node connected to knows them,
// until it leads nothing (no queue, and not the meta group); it gives up when they stay the same
// for drainStall.
func (a *app) waitDrained(cmd *cobra.Command, id uint64) error {
	last, lastChange := -1, time.Now()
	for {
		n, metaLeader, err := a.nodeStatus(cmd, id)
		if err != nil {
			return err
		}
		left := int(n.QueueLeaderships)
		if metaLeader == id {
			left++ // the meta group's leadership moves too
		}
		if left != last {
			last, lastChange = left, time.Now()
			if !a.json && left > 0 {
				if err := a.printf("node %d: %d %s left\n", id, left, plural(left, "leadership", "leaderships")); err != nil {
					return err
				}
			}
		}
		if left == 0 && n.State == fila.NodeStateDraining {
			if a.json {
				return a.printJSON(n)
			}
			return a.printf("node %d is drained: it leads nothing, and stays so until 'fila cluster undrain %d'\n", id, id)
		}
		if time.Since(lastChange) > drainStall {
			return fmt.Errorf("node %d still leads %d groups after %v without progress: a group with no other voter that can take over "+
				"(replication 1, or its other replicas down or draining) stays; the drain goes on", id, left, drainStall)
		}
		select {
		case <-cmd.Context().Done():
			return cmd.Context().Err()
		case <-time.After(drainPoll):
		}
	}
}

// nodeStatus is node id's line of the cluster status, and the meta leader.
func (a *app) nodeStatus(cmd *cobra.Command, id uint64) (fila.NodeStatus, uint64, error) {
	c, ctx, cancel, err := a.request(cmd)
	if err != nil {
		return fila.NodeStatus{}, 0, err
	}
	defer cancel()
	st, err := c.GetClusterStatus(ctx)
	if err != nil {
		return fila.NodeStatus{}, 0, err
	}
	for _, n := range st.Nodes {
		if n.NodeID == id {
			return n, st.MetaLeaderNodeID, nil
		}
	}
	return fila.NodeStatus{}, 0, fmt.Errorf("the cluster status lists no node %d", id)
}
