package main

import (
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// Every node answers GetStats and ListQueues for every queue with the figures of the node that
// leads it, and carries out an UpdateQueue that changes a script, a purge of a dead-letter queue
// and a Redrive of a queue another node leads (each needs the leader's state): six awake queues (kept awake, so that no follower holds a sleeping summary) led across
// three processes, each holding i+1 messages; asked of each node, ListQueues lists all twelve
// (each with its dead-letter queue, and the queue the cluster was formed with) with their depths, and GetStats of each queue says its depth.
// Before, a node listed only the queues it led, and answered GetStats of another's
// QueueNotFound, as it did those three requests.
func TestEveryNodeReadsEveryQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--queue-idle-timeout", "1h")
	depth := map[string]uint64{}
	for q, d := range queuesOfDepths(t, nodes, "r", 6) {
		depth[q], depth[q+".dlq"] = uint64(d), 0
	}
	leaders := map[uint64]bool{}
	for q, id := range routes(t, nodes[0]) {
		if depth[q] > 0 {
			leaders[id] = true
		}
	}
	if len(leaders) < 2 {
		t.Fatalf("the queues' leaders are %v: the test needs queues led by more than one node", leaders)
	}
	for _, n := range nodes {
		r := admin(t, n, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
		got := map[string]uint64{}
		for _, q := range r.Queues {
			got[q.Name] = q.Depth
		}
		if r.ErrorCode != fibp.CodeOk || len(got) != len(depth)+2 { // and formCluster's orders
			t.Fatalf("node %d lists %d queues (%v), want %d", n.id, len(got), got, len(depth)+2)
		}
		for q, d := range depth {
			if g, ok := got[q]; !ok || g != d {
				t.Fatalf("node %d lists %s at depth %d, want %d", n.id, q, got[q], d)
			}
			st, ok := admin(t, n, &fibp.GetStats{Queue: q}).(*fibp.GetStatsResult)
			if !ok || st.ErrorCode != fibp.CodeOk || st.Depth != d {
				t.Fatalf("node %d: GetStats %s = %+v, want depth %d", n.id, q, st, d)
			}
		}
	}
	routed := routes(t, nodes[0])
	for q := range depth {
		if strings.HasSuffix(q, ".dlq") {
			continue
		}
		n := nodes[routed[q]%3] // the node after its leader: a follower
		if r := admin(t, n, &fibp.UpdateQueue{Queue: q, OnEnqueueChange: fibp.ScriptChangeSet,
			OnEnqueueScript: "function on_enqueue(m) return {} end"}); !isOk(r) {
			t.Fatalf("node %d: UpdateQueue %s (led by %d) answered %#v", n.id, q, routed[q], r)
		}
		if r := admin(t, n, &fibp.Redrive{DLQQueue: q + ".dlq"}); !isOk(r) {
			t.Fatalf("node %d: Redrive %s.dlq answered %#v", n.id, q, r)
		}
		if r := admin(t, n, &fibp.DeleteQueue{Queue: q + ".dlq"}); !isOk(r) {
			t.Fatalf("node %d: DeleteQueue %s.dlq (a purge) answered %#v", n.id, q, r)
		}
	}
}

// isOk reports whether an admin answer is a result frame with error code Ok.
func isOk(f fibp.Frame) bool {
	switch r := f.(type) {
	case *fibp.UpdateQueueResult:
		return r.ErrorCode == fibp.CodeOk
	case *fibp.RedriveResult:
		return r.ErrorCode == fibp.CodeOk
	case *fibp.DeleteQueueResult:
		return r.ErrorCode == fibp.CodeOk
	}
	return false
}
