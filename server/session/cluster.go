package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/service"
)

// The answers of a node of a cluster (service.Cluster): GetClusterStatus's nodes and meta
// leader, GetRoutes' leaders, an EnqueueResult's route hints. A single node answers as before.

// clusterNodes is GetClusterStatus's nodes and meta leader; ok is false on a single node.
func clusterNodes(svc service.Service) (nodes []fibp.NodeStatus, metaLeader uint64, ok bool) {
	c, ok := svc.(service.Cluster)
	if !ok {
		return nil, 0, false
	}
	ns, metaLeader, ok := c.ClusterNodes()
	if !ok {
		return nil, 0, false
	}
	nodes = make([]fibp.NodeStatus, len(ns))
	for i, n := range ns {
		nodes[i] = fibp.NodeStatus{NodeID: n.ID, Addr: n.Addr, State: nodeState(n.State), QueueLeaderships: n.QueueLeaderships}
	}
	return nodes, metaLeader, true
}

func nodeState(s service.NodeState) fibp.NodeState {
	switch s {
	case service.NodeUp:
		return fibp.NodeStateUp
	case service.NodeDraining:
		return fibp.NodeStateDraining
	default:
		return fibp.NodeStateUnreachable
	}
}

// clusterRoutes is GetRoutes' answer on a node of a cluster; ok is false on a single node.
func clusterRoutes(svc service.Service, queues []string) (*fibp.GetRoutesResult, *service.Error, bool) {
	c, ok := svc.(service.Cluster)
	if !ok {
		return nil, nil, false
	}
	routes, ok, e := c.QueueRoutes(queues)
	switch {
	case !ok:
		return nil, nil, false
	case e != nil:
		return &fibp.GetRoutesResult{ErrorCode: code(e)}, e, true
	}
	res := &fibp.GetRoutesResult{ErrorCode: fibp.CodeOk, Entries: make([]fibp.RouteEntry, len(routes))}
	for i, r := range routes {
		res.Entries[i] = fibp.RouteEntry{Queue: r.Queue, LeaderNodeID: r.LeaderNodeID, LeaderAddr: r.LeaderAddr}
		for _, sr := range r.Shards {
			res.Entries[i].Shards = append(res.Entries[i].Shards, fibp.ShardRoute{ShardIndex: sr.Index, LeaderNodeID: sr.LeaderNodeID,
				LeaderAddr: sr.LeaderAddr})
		}
	}
	return res, nil, true
}

// routeHint appends the hint of r to hints, unless they have one for its queue.
func routeHint(hints []fibp.RouteHint, r *service.Route) []fibp.RouteHint {
	for _, h := range hints {
		if h.Queue == r.Queue {
			return hints
		}
	}
	return append(hints, fibp.RouteHint{Queue: r.Queue, LeaderNodeID: r.LeaderNodeID, LeaderAddr: r.LeaderAddr})
}
