package nodelink_test

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// A queue created through one node is never answered QueueNotFound by another right after: a
// node that follows the meta group confirms with its leader's commits that a queue it does not
// know does not exist (its answer is NotLeader once it learns the queue, or NodeNotReady while it
// cannot confirm), and a queue that does not exist is still QueueNotFound on every node.
func TestQueueCreatedElsewhereIsNeverNotFound(t *testing.T) {
	nodes := startBrokers(t)
	ids := []meta.NodeID{"n1", "n2", "n3"}
	for i := range 30 {
		q := fmt.Sprintf("fresh%d", i)
		creator := ids[i%len(ids)]
		if e := nodes[creator].b.CreateQueue(broker.QueueSpec{Name: q}); e != nil {
			t.Fatal(e)
		}
		for _, id := range ids {
			if id == creator {
				continue
			}
			rs := enqueue(t, nodes[id].b, []broker.Message{{Queue: q, Payload: []byte("x")}, {Queue: q, Payload: []byte("y")}})
			for _, r := range rs {
				if r.Code == broker.CodeQueueNotFound {
					t.Fatalf("%s, created through %s, answered QueueNotFound by %s", q, creator, id)
				}
			}
		}
	}
	for _, id := range ids {
		if rs := enqueue(t, nodes[id].b, []broker.Message{{Queue: "never-created", Payload: []byte("x")}}); rs[0].Code != broker.CodeQueueNotFound {
			t.Fatalf("a queue that does not exist answered %v by %s, want QueueNotFound", rs[0].Code, id)
		}
	}
}
