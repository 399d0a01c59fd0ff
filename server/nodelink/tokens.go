package nodelink

import (
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Throttle tokens (throttling.md, "Cluster"; server/throttle/grant): a queue leader whose
// throttle another node owns asks that node for tokens of a bucket (TokenRequest, answered by a
// TokenGrant) and gives back what it will not spend (TokenReturn). The owner's broker answers
// them (SetTokenServer); the link carries the frames.

// TokenServer answers the token requests other nodes send this one (from names the sender).
// Its methods are called on a goroutine of their own per request; the frames they are given are
// theirs to keep.
type TokenServer interface {
	ServeTokens(from meta.NodeID, req *cluster.TokenRequest) *cluster.TokenGrant
	SettleTokens(from meta.NodeID, ret *cluster.TokenReturn) *cluster.TokenReturnResult
	ThrottleCounts(from meta.NodeID, req *cluster.ThrottleCounts) *cluster.ThrottleCountsResult
	ThrottleWaiting(from meta.NodeID, req *cluster.ThrottleWaiting) *cluster.ThrottleWaitingResult
}

// SetTokenServer has s answer the token requests of other nodes (nil: none, answered
// Unavailable).
func (l *Link) SetTokenServer(s TokenServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = s
}

// RequestTokens sends req to node, the throttle's owner, and returns its grant, waiting at most
// timeout: the grant (its ErrorCode may say the node does not own the throttle), else a failure
// of the link. It blocks: a delivery loop calls it from a goroutine of its own.
func (l *Link) RequestTokens(node meta.NodeID, req *cluster.TokenRequest, timeout time.Duration) (*cluster.TokenGrant, error) {
	c, err := l.connTo(node)
	if err != nil {
		return nil, linkFailure{err}
	}
	var g cluster.TokenGrant
	err = c.roundTrip(req, max(timeout, time.Millisecond), func(op cluster.Opcode, body []byte) error {
		return expect(op, cluster.OpTokenGrant, &g, body)
	})
	if err != nil {
		return nil, err
	}
	return &g, nil
}

// ReturnTokens sends the settlements ret to node, the throttle's owner, waiting at most timeout.
func (l *Link) ReturnTokens(node meta.NodeID, ret *cluster.TokenReturn, timeout time.Duration) error {
	c, err := l.connTo(node)
	if err != nil {
		return linkFailure{err}
	}
	return c.roundTrip(ret, max(timeout, time.Millisecond), func(op cluster.Opcode, body []byte) error {
		var x cluster.TokenReturnResult
		if err := expect(op, cluster.OpTokenReturnResult, &x, body); err != nil {
			return err
		}
		if x.ErrorCode != cluster.CodeOk {
			return &RemoteError{Code: x.ErrorCode, Message: x.ErrorMessage}
		}
		return nil
	})
}

// tokenRequest answers a peer's TokenRequest on a goroutine of its own.
func (c *conn) tokenRequest(id uint32, body []byte) error {
	var req cluster.TokenRequest
	if err := req.Decode(body); err != nil {
		return err
	}
	req.Group = clone(req.Group) // the rest is decoded into memory of its own
	serve := c.tokenServer()
	go func() {
		g := &cluster.TokenGrant{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "node " + string(c.l.cfg.NodeID) + " serves no throttle tokens"}
		if serve != nil {
			g = serve.ServeTokens(c.peer, &req)
		}
		_ = c.send(0, id, g)
	}()
	return nil
}

// tokenReturn answers a peer's TokenReturn on a goroutine of its own.
func (c *conn) tokenReturn(id uint32, body []byte) error {
	var ret cluster.TokenReturn
	if err := ret.Decode(body); err != nil {
		return err
	}
	ret.Group = clone(ret.Group)
	serve := c.tokenServer()
	go func() {
		x := &cluster.TokenReturnResult{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "node " + string(c.l.cfg.NodeID) + " serves no throttle tokens"}
		if serve != nil {
			x = serve.SettleTokens(c.peer, &ret)
		}
		_ = c.send(0, id, x)
	}()
	return nil
}

func (c *conn) tokenServer() TokenServer {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.l.tokens
}

// ThrottleCounts asks node, the throttle's owner, for what it counts, waiting at most timeout.
func (l *Link) ThrottleCounts(node meta.NodeID, req *cluster.ThrottleCounts, timeout time.Duration) (*cluster.ThrottleCountsResult, error) {
	c, err := l.connTo(node)
	if err != nil {
		return nil, linkFailure{err}
	}
	var x cluster.ThrottleCountsResult
	err = c.roundTrip(req, max(timeout, time.Millisecond), func(op cluster.Opcode, body []byte) error {
		return expect(op, cluster.OpThrottleCountsResult, &x, body)
	})
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// throttleCounts answers a peer's ThrottleCounts on a goroutine of its own.
func (c *conn) throttleCounts(id uint32, body []byte) error {
	var req cluster.ThrottleCounts
	if err := req.Decode(body); err != nil {
		return err
	}
	for i := range req.Buckets {
		req.Buckets[i].Group = clone(req.Buckets[i].Group)
	}
	serve := c.tokenServer()
	go func() {
		x := &cluster.ThrottleCountsResult{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "node " + string(c.l.cfg.NodeID) + " counts no throttle"}
		if serve != nil {
			x = serve.ThrottleCounts(c.peer, &req)
		}
		_ = c.send(0, id, x)
	}()
	return nil
}

// ThrottleWaiting asks node for its part of a throttle, waiting at most timeout.
func (l *Link) ThrottleWaiting(node meta.NodeID, req *cluster.ThrottleWaiting, timeout time.Duration) (*cluster.ThrottleWaitingResult, error) {
	c, err := l.connTo(node)
	if err != nil {
		return nil, linkFailure{err}
	}
	var x cluster.ThrottleWaitingResult
	err = c.roundTrip(req, max(timeout, time.Millisecond), func(op cluster.Opcode, body []byte) error {
		if err := expect(op, cluster.OpThrottleWaitingResult, &x, body); err != nil {
			return err
		}
		for i := range x.Buckets {
			x.Buckets[i].Group = clone(x.Buckets[i].Group)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// throttleWaiting answers a peer's ThrottleWaiting on a goroutine of its own (it asks the queues).
func (c *conn) throttleWaiting(id uint32, body []byte) error {
	var req cluster.ThrottleWaiting
	if err := req.Decode(body); err != nil {
		return err
	}
	serve := c.tokenServer()
	go func() {
		x := &cluster.ThrottleWaitingResult{}
		if serve != nil {
			x = serve.ThrottleWaiting(c.peer, &req)
		}
		_ = c.send(0, id, x)
	}()
	return nil
}
