package nodelink_test

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// New queue groups are led where the placement puts their preferred leaders, round-robin over the
// nodes, not on whichever nodes applied the CreateQueue first: only the preferred leader of a new
// group stands for election at once.
func TestNewGroupsLeadWherePlaced(t *testing.T) {
	nodes := startBrokers(t)
	const queues = 12
	for i := range queues {
		if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: fmt.Sprint("placed", i)}); e != nil {
			t.Fatal(e)
		}
	}
	leads := map[meta.NodeID]int{}
	eventually(t, "every queue has a leader", func() bool {
		clear(leads)
		for i := range queues {
			l := leaderOf(nodes, fmt.Sprint("placed", i))
			if l == "" {
				return false
			}
			leads[l]++
		}
		return true
	})
	for id := range nodes {
		if leads[id] != queues/len(nodes) {
			t.Fatalf("leaderships by node %v, want %d each", leads, queues/len(nodes))
		}
	}
}
