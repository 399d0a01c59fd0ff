package nodelink

import (
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Forwarded admin requests: a client's admin request about one queue (GetStats, UpdateQueue,
// DeleteQueue, Redrive) that a node cannot carry out from its own state — it follows the queue's
// group, and a follower's replica holds the group's log, not its figures or messages — is handed
// to the node that leads the group (ForwardAdmin), which carries it out as it would for the client
// and returns the answer's FIBP frame; a ListQueues is handed to each other leader for its
// queues. The node's FIBP server answers them (SetAdminServer); the link carries only the opcode
// and bytes.

// AdminServer carries out a forwarded FIBP admin request: the answer's opcode and body, or why
// there is none.
type AdminServer func(op uint8, body []byte) (uint8, []byte, error)

// SetAdminServer has fn carry out the admin requests other nodes forward to this one.
func (l *Link) SetAdminServer(fn AdminServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.admin = fn
}

// ForwardAdmin hands the FIBP admin request op/body to node and returns its answer, waiting at
// most timeout: a *RemoteError when node could not carry it out, else a failure of the link.
func (l *Link) ForwardAdmin(node meta.NodeID, op uint8, body []byte, timeout time.Duration) (uint8, []byte, error) {
	c, err := l.connTo(node)
	if err != nil {
		return 0, nil, linkFailure{err}
	}
	var aop uint8
	var abody []byte
	err = c.roundTrip(&cluster.ForwardAdmin{FibpOpcode: op, Body: body}, max(timeout, time.Millisecond),
		func(op cluster.Opcode, body []byte) error {
			var x cluster.ForwardAdminResult
			if err := expect(op, cluster.OpForwardAdminResult, &x, body); err != nil {
				return err
			}
			if x.ErrorCode != cluster.CodeOk {
				return &RemoteError{Code: x.ErrorCode, Message: x.ErrorMessage}
			}
			aop, abody = x.FibpOpcode, clone(x.Body)
			return nil
		})
	return aop, abody, err
}

// forwardedAdmin carries out a peer's ForwardAdmin and answers it, on a goroutine of its own (the
// request may wait for a queue's actor or the meta group).
func (c *conn) forwardedAdmin(id uint32, body []byte) error {
	var req cluster.ForwardAdmin
	if err := req.Decode(body); err != nil {
		return err
	}
	req.Body = clone(req.Body)
	c.l.mu.Lock()
	serve := c.l.admin
	c.l.mu.Unlock()
	go func() {
		res := &cluster.ForwardAdminResult{ErrorCode: cluster.CodeOk}
		if serve == nil {
			res.ErrorCode, res.ErrorMessage = cluster.CodeUnavailable, "node "+string(c.l.cfg.NodeID)+" carries out no forwarded admin request"
		} else if op, b, err := serve(req.FibpOpcode, req.Body); err != nil {
			res.ErrorCode, res.ErrorMessage = cluster.CodeFailed, err.Error()
		} else {
			res.FibpOpcode, res.Body = op, b
		}
		_ = c.send(0, id, res)
	}()
	return nil
}
