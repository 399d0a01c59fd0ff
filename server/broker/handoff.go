package broker

import (
	"time"
)

// HandOff hands every leadership this node of a cluster holds — its queue groups' and the meta
// group's — to another voter by controlled transfers (the drain's, drain.go), drainParallel at a
// time, until none is left or timeout has passed, and returns how many it handed on. A node
// stopped on purpose (SIGTERM) calls it before it closes: its groups' clients then see a leader
// change of a few tens of milliseconds instead of waiting for the other replicas to notice the
// silence and elect one (a heartbeat timeout and an election). Unlike DrainNode nothing is
// recorded in the meta state, and the node may lead again once it is back. A single node has
// nothing to hand on.
func (b *Broker) HandOff(timeout time.Duration) int {
	if !b.clustered() || b.drain == nil {
		return 0
	}
	deadline := time.Now().Add(timeout)
	var held []drainGroup
	for name, a := range b.actors() {
		if a.leadingNow.Load() {
			held = append(held, drainGroup{name: name})
		}
	}
	if g := b.metaGroupNow(); g != nil && g.Leader() {
		held = append(held, drainGroup{name: MetaGroup, g: g}) // last: the admin requests it answers go on meanwhile
	}
	moved := make([]bool, len(held))
	eachAtOnce(len(held), drainParallel, func(i int) error {
		if time.Now().After(deadline) {
			return nil
		}
		ok, err := b.drain.handAway(held[i])
		moved[i] = ok
		return err
	})
	n := 0
	for _, ok := range moved {
		if ok {
			n++
		}
	}
	if len(held) > 0 {
		b.log.Info("stopping: handed leaderships to other nodes", "moved", n, "held", len(held))
	}
	return n
}
