package transport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// Reads in a cluster. A queue's figures live in the state of the node that leads its group: a
// follower's replica holds its log, not its counts. GetStats of a queue another node leads is
// therefore handed to that node (Options.Reads, the node link's ForwardRead) and answered with
// its answer; ListQueues lists the queues this node leads or holds asleep from its own state and
// asks each other leader for the rest. A forward that fails falls back to this node's own
// answer (GetStats: QueueNotFound for a queue awake elsewhere; ListQueues: without that node's
// queues), and a queue no leader is known for is left out of ListQueues.

// ReadForwarder hands a read-only admin request to another node of the cluster and returns that
// node's answer (the node link).
type ReadForwarder interface {
	ForwardRead(node uint64, op fibp.Opcode, body []byte) (fibp.Opcode, []byte, error)
}

// forwardedReads are the requests ServeRead answers for other nodes.
var forwardedReads = map[fibp.Opcode]bool{fibp.OpGetStats: true, fibp.OpListQueues: true}

// ServeRead answers a read another node forwarded (the node link's ReadServer) from this node's
// own state: the answer's opcode and body.
func (s *Server) ServeRead(op uint8, body []byte) (uint8, []byte, error) {
	handler, ok := session.Admin(fibp.Opcode(op))
	if !ok || !forwardedReads[fibp.Opcode(op)] {
		return 0, nil, fmt.Errorf("opcode %#x is not a read another node forwards", op)
	}
	res, e, err := handler(s.svc, session.Node{ID: s.opts.NodeID, Addr: s.advertised()}, body)
	if err != nil {
		return 0, nil, err
	}
	if res == nil {
		res = session.ErrorFrame(e)
	}
	return uint8(res.Opcode()), res.AppendTo(nil), nil
}

// readElsewhere answers h from the nodes that hold what it reads, when it is such a read and
// this node is one of a cluster's; it reports whether it answered.
func (c *conn) readElsewhere(h fibp.Header, body []byte, handler session.AdminHandler, who *auth.Principal, node session.Node) bool {
	fw := c.s.opts.Reads
	cl, ok := c.s.svc.(service.Cluster)
	if fw == nil || !ok || !forwardedReads[h.Opcode] {
		return false
	}
	switch h.Opcode {
	case fibp.OpGetStats:
		var req fibp.GetStats
		if req.Decode(body) != nil {
			return false
		}
		routes, ok, e := cl.QueueRoutes([]string{req.Queue})
		if !ok || e != nil || len(routes) != 1 || routes[0].LeaderNodeID == 0 || routes[0].LeaderNodeID == c.s.opts.NodeID {
			return false
		}
		f, err := forward(fw, routes[0].LeaderNodeID, h.Opcode, body)
		if err != nil {
			c.log.Debug("GetStats forwarded to the queue's leader failed; answering from this node", "queue", req.Queue, "err", err)
			return false
		}
		c.answerAdmin(h, who, f, nil, nil)
		return true
	case fibp.OpListQueues:
		res, e, err := handler(c.s.svc, node, body)
		if list, ok := res.(*fibp.ListQueuesResult); ok && err == nil && e == nil {
			c.listElsewhere(cl, fw, list, body)
		}
		c.answerAdmin(h, who, res, e, err)
		return true
	}
	return false
}

// listElsewhere adds to list, this node's ListQueues answer, the queues other nodes lead, from
// their answers to the same request.
func (c *conn) listElsewhere(cl service.Cluster, fw ReadForwarder, list *fibp.ListQueuesResult, body []byte) {
	routes, ok, e := cl.QueueRoutes(nil)
	if !ok || e != nil {
		return
	}
	here := make(map[string]bool, len(list.Queues))
	for _, q := range list.Queues {
		here[q.Name] = true
	}
	missing := map[uint64]map[string]bool{} // by leader
	for _, r := range routes {
		if here[r.Queue] || r.LeaderNodeID == 0 || r.LeaderNodeID == c.s.opts.NodeID {
			continue
		}
		if missing[r.LeaderNodeID] == nil {
			missing[r.LeaderNodeID] = map[string]bool{}
		}
		missing[r.LeaderNodeID][r.Queue] = true
	}
	for leader, names := range missing {
		f, err := forward(fw, leader, fibp.OpListQueues, body)
		theirs, ok := f.(*fibp.ListQueuesResult)
		if err != nil || !ok {
			c.log.Debug("ListQueues forwarded to another node failed; listing without its queues", "node", leader, "err", err)
			continue
		}
		for _, q := range theirs.Queues {
			if names[q.Name] {
				list.Queues = append(list.Queues, q)
			}
		}
	}
	slices.SortFunc(list.Queues, func(a, b fibp.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
}

// forward hands the read op/body to node and decodes its answer.
func forward(fw ReadForwarder, node uint64, op fibp.Opcode, body []byte) (fibp.Frame, error) {
	aop, abody, err := fw.ForwardRead(node, op, body)
	if err != nil {
		return nil, err
	}
	return fibp.Decode(aop, abody)
}
