package nodelink_test

import (
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// TestAWokenGroupWithoutPeersAnswersNodeNotReady: a sleeping 3-replica group woken on a node
// whose two peers are down cannot elect a leader. Its requests are answered NodeNotReady (no
// leader known: retry) once the wake has waited its bound, rather than an Enqueue answered
// StorageError a minute later (open's leadTimeout) and a Consume left waiting until an open
// succeeds, however long that takes.
func TestAWokenGroupWithoutPeersAnswersNodeNotReady(t *testing.T) {
	nodes := startBrokersIdle(t, 300*time.Millisecond)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "q has a leader", func() bool { return leaderOf(nodes, "q") != "" })
	enqueueAll(t, nodes, "q", []broker.Message{{Queue: "q", Payload: []byte("a")}})
	eventually(t, "the group's three replicas sleep", func() bool { return awakeReplicas(nodes) == 0 })
	for _, id := range []meta.NodeID{"n2", "n3"} {
		nodes[id].stop()
	}
	b := nodes["n1"].b

	// Answered within the test's deadline (the wait is bounded at a few seconds; a minute
	// without the bound: the deadline is not what fails the test, the code is).
	type answer struct {
		rs []broker.EnqueueResult
		e  *broker.Error
	}
	enq := make(chan answer, 1)
	b.Enqueue([]broker.Message{{Queue: "q", Payload: []byte("b")}}, func(rs []broker.EnqueueResult, e *broker.Error) {
		enq <- answer{append([]broker.EnqueueResult(nil), rs...), e}
	})
	sub := make(chan *broker.Error, 1)
	go func() {
		_, e := b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c1", Credit: 10}, &sink{ch: make(chan service.Delivery, 10)})
		sub <- e
	}()
	deadline := time.After(2 * time.Minute)
	select {
	case a := <-enq:
		if a.e != nil || len(a.rs) != 1 || a.rs[0].Code != broker.CodeNodeNotReady {
			t.Fatalf("enqueue to the woken group answered %+v %v, want NodeNotReady", a.rs, a.e)
		}
	case <-deadline:
		t.Fatal("enqueue to the woken group not answered after 2 minutes")
	}
	select {
	case e := <-sub:
		if e == nil || e.Code != broker.CodeNodeNotReady {
			t.Fatalf("subscribe to the woken group answered %v, want NodeNotReady", e)
		}
	case <-deadline:
		t.Fatal("subscribe to the woken group not answered after 2 minutes")
	}
	// While it still opens, a later request is answered at once.
	rs, e := enqueueWithin(t, b, []broker.Message{{Queue: "q", Payload: []byte("c")}})
	if e != nil || len(rs) != 1 || rs[0].Code != broker.CodeNodeNotReady {
		t.Fatalf("a later enqueue answered %+v %v, want NodeNotReady", rs, e)
	}
	// The peers back, the group elects a leader and serves again (and the node closes without
	// waiting for an open that cannot finish).
	for _, id := range []meta.NodeID{"n2", "n3"} {
		nodes[id].restart(t, id)
	}
	enqueueAll(t, nodes, "q", []broker.Message{{Queue: "q", Payload: []byte("d")}})
}
