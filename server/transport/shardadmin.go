package transport

import (
	"fmt"
	"sort"
	"strings"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/shard"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/session"
)

// Admin requests about a sharded queue (docs/sharding.md). Each shard is a queue group of its
// own, which the broker serves as any group; the whole queue is answered here, by carrying the
// request out on each shard's group (through the shard's leader, as adminElsewhere hands a
// queue's request to its leader) and combining the answers:
//
//   - GetStats sums the counters of the shards (the leader and replication fields are shard
//     0's, per-key figures are listed shard by shard);
//   - UpdateQueue changes every shard (the first failure is the answer);
//   - DeleteQueue of the queue is one request (the meta group deletes every shard); of its
//     dead-letter queue it empties every shard's;
//   - Redrive redrives every shard's dead-letter queue, up to count in all, and sums the figures;
//   - ListQueues lists a sharded queue once, with its shards' counters summed (mergeShardRows).

// shardDLQSuffix ends a dead-letter queue's name (meta.DeadLetterSuffix).
const shardDLQSuffix = ".dlq"

// shardGroup is the group of shard i of queue (a sharded queue or its dead-letter queue).
func shardGroup(queue string, i uint32) string {
	if q, ok := strings.CutSuffix(queue, shardDLQSuffix); ok {
		return shard.Name(q, i) + shardDLQSuffix
	}
	return shard.Name(queue, i)
}

// adminShards carries out an admin request about a sharded queue on each shard; it reports
// whether it answered h.
func (c *conn) adminShards(h fibp.Header, body []byte, handler session.AdminHandler, who *auth.Principal, node session.Node) bool {
	sh, ok := c.s.svc.(service.Sharding)
	get, about := queueOf[h.Opcode]
	if !ok || !about {
		return false
	}
	name, err := get(body)
	if err != nil {
		return false
	}
	n := sh.ShardCount(name)
	if n <= 1 || h.Opcode == fibp.OpDeleteQueue && !strings.HasSuffix(name, shardDLQSuffix) {
		return false
	}
	var out fibp.Frame
	var left uint64 // Redrive: what is left of its count
	if r, ok := decodeAs[fibp.Redrive](body); ok {
		left = r.Count
	}
	for i := range n {
		req, err := renamed(h.Opcode, body, shardGroup(name, i), left)
		if err != nil {
			return false
		}
		res, e := c.adminOnShard(h.Opcode, req, shardGroup(name, i), handler, node)
		if e != nil {
			c.answerAdmin(h, who, nil, e, nil)
			return true
		}
		var stop bool
		out, stop = combine(out, res, &left)
		if stop {
			break
		}
	}
	c.answerAdmin(h, who, out, nil, nil)
	return true
}

// decodeAs decodes body as a T, when it is one.
func decodeAs[T any, P interface {
	*T
	Decode([]byte) error
}](body []byte) (*T, bool) {
	var x T
	if P(&x).Decode(body) != nil {
		return nil, false
	}
	return &x, true
}

// renamed is the request op/body about group instead (a Redrive for up to left messages).
func renamed(op fibp.Opcode, body []byte, group string, left uint64) ([]byte, error) {
	var f interface{ AppendTo([]byte) []byte }
	switch op {
	case fibp.OpGetStats:
		r, _ := decodeAs[fibp.GetStats](body)
		r.Queue, f = group, r
	case fibp.OpUpdateQueue:
		r, _ := decodeAs[fibp.UpdateQueue](body)
		r.Queue, f = group, r
	case fibp.OpDeleteQueue:
		r, _ := decodeAs[fibp.DeleteQueue](body)
		r.Queue, f = group, r
	case fibp.OpRedrive:
		r, _ := decodeAs[fibp.Redrive](body)
		r.DLQQueue, r.Count, f = group, left, r
	default:
		return nil, fmt.Errorf("opcode %v is not about one queue", op)
	}
	return f.AppendTo(nil), nil
}

// adminOnShard carries out request op/body about group, on the node that leads it.
func (c *conn) adminOnShard(op fibp.Opcode, body []byte, group string, handler session.AdminHandler, node session.Node) (fibp.Frame, *service.Error) {
	if cl, ok := c.s.svc.(service.Cluster); ok && c.s.opts.Admin != nil {
		routes, ok, e := cl.QueueRoutes([]string{group})
		if ok && e == nil && len(routes) == 1 && routes[0].LeaderNodeID != 0 && routes[0].LeaderNodeID != c.s.opts.NodeID {
			f, err := forward(c.s.opts.Admin, routes[0].LeaderNodeID, op, body)
			if err != nil {
				return nil, &service.Error{Code: service.CodeNodeNotReady,
					Message: fmt.Sprintf("a shard of the queue is led by node %d, which this node could not reach (%v); retry", routes[0].LeaderNodeID, err)}
			}
			return f, nil
		}
	}
	res, e, err := handler(c.s.svc, node, body)
	switch {
	case err != nil:
		return nil, &service.Error{Code: service.CodeInternalError, Message: err.Error()}
	case res == nil:
		return nil, e
	}
	return res, nil
}

// combine adds one shard's answer to the answer so far (nil before the first); stop reports
// that the answer is final (a failure, or a Redrive's count reached).
func combine(sum, res fibp.Frame, left *uint64) (fibp.Frame, bool) {
	switch r := res.(type) {
	case *fibp.GetStatsResult:
		s, _ := sum.(*fibp.GetStatsResult)
		if s == nil || r.ErrorCode != fibp.CodeOk {
			return r, r.ErrorCode != fibp.CodeOk
		}
		s.Depth += r.Depth
		s.InFlight += r.InFlight
		s.Delayed += r.Delayed
		s.Unclassified += r.Unclassified
		s.Throttled += r.Throttled
		s.ActiveFairnessKeys += r.ActiveFairnessKeys
		s.ActiveConsumers += r.ActiveConsumers
		s.OrderingGroups += r.OrderingGroups
		s.OrderingGroupsBlocked += r.OrderingGroupsBlocked
		if r.OldestUnclassifiedAt != 0 && (s.OldestUnclassifiedAt == 0 || r.OldestUnclassifiedAt < s.OldestUnclassifiedAt) {
			s.OldestUnclassifiedAt = r.OldestUnclassifiedAt
		}
		s.PerKeyStats = append(s.PerKeyStats, r.PerKeyStats...)
		return s, false
	case *fibp.RedriveResult:
		s, _ := sum.(*fibp.RedriveResult)
		if s == nil || r.ErrorCode != fibp.CodeOk {
			s = r
		} else {
			s.Redriven += r.Redriven
			s.LeftUnclassified += r.LeftUnclassified
			s.RejectedByScript += r.RejectedByScript
		}
		if *left > 0 {
			*left -= min(*left, r.Redriven)
			return s, r.ErrorCode != fibp.CodeOk || *left == 0
		}
		return s, r.ErrorCode != fibp.CodeOk
	case *fibp.UpdateQueueResult:
		return r, r.ErrorCode != fibp.CodeOk
	case *fibp.DeleteQueueResult:
		return r, r.ErrorCode != fibp.CodeOk
	}
	return res, true
}

// mergeShardRows lists each sharded queue (and its dead-letter queue) once: the rows of its
// shards' groups are added into its own, which is shard 0's.
func mergeShardRows(rows []fibp.QueueInfo) []fibp.QueueInfo {
	at := map[string]int{}
	out := rows[:0]
	var shardRows []fibp.QueueInfo
	for _, r := range rows {
		if clientName(r.Name) != r.Name {
			shardRows = append(shardRows, r)
			continue
		}
		at[r.Name] = len(out)
		out = append(out, r)
	}
	for _, r := range shardRows {
		name := clientName(r.Name)
		i, ok := at[name]
		if !ok {
			at[name] = len(out)
			out = append(out, fibp.QueueInfo{Name: name, LeaderNodeID: r.LeaderNodeID})
			i = len(out) - 1
		}
		out[i].Depth += r.Depth
		out[i].InFlight += r.InFlight
		out[i].ActiveConsumers += r.ActiveConsumers
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// clientName is the name clients know group (or dead-letter queue) name by: a shard's group's
// is its queue's.
func clientName(name string) string {
	g, dlq := strings.CutSuffix(name, shardDLQSuffix)
	if q, _, ok := shard.Parse(g); ok {
		if dlq {
			return q + shardDLQSuffix
		}
		return q
	}
	return name
}

// groupRoutes are the routes of every group of routes: a sharded queue's are its shards'.
func groupRoutes(routes []service.Route) []service.Route {
	var out []service.Route
	for _, r := range routes {
		if len(r.Shards) == 0 {
			out = append(out, r)
			continue
		}
		for _, s := range r.Shards {
			out = append(out, service.Route{Queue: shardGroup(r.Queue, s.Index), LeaderNodeID: s.LeaderNodeID, LeaderAddr: s.LeaderAddr})
		}
	}
	return out
}
