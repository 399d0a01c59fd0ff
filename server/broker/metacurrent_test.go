package broker

import (
	"testing"
)

// A node whose meta state may be behind (cut off from the meta leader, or restarted and not yet
// reached by it) does not know whether a queue it has never heard of exists: it answers
// NodeNotReady, never QueueNotFound, for a queue created meanwhile; once it catches up, the
// queue is there.
func TestANodeBehindTheMetaStateDoesNotDenyAQueue(t *testing.T) {
	c := startCluster(t)
	var behind *Broker
	for _, id := range c.ids {
		if b := c.brokers[id]; b != c.metaLeader() {
			behind = b
		}
	}
	c.net.isolate(behind.nodeID())
	c.eventually("the cut-off node knows no meta leader", func() bool {
		g := behind.metaGroupNow()
		return g != nil && !g.Current()
	})
	var e *Error
	c.eventually("the others create a queue", func() bool {
		for _, b := range c.brokers {
			if b != behind && b.metaGroupNow().Leader() {
				e = b.CreateQueue(QueueSpec{Name: "late"})
				return true
			}
		}
		return false
	})
	if e != nil {
		t.Fatal(e)
	}
	if r := enqueueOne(t, behind, "late"); r.Code != CodeNodeNotReady {
		t.Errorf("enqueue of a queue created while the node was cut off: %v, want NodeNotReady", r.Code)
	}
	if code := ackOne(behind, "late"); code != CodeNodeNotReady {
		t.Errorf("ack: %v, want NodeNotReady", code)
	}
	if _, err := behind.Subscribe(SubscribeRequest{Queue: "late", ConsumerID: "c"}, idleSink{}); err == nil || err.Code != CodeNodeNotReady {
		t.Errorf("consume: %v, want NodeNotReady", err)
	}
	c.net.reconnect(behind.nodeID())
	c.eventually("the node catches up and knows the queue", func() bool {
		code := enqueueOne(t, behind, "late").Code
		return code == CodeOk || code == CodeNotLeader
	})
	// Current again, it denies a queue that does not exist. (Under load it may lapse into not
	// knowing for a moment — it has not heard the meta leader lately — and say NodeNotReady.)
	c.eventually("a current node denies a queue that does not exist", func() bool {
		switch code := enqueueOne(t, behind, "never-created").Code; code {
		case CodeQueueNotFound:
			return true
		case CodeNodeNotReady:
			return false
		default:
			t.Fatalf("enqueue of a queue that does not exist, on a current node: %v, want QueueNotFound", code)
			return false
		}
	})
}
