package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/filamq/fila/client/fila"
)

// RollingRestart is planned maintenance rather than a fault: node after node (in ID order, round
// and round), Inject drains the node (DrainNode through another node), waits until the cluster
// status shows it leading no queue and not the meta group, and stops it with SIGTERM; heal
// starts it again and cancels the drain. docs/cluster.md's rolling restart, under the
// workload: the history must show nothing lost and no lease dropped.
type RollingRestart struct {
	Cluster *Cluster

	mu   sync.Mutex
	next int
}

// drainWait bounds how long a drain may take to leave the node leading nothing.
const drainWait = time.Minute

func (r *RollingRestart) Inject(*rand.Rand) (string, func() error, error) {
	r.mu.Lock()
	n := r.Cluster.Nodes[r.next%len(r.Cluster.Nodes)]
	r.next++
	r.mu.Unlock()
	other := r.Cluster.Nodes[(n.ID)%len(r.Cluster.Nodes)] // the next node: any but n
	if err := drain(other.Addr, n.ID, true); err != nil {
		return "", nil, err
	}
	if err := n.Terminate(); err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("restart node %d (drained, SIGTERM)", n.ID), func() error {
		if err := n.Start(); err != nil {
			return err
		}
		return drain(other.Addr, n.ID, false)
	}, nil
}

// drain starts (on) or cancels the drain of node id through the node at addr; a drain waits
// until the node leads nothing.
func drain(addr string, id int, on bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), drainWait)
	defer cancel()
	c, err := fila.Dial(ctx, addr, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	for {
		err := c.DrainNode(ctx, uint64(id), on)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("drain of node %d (%v): %w", id, on, err)
		}
		time.Sleep(100 * time.Millisecond) // a meta leader changing: ask again
	}
	for on {
		st, err := c.GetClusterStatus(ctx)
		if err == nil && st.MetaLeaderNodeID != uint64(id) {
			leads := uint32(0)
			for _, ns := range st.Nodes {
				if ns.NodeID == uint64(id) {
					leads = ns.QueueLeaderships
				}
			}
			if leads == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %d still leads after %v of draining (status %+v, %v)", id, drainWait, st, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Terminate stops the node with SIGTERM, as an operator does, and waits until it has exited
// (kill -9 after StartWait: a node that does not stop is a failure the history will show).
func (n *Node) Terminate() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("node %d is not running", n.ID)
	}
	fmt.Fprintf(n.Log, "--- chaos: SIGTERM node %d\n", n.ID)
	n.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-n.exited:
		if !n.cmd.ProcessState.Success() {
			err = fmt.Errorf("node %d stopped on SIGTERM with %v:\n%s", n.ID, n.cmd.ProcessState, n.Log.tail(20))
		}
	case <-time.After(StartWait):
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.exited
		err = fmt.Errorf("node %d did not stop within %v of SIGTERM", n.ID, StartWait)
	}
	n.cmd, n.exited, n.paused = nil, nil, false
	return err
}
