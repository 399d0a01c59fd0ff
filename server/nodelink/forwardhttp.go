package nodelink

import (
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Forwarded admin API requests: a request to the admin HTTP API about one queue (its messages,
// fairness keys, explanations, a purge) that a node cannot answer from its own state — it follows
// the queue's group — is handed to the node that leads the group (ForwardHTTP), which serves it
// as if the client had sent it there and returns the answer. The node's admin API serves them
// (SetHTTPServer); the link carries only the request and the answer.

// HTTPServer serves a forwarded admin API request: the answer, or why there is none.
type HTTPServer func(req *cluster.ForwardHTTP) (*cluster.ForwardHTTPResult, error)

// SetHTTPServer has fn serve the admin API requests other nodes forward to this one.
func (l *Link) SetHTTPServer(fn HTTPServer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.http = fn
}

// ForwardHTTP hands the admin API request req to node and returns its answer, waiting at most
// timeout: a *RemoteError when node could not serve it, else a failure of the link.
func (l *Link) ForwardHTTP(node meta.NodeID, req *cluster.ForwardHTTP, timeout time.Duration) (*cluster.ForwardHTTPResult, error) {
	c, err := l.connTo(node)
	if err != nil {
		return nil, linkFailure{err}
	}
	var res cluster.ForwardHTTPResult
	err = c.roundTrip(req, max(timeout, time.Millisecond), func(op cluster.Opcode, body []byte) error {
		if err := expect(op, cluster.OpForwardHTTPResult, &res, body); err != nil {
			return err
		}
		if res.ErrorCode != cluster.CodeOk {
			return &RemoteError{Code: res.ErrorCode, Message: res.ErrorMessage}
		}
		res.Body = clone(res.Body)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// forwardedHTTP serves a peer's ForwardHTTP and answers it, on a goroutine of its own (the
// request may wait for a queue's actor).
func (c *conn) forwardedHTTP(id uint32, body []byte) error {
	var req cluster.ForwardHTTP
	if err := req.Decode(clone(body)); err != nil {
		return err
	}
	c.l.mu.Lock()
	serve := c.l.http
	c.l.mu.Unlock()
	go func() {
		res := &cluster.ForwardHTTPResult{ErrorCode: cluster.CodeUnavailable,
			ErrorMessage: "node " + string(c.l.cfg.NodeID) + " serves no forwarded admin API request"}
		if serve != nil {
			r, err := serve(&req)
			switch {
			case err != nil:
				res.ErrorCode, res.ErrorMessage = cluster.CodeFailed, err.Error()
			default:
				res = r
				res.ErrorCode = cluster.CodeOk
			}
		}
		_ = c.send(0, id, res)
	}()
	return nil
}
