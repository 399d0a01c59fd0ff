package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/filamq/fila/client/fila"
)

// joinPoll is how often `fila cluster join` asks for the cluster status.
var joinPoll = 250 * time.Millisecond

// joinCommand is `fila cluster join NODE_ID`: a node joins by itself (fila-server --join HOST:PORT,
// any member's inter-node address), and this waits until the cluster lists it as a member that is
// up, so that a script or an operator knows when the node is in.
func (a *app) joinCommand() *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "join NODE_ID",
		Short: "Wait until a node started with --join is a member of the cluster and up",
		Long: "A node joins the cluster by itself: start it with 'fila-server --node-id NODE_ID --join HOST:PORT'\n" +
			"(any member's inter-node address, its --cluster-listen). This command waits until the node\n" +
			"asked (--addr) lists NODE_ID as a member that is up, shows it, and exits 0; it exits 1 if that\n" +
			"has not happened within --wait.",
		Args: exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := nodeArg(args[0])
			if err != nil {
				return err
			}
			n, err := a.awaitMember(cmd, id, wait)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(n)
			}
			return a.printf("node %d is a member of the cluster: %s, at %s, leading %d %s\n", id, n.State, n.Addr,
				n.QueueLeaderships, plural(int(n.QueueLeaderships), "queue", "queues"))
		},
	}
	cmd.Flags().DurationVar(&wait, "wait", 2*time.Minute, "how long to wait for the node")
	return cmd
}

// awaitMember asks for the cluster status until it lists node id up (or draining), at most wait.
func (a *app) awaitMember(cmd *cobra.Command, id uint64, wait time.Duration) (fila.NodeStatus, error) {
	deadline := time.Now().Add(wait)
	var last string
	for {
		n, _, err := a.nodeStatus(cmd, id)
		switch {
		case err == nil && n.State != fila.NodeStateUnreachable:
			return n, nil
		case err == nil:
			last = "it is a member, unreachable from the node asked"
		default:
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fila.NodeStatus{}, fmt.Errorf("node %d has not joined within %v (%s): is it started with --join, "+
				"and does its --node-id differ from every member's?", id, wait, last)
		}
		time.Sleep(joinPoll)
	}
}
