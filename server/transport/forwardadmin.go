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

// Admin requests about one queue, in a cluster. A queue's figures and messages live in the state
// of the node that leads its group: a follower's replica holds the group's log only. A GetStats,
// UpdateQueue, DeleteQueue or Redrive of a queue another node leads is therefore handed to that
// node (Options.Admin, the node link's ForwardAdmin), which carries it out as for the client,
// and its answer is this node's (an UpdateQueue so answers once the leader runs with the change;
// a DeleteQueue of a dead-letter queue, which empties it, and a Redrive are carried out where the
// messages are). A ListQueues lists the queues this node leads or holds asleep from its own state
// and asks each other leader for the rest. A forward that fails is answered NodeNotReady (it may
// have been carried out there), a GetStats from this node's own state instead (QueueNotFound for
// a queue awake elsewhere), a ListQueues without that node's queues; a request about a queue no
// leader is known for is carried out here, and the queue is left out of ListQueues.

// AdminForwarder hands an admin request to another node of the cluster and returns that node's
// answer (the node link).
type AdminForwarder interface {
	ForwardAdmin(node uint64, op fibp.Opcode, body []byte) (fibp.Opcode, []byte, error)
}

// queueOf returns the queue an admin request is about, for the requests carried out by the
// queue's leader.
var queueOf = map[fibp.Opcode]func(body []byte) (string, error){
	fibp.OpGetStats:    func(b []byte) (string, error) { var r fibp.GetStats; err := r.Decode(b); return r.Queue, err },
	fibp.OpUpdateQueue: func(b []byte) (string, error) { var r fibp.UpdateQueue; err := r.Decode(b); return r.Queue, err },
	fibp.OpDeleteQueue: func(b []byte) (string, error) { var r fibp.DeleteQueue; err := r.Decode(b); return r.Queue, err },
	fibp.OpRedrive:     func(b []byte) (string, error) { var r fibp.Redrive; err := r.Decode(b); return r.DLQQueue, err },
}

// ServeAdmin carries out an admin request another node forwarded (the node link's AdminServer)
// here: the answer's opcode and body.
func (s *Server) ServeAdmin(op uint8, body []byte) (uint8, []byte, error) {
	handler, ok := session.Admin(fibp.Opcode(op))
	if _, one := queueOf[fibp.Opcode(op)]; !ok || !one && fibp.Opcode(op) != fibp.OpListQueues {
		return 0, nil, fmt.Errorf("opcode %#x is not an admin request another node forwards", op)
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

// adminElsewhere carries h out through the nodes that hold what it is about, when it is such a
// request and this node is one of a cluster's; it reports whether it answered h.
func (c *conn) adminElsewhere(h fibp.Header, body []byte, handler session.AdminHandler, who *auth.Principal, node session.Node) bool {
	fw := c.s.opts.Admin
	cl, ok := c.s.svc.(service.Cluster)
	if fw == nil || !ok {
		return false
	}
	if h.Opcode == fibp.OpListQueues {
		res, e, err := handler(c.s.svc, node, body)
		if list, ok := res.(*fibp.ListQueuesResult); ok && err == nil && e == nil {
			c.listElsewhere(cl, fw, list, body)
		}
		c.answerAdmin(h, who, res, e, err)
		return true
	}
	queue, ok := queueOf[h.Opcode]
	if !ok {
		return false
	}
	name, err := queue(body)
	if err != nil {
		return false // malformed: answered here
	}
	routes, ok, e := cl.QueueRoutes([]string{name})
	if !ok || e != nil || len(routes) != 1 || routes[0].LeaderNodeID == 0 || routes[0].LeaderNodeID == c.s.opts.NodeID {
		return false
	}
	leader := routes[0].LeaderNodeID
	f, err := forward(fw, leader, h.Opcode, body)
	switch {
	case err != nil && h.Opcode == fibp.OpGetStats:
		c.log.Info("GetStats handed to the queue's leader failed; answering from this node", "queue", name, "leader", leader, "err", err)
		return false
	case err != nil: // it may have been carried out there: not again here
		c.answerAdmin(h, who, nil, &service.Error{Code: service.CodeNodeNotReady,
			Message: fmt.Sprintf("queue %q is led by node %d, which this node could not reach (%v); retry", name, leader, err)}, nil)
		return true
	}
	c.logAdmin(h.Opcode, nil)
	c.answerAdmin(h, who, f, nil, nil)
	return true
}

// listElsewhere adds to list, this node's ListQueues answer, the queues other nodes lead, from
// their answers to the same request.
func (c *conn) listElsewhere(cl service.Cluster, fw AdminForwarder, list *fibp.ListQueuesResult, body []byte) {
	routes, ok, e := cl.QueueRoutes(nil)
	if !ok || e != nil {
		return
	}
	here := make(map[string]bool, len(list.Queues))
	for _, q := range list.Queues {
		here[q.Name] = true
	}
	missing := map[uint64]map[string]bool{} // by leader
	for _, r := range groupRoutes(routes) { // a sharded queue's shards each (shardadmin.go)
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
			c.log.Info("ListQueues handed to another node failed; listing without its queues", "node", leader, "err", err)
			continue
		}
		for _, q := range theirs.Queues {
			if names[q.Name] {
				list.Queues = append(list.Queues, q)
			}
		}
	}
	slices.SortFunc(list.Queues, func(a, b fibp.QueueInfo) int { return strings.Compare(a.Name, b.Name) })
	list.Queues = mergeShardRows(list.Queues) // shardadmin.go
}

// forward hands the admin request op/body to node and decodes its answer.
func forward(fw AdminForwarder, node uint64, op fibp.Opcode, body []byte) (fibp.Frame, error) {
	aop, abody, err := fw.ForwardAdmin(node, op, body)
	if err != nil {
		return nil, err
	}
	return fibp.Decode(aop, abody)
}
