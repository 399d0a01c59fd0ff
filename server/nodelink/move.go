package nodelink

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Moving a leadership: a node that received a client's MoveQueueLeader for a queue another node
// leads hands it to that node (MoveLeader), which transfers the group's leadership to the target
// and answers once the target has taken over, or the transfer failed.

// LeaderMover is the optional side of a Handler that moves the leadership of a queue group it
// leads (the broker). MoveLeader may block until the move is done; it returns raft.ErrNotLeader
// when this node does not lead the group.
type LeaderMover interface {
	MoveLeader(queue string, target meta.NodeID) error
}

// MoveLeader asks node to move the leadership of queue's group to target and waits, at most
// timeout, for its answer: nil once target leads, raft.ErrNotLeader when node does not lead the
// group, a *RemoteError when the move failed there, else a failure of the link (node
// unreachable, no answer in time), whose Temporary method reports true: the move may be asked of
// the group's leader again.
func (l *Link) MoveLeader(node meta.NodeID, queue string, target meta.NodeID, timeout time.Duration) error {
	c, err := l.connTo(node)
	if err != nil {
		return linkFailure{err}
	}
	var remote bool
	err = c.roundTrip(&cluster.MoveLeader{Queue: queue, Target: string(target)}, max(timeout, time.Millisecond),
		func(op cluster.Opcode, body []byte) error {
			remote = true
			var x cluster.MoveLeaderResult
			if err := expect(op, cluster.OpMoveLeaderResult, &x, body); err != nil {
				return err
			}
			switch x.ErrorCode {
			case cluster.CodeOk:
				return nil
			case cluster.CodeNotLeader, cluster.CodeUnknownGroup:
				return raft.ErrNotLeader
			}
			return &RemoteError{Code: x.ErrorCode, Message: x.ErrorMessage}
		})
	if err != nil && !remote {
		return linkFailure{err}
	}
	return err
}

// linkFailure is a request that failed on the link, not at the node it was for.
type linkFailure struct{ err error }

func (e linkFailure) Error() string   { return e.err.Error() }
func (e linkFailure) Unwrap() error   { return e.err }
func (e linkFailure) Temporary() bool { return true }

// moveLeader carries out a peer's MoveLeader and answers it (on a goroutine of its own: the move
// waits for the transfer).
func (c *conn) moveLeader(id uint32, body []byte) error {
	var req cluster.MoveLeader
	if err := req.Decode(body); err != nil {
		return err
	}
	c.l.mu.Lock()
	h, _ := c.l.handler.(LeaderMover)
	c.l.mu.Unlock()
	if h == nil {
		return c.send(0, id, &cluster.Error{Code: cluster.CodeUnavailable, Message: "node " + string(c.l.cfg.NodeID) + " moves no leadership"})
	}
	go func() {
		err := h.MoveLeader(req.Queue, meta.NodeID(req.Target))
		res := &cluster.MoveLeaderResult{ErrorCode: cluster.CodeOk}
		switch {
		case errors.Is(err, raft.ErrNotLeader):
			res.ErrorCode, res.ErrorMessage = cluster.CodeNotLeader, fmt.Sprintf("node %s does not lead queue %q", c.l.cfg.NodeID, req.Queue)
		case err != nil:
			res.ErrorCode, res.ErrorMessage = cluster.CodeFailed, err.Error()
		}
		_ = c.send(0, id, res)
	}()
	return nil
}
