package broker

import (
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/throttle"
)

// A throttle's effective limits are those of every live declaration, on every node (throttling.md).
// A node's requests for tokens carry its limits; a node whose subscriptions declare a throttle but
// deliver nothing under it (their queues are empty) tells the owner its limits every
// announceEvery all the same (a TokenRequest that wants no token), so that the owner enforces
// them on the other nodes' deliveries. The owner forgets a node's limits remoteKeepMs (plus their
// largest window and a lease) after it last heard them.

// announceEvery is how often a node tells each throttle's owner its limits.
const announceEvery = 2 * time.Second

// run announces this node's limits every announceEvery until the broker closes.
func (c *clusterThrottles) run() {
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	for {
		select {
		case <-c.b.stopWatch:
			return
		case <-t.C:
		}
		c.announce()
	}
}

// announce tells the owner of each throttle live here this node's limits (its own record of
// them when it is the owner), and forgets the limits of the throttles it owns but no longer
// declares.
func (c *clusterThrottles) announce() {
	cat, self, now := c.b.catalog(), c.b.nodeID(), c.b.clock().UnixMilli()
	live := map[string][]throttle.Limit{}
	for _, name := range c.b.throttles.Names() {
		if t, ok := c.b.throttles.Lookup(name); ok {
			if ls := c.b.throttles.Limits(t); len(ls) > 0 {
				live[name] = ls
			}
		}
	}
	c.mu.Lock()
	for name, ot := range c.owned {
		if _, ok := live[name]; !ok {
			ot.local = nil
		}
	}
	c.mu.Unlock()
	for name, limits := range live {
		ow, has := cat.ThrottleOwner(name)
		switch {
		case !has || ow.Node == "":
		case ow.Node == self:
			c.mu.Lock()
			c.ownedAt(name, ow, now).local = limits
			c.mu.Unlock()
		default:
			req := &cluster.TokenRequest{Throttle: name, Epoch: ow.Epoch}
			for _, l := range limits {
				req.Limits = append(req.Limits, cluster.ThrottleLimit{Max: l.Max, WindowMs: l.WindowMs})
			}
			go func() { _, _ = c.net.RequestTokens(ow.Node, req, tokenTimeout) }()
		}
	}
}
