package nodelink_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// TestARestartedClusterRegistersItsSleepingGroupsAsleep: 40 idle queues sleep on three nodes;
// the three stop and start again together. Every node registers every replica asleep from its
// summary as it starts — a follower of the meta group too, whose meta state machine had applied
// nothing when its meta group found its leader (it waits until it has applied what the leader
// said committed: broker/restart.go) — so no queue group opens, elects or wakes: none is awake
// once each node lists the 40 queues again. Before, a follower started on a partial catalog and
// its registry opened the rest as new groups, every one standing for election.
func TestARestartedClusterRegistersItsSleepingGroupsAsleep(t *testing.T) {
	if raceEnabled {
		// It runs in make test's first step. Under the race step, beside every other package on
		// two cores, a node twice did not list the 40 queues within the minute after the
		// restart (clean-clone CI runs of 2026-12-06 and 2026-12-07; it passes alone under
		// -race): the bound is about the load, and what the test checks is not a race.
		t.Skip("restart of 40 sleeping queues on three brokers: runs in make test's first step")
	}
	nodes := startBrokersIdle(t, 300*time.Millisecond)
	// A leadership the rebalancer moves wakes its group (and a move just before the stop leaves
	// a summary its log has passed): this test is about the restart alone.
	if e := nodes["n1"].b.SetRebalancing(broker.RebalancingDisabled, 0); e != nil {
		t.Fatal(e)
	}
	const queues = 40
	for i := range queues {
		if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: fmt.Sprintf("q%d", i)}); e != nil {
			t.Fatal(e)
		}
	}
	eventually(t, "every replica sleeps", func() bool { return awakeReplicas(nodes) == 0 })
	ids := []meta.NodeID{"n1", "n2", "n3"}
	for _, id := range ids {
		nodes[id].stop()
		// A group opened by the restart stays awake through the check below.
		nodes[id].opts.IdleTimeout = time.Minute
	}
	var wg sync.WaitGroup
	for _, id := range ids { // together: each start waits for the meta group's leader
		wg.Go(func() { nodes[id].restart(t, id) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, id := range ids {
		eventually(t, fmt.Sprintf("node %s lists the queues", id), func() bool {
			return len(nodes[id].b.ListQueues()) == 2*queues // each with its dead-letter queue
		})
	}
	for _, id := range ids {
		t.Logf("node %s: %d awake", id, nodes[id].b.AwakeQueues())
	}
	if n := awakeReplicas(nodes); n != 0 {
		t.Fatalf("%d replicas awake after the restart, want every one registered asleep", n)
	}
}
