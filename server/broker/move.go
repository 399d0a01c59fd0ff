package broker

import (
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// MoveQueueLeader (clustering.md, "Operations"): any node takes it. It checks the queue and the
// target against its copy of the meta state, finds the group's leader as it knows it, and has
// that node transfer the leadership to the target — itself when it leads, else over the node
// link (MoveLeader) — and answers once the target leads the group, or the transfer failed, within
// moveTimeout. A leader that moved meanwhile (a stale route) is looked up again. A draining target
// is refused (it would hand the leadership on at once). A move pins nothing: an election, or a
// drain, may move the leadership again later.

// leaderMover is the optional side of a Network that hands a MoveQueueLeader to the node that
// leads the queue's group (nodelink.Link): raft.ErrNotLeader when that node does not lead it, an
// error whose Temporary method reports true when the link failed (asked again).
type leaderMover interface {
	MoveLeader(node meta.NodeID, queue string, target meta.NodeID, timeout time.Duration) error
}

// MoveQueueLeader moves the leadership of queue's group to node target (service.Cluster); ok is
// false on a single node.
func (b *Broker) MoveQueueLeader(queue string, target uint64) (bool, *Error) {
	if !b.clustered() {
		return false, nil
	}
	cat := b.catalog()
	a, ok := cat.Assignment(queue)
	if !ok {
		return true, errorf(b.absentCode(queue), "queue %q does not exist", queue)
	}
	id := nodeName(target)
	if _, ok := cat.Node(id); !ok {
		return true, errorf(CodeNodeNotFound, "no node of the cluster has the ID %d", target)
	}
	if !a.Has(id) {
		return true, errorf(CodeNodeNotFound, "node %d is not a member of queue %q's group (it replicates on nodes %v)", target, queue, a.Replicas)
	}
	if cat.Draining(id) {
		return true, errorf(CodeInvalidConfigValue, "node %d is draining: it would hand the leadership of queue %q on at once; undrain it first", target, queue)
	}
	deadline := time.Now().Add(moveTimeout)
	for attempt := 0; ; attempt++ {
		err := b.moveOnce(a, id, attempt, deadline)
		switch {
		case err == nil:
			return true, nil
		case !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, errNoLeaderKnown) && !temporary(err):
			return true, errorf(CodeInternalError, "moving the leadership of queue %q to node %d failed: %v", queue, target, err)
		case time.Now().After(deadline):
			return true, errorf(CodeNodeNotReady, "no leader of queue %q took the move to node %d within %v (an election?); retry", queue, target, moveTimeout)
		}
		time.Sleep(50 * time.Millisecond) // the leader changed meanwhile, or is being elected
	}
}

// temporary reports whether err is a failure of the node link (the leader unreachable, no answer
// in time) after which the move may be asked again.
func temporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// errNoLeaderKnown: no leader of the group is known here now.
var errNoLeaderKnown = errors.New("broker: no leader of the group is known")

// moveOnce has the group's leader, as this node knows it, move the leadership to target. A node
// without a replica of the group knows only its placement: after a first try at the preferred
// leader it asks each replica in turn, one per attempt (the target too: it answers at once when
// it leads).
func (b *Broker) moveOnce(a meta.Assignment, target meta.NodeID, attempt int, deadline time.Time) error {
	leader := b.leaders([]meta.Assignment{a})[0]
	guessed := b.lookup(a.Name()).a == nil
	if guessed && attempt > 0 {
		leader = a.Replicas[attempt%len(a.Replicas)]
	}
	switch leader {
	case target:
		if guessed {
			break // ask it: it answers at once when it leads
		}
		return nil
	case "":
		return errNoLeaderKnown
	case b.nodeID():
		return b.moveHere(a.Name(), target, deadline)
	}
	mover, ok := b.opts.Cluster.Network.(leaderMover)
	if !ok {
		return errors.New("the node link hands no move to another node")
	}
	return mover.MoveLeader(leader, a.Name(), target, time.Until(deadline))
}
