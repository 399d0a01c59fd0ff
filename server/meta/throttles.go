package meta

import (
	"maps"
	"slices"

	"github.com/filamq/fila/generated/queuelog"
)

// A throttle's owner (throttling.md, "Cluster") is the node that counts its buckets and grants
// their tokens to the queue leaders on other nodes (server/throttle/grant). The meta group
// records one per throttle: the first node to claim an unowned throttle gets it, and a claim
// replacing the current owner's epoch (its proposer found that owner unreachable) takes it over.
// Each owner has the next epoch of its throttle; since is its claim's time, from which the new
// owner starts conservatively (grant.TakeOver). A removed member's throttles are left without an
// owner (their epoch kept), for the next claim.

// ThrottleOwner is a throttle's owner as the catalog records it.
type ThrottleOwner struct {
	Node  NodeID // empty: none (its owner was removed)
	Epoch uint64
	Since int64 // Unix ms
}

// ThrottleWatcher is an optional ability of a Reconciler, found by type assertion: it hears each
// throttle whose owner changed (ClaimThrottle, or a RemoveMember of its owner), on the apply
// goroutine, after the change. A Restore replaces the owners without calling it; read
// Catalog.ThrottleOwners then.
type ThrottleWatcher interface {
	ThrottleOwnerSet(name string, o ThrottleOwner)
}

// ClaimThrottle is the command by which node claims throttle name at `at` (Unix ms), as its first
// owner (replaces 0) or replacing the owner of epoch replaces.
func ClaimThrottle(name string, node NodeID, replaces uint64, at int64) *queuelog.ClaimThrottle {
	return &queuelog.ClaimThrottle{Name: name, Node: string(node), Replaces: replaces, At: at}
}

// ThrottleOwner returns the owner recorded for throttle name; ok is false when none was ever
// claimed.
func (c *Catalog) ThrottleOwner(name string) (o ThrottleOwner, ok bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	o, ok = c.throttles[name]
	return o, ok
}

// ThrottleOwners returns a copy of every owner recorded, by throttle name.
func (c *Catalog) ThrottleOwners() map[string]ThrottleOwner {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return maps.Clone(c.throttles)
}

// claimThrottle applies a ClaimThrottle; c.mu is held.
func (c *Catalog) claimThrottle(cmd *queuelog.ClaimThrottle, ch *changes) error {
	node := NodeID(cmd.Node)
	if cmd.Name == "" || node == "" {
		return refuse(CodeInvalidNode, "a throttle claim needs a throttle name and a node ID (got %q, %q)", cmd.Name, cmd.Node)
	}
	if _, member := c.nodes[node]; len(c.nodes) > 0 && !member {
		return refuse(CodeNodeNotFound, "no node of the cluster has the ID %q", cmd.Node)
	}
	cur := c.throttles[cmd.Name]
	if cur.Node != "" && (cmd.Replaces == 0 || cmd.Replaces != cur.Epoch) {
		return nil // owned, and not by the owner the claim replaces: another claim came first
	}
	next := ThrottleOwner{Node: node, Epoch: cur.Epoch + 1, Since: cmd.At}
	c.throttles[cmd.Name] = next
	ch.throttles = append(ch.throttles, throttleChange{cmd.Name, next})
	return nil
}

// disown leaves the throttles a removed member owned without an owner; c.mu is held.
func (c *Catalog) disown(id NodeID, ch *changes) {
	for _, name := range slices.Sorted(maps.Keys(c.throttles)) {
		if o := c.throttles[name]; o.Node == id {
			o.Node = ""
			c.throttles[name] = o
			ch.throttles = append(ch.throttles, throttleChange{name, o})
		}
	}
}

type throttleChange struct {
	name  string
	owner ThrottleOwner
}

// throttleSnapshot is the owners' snapshot frames, by name; c.mu is held.
func (c *Catalog) throttleSnapshot() []*queuelog.SnapshotThrottleOwner {
	var out []*queuelog.SnapshotThrottleOwner
	for _, name := range slices.Sorted(maps.Keys(c.throttles)) {
		o := c.throttles[name]
		out = append(out, &queuelog.SnapshotThrottleOwner{Name: name, Owner: string(o.Node), Epoch: o.Epoch, Since: o.Since})
	}
	return out
}
