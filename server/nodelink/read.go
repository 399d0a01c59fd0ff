package nodelink

import (
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Forwarded reads: a client's read-only admin request (GetStats, ListQueues) that a node cannot
// answer from its own state — it follows the queue's group, and a follower's replica holds no
// figures — is handed to the node that leads the group (ForwardRead), which answers it as it
// would answer the client and returns the answer's FIBP frame. The node's FIBP server answers
// them (SetReadServer); the link only carries the opcode and bytes.

// ReadServer answers a forwarded FIBP read: the answer's opcode and body, or why there is none.
type ReadServer func(op uint8, body []byte) (uint8, []byte, error)

// SetReadServer has fn answer the reads other nodes forward to this one.
func (l *Link) SetReadServer(fn ReadServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads = fn
}

// ForwardRead hands the FIBP read op/body to node and returns its answer, waiting at most
// timeout: a *RemoteError when node could not answer it, else a failure of the link.
func (l *Link) ForwardRead(node meta.NodeID, op uint8, body []byte, timeout time.Duration) (uint8, []byte, error) {
	c, err := l.connTo(node)
	if err != nil {
		return 0, nil, linkFailure{err}
	}
	var aop uint8
	var abody []byte
	err = c.roundTrip(&cluster.ForwardRead{FibpOpcode: op, Body: body}, max(timeout, time.Millisecond),
		func(op cluster.Opcode, body []byte) error {
			var x cluster.ForwardReadResult
			if err := expect(op, cluster.OpForwardReadResult, &x, body); err != nil {
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

// forwardedRead answers a peer's ForwardRead, on a goroutine of its own (the read may wait for a
// queue's actor).
func (c *conn) forwardedRead(id uint32, body []byte) error {
	var req cluster.ForwardRead
	if err := req.Decode(body); err != nil {
		return err
	}
	req.Body = clone(req.Body)
	c.l.mu.Lock()
	serve := c.l.reads
	c.l.mu.Unlock()
	go func() {
		res := &cluster.ForwardReadResult{ErrorCode: cluster.CodeOk}
		if serve == nil {
			res.ErrorCode, res.ErrorMessage = cluster.CodeUnavailable, "node "+string(c.l.cfg.NodeID)+" answers no forwarded read"
		} else if op, b, err := serve(req.FibpOpcode, req.Body); err != nil {
			res.ErrorCode, res.ErrorMessage = cluster.CodeFailed, err.Error()
		} else {
			res.FibpOpcode, res.Body = op, b
		}
		_ = c.send(0, id, res)
	}()
	return nil
}
