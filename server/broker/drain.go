package broker

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/raftgroup"
)

// Draining (clustering.md, "Operations"): DrainNode records a member's drain in the meta state
// (meta.SetDraining), so that it holds cluster-wide and across restarts until it is cancelled.
// Every node applies it; the draining node itself hands each leadership it holds — of its queue
// groups and of the meta group — to another voter of the group by a controlled transfer
// (raftgroup.TransferLeadership: the leader stops taking proposals, brings the target up to date
// and has it stand for election at once), a few at a time. While it drains, a group it comes to
// lead again (an election after a leader failed, or a group woken from hibernation) is handed on
// as soon as the drainer next looks (every drainTick while the node drains). A group whose only voter it is, or whose other voters all drain
// too, stays where it is. The drain of a node is cancelled by DrainNode(drain = false).

// Timing of a drain: how many transfers run at once, how often the draining node looks again
// for leaderships it holds, and how long a group whose transfer failed is left alone.
const (
	drainParallel = 4
	drainTick     = 250 * time.Millisecond
	drainRetry    = 2 * time.Second
)

// drainer hands away the leaderships of a draining node; nil on a single node.
type drainer struct {
	b     *Broker
	nudge chan struct{}

	mu     sync.Mutex
	failed map[string]time.Time // group → when its last transfer failed
}

func newDrainer(b *Broker) *drainer {
	return &drainer{b: b, nudge: make(chan struct{}, 1), failed: map[string]time.Time{}}
}

// poke has the drainer look at once (the node may hold a leadership it should hand away).
func (d *drainer) poke() {
	if d == nil {
		return
	}
	signal(d.nudge)
}

// run looks for leaderships to hand away whenever poked, and every drainTick, until the broker
// closes.
func (d *drainer) run() {
	t := time.NewTicker(drainTick)
	defer t.Stop()
	for {
		select {
		case <-d.b.stopWatch:
			return
		case <-d.nudge:
		case <-t.C:
		}
		if d.b.catalog().Draining(d.b.nodeID()) {
			d.pass()
		}
	}
}

// drainGroup is one group this node leads: a queue group's name and Raft group, or the meta
// group's.
type drainGroup struct {
	name string
	g    *raftgroup.Group
}

// pass hands away every leadership this node holds now, drainParallel at a time.
func (d *drainer) pass() {
	var held []drainGroup
	now := time.Now()
	d.mu.Lock()
	for name, a := range d.b.actors() {
		if a.leadingNow.Load() && now.Sub(d.failed[name]) >= drainRetry {
			held = append(held, drainGroup{name: name})
		}
	}
	if g := d.b.metaGroupNow(); g != nil && g.Leader() && now.Sub(d.failed[MetaGroup]) >= drainRetry {
		held = append(held, drainGroup{name: MetaGroup, g: g})
	}
	d.mu.Unlock()
	moved := 0
	eachAtOnce(len(held), drainParallel, func(i int) error {
		ok, err := d.handAway(held[i])
		d.mu.Lock()
		if err != nil {
			d.failed[held[i].name] = time.Now()
		} else {
			delete(d.failed, held[i].name)
		}
		if ok {
			moved++
		}
		d.mu.Unlock()
		return err
	})
	if moved > 0 {
		d.b.log.Info("draining: handed leaderships to other nodes", "moved", moved, "tried", len(held))
	}
}

// handAway transfers one group's leadership to another voter that does not drain, and reports
// whether it did.
func (d *drainer) handAway(h drainGroup) (bool, error) {
	if h.g == nil {
		a := d.b.lookup(h.name).a
		if a == nil || !a.call(func(a *actor) { h.g = a.g }) || h.g == nil {
			return false, nil // no longer here, or no longer leading
		}
	}
	to, ok := d.b.transferTarget(h.g)
	if !ok {
		return false, nil // no other voter to take it
	}
	if err := h.g.TransferLeadership(to.ID, to.Address); err != nil {
		d.b.log.Warn("draining: handing a leadership away failed; retrying", "group", h.name, "to", to.ID, "err", err)
		return false, err
	}
	d.b.log.Debug("draining: handed a leadership away", "group", h.name, "to", to.ID)
	return true, nil
}

// transferTarget picks the voter of g that is to take over its leadership from this node: one
// that does not drain, connected to this node when one is; false when there is none.
func (b *Broker) transferTarget(g *raftgroup.Group) (raft.Server, bool) {
	servers, err := g.Members()
	if err != nil {
		return raft.Server{}, false
	}
	cat, self := b.catalog(), raft.ServerID(b.nodeID())
	conn, _ := b.opts.Cluster.Network.(peerStates)
	var best raft.Server
	found := false
	for _, s := range servers {
		if s.ID == self || s.Suffrage != raft.Voter || cat.Draining(meta.NodeID(s.ID)) {
			continue
		}
		if conn == nil || conn.Connected(meta.NodeID(s.ID)) {
			return s, true
		}
		if !found {
			best, found = s, true
		}
	}
	return best, found
}

// DrainSet hears a drain started or cancelled (meta.DrainWatcher): this node's own starts its
// drainer at once.
func (h *metaHooks) DrainSet(id meta.NodeID, draining bool) {
	if h.live.Load() && draining && id == h.b.nodeID() {
		h.b.drain.poke()
	}
}

// nodeName is the meta ID of a node FIBP names by number.
func nodeName(id uint64) meta.NodeID { return meta.NodeID(strconv.FormatUint(id, 10)) }

// DrainNode starts (drain) or cancels the drain of node (service.Cluster); ok is false on a
// single node.
func (b *Broker) DrainNode(node uint64, drain bool) (bool, *Error) {
	if !b.clustered() {
		return false, nil
	}
	// SetDraining says what the state is to be, so proposing it again is harmless: a proposal
	// that failed on the way (the meta leader changed, or is not reachable yet) is tried again,
	// within drainProposeWait.
	deadline := time.Now().Add(drainProposeWait)
	for {
		b.adminMu.Lock()
		err := b.proposeMeta(meta.SetDraining(nodeName(node), drain))
		b.adminMu.Unlock()
		var refused *meta.Refused
		if err == nil || errors.As(err, &refused) || time.Now().After(deadline) || b.isClosed() {
			if err != nil {
				return true, b.refusal(err)
			}
			return true, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// drainProposeWait bounds DrainNode's tries.
const drainProposeWait = 5 * time.Second

// isClosed reports whether the broker is closing.
func (b *Broker) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// errMoveFailed is a leadership transfer that did not end with the target leading.
var errMoveFailed = errors.New("broker: the leadership did not move")

// moveTimeout bounds a MoveQueueLeader.
const moveTimeout = 10 * time.Second

// MoveLeader transfers the leadership of queue's group, which this node leads, to target, a
// voter of the group, and waits until target leads it (at most moveTimeout); raft.ErrNotLeader
// when this node does not lead the group. The node link calls it for a MoveQueueLeader another
// node received (nodelink's LeaderMover).
func (b *Broker) MoveLeader(queue string, target meta.NodeID) error {
	return b.moveHere(queue, target, time.Now().Add(moveTimeout))
}

// moveHere is MoveLeader within deadline.
func (b *Broker) moveHere(queue string, target meta.NodeID, deadline time.Time) error {
	a := b.lookup(queue).a
	var g *raftgroup.Group
	if a == nil || !a.call(func(a *actor) { g = a.g }) || g == nil {
		return raft.ErrNotLeader
	}
	if target == b.nodeID() {
		return nil // it leads already
	}
	servers, err := g.Members()
	if err != nil {
		return err
	}
	var to *raft.Server
	for i := range servers {
		if servers[i].ID == raft.ServerID(target) && servers[i].Suffrage == raft.Voter {
			to = &servers[i]
		}
	}
	if to == nil {
		return fmt.Errorf("%w: node %s is no voter of queue %q's group", errMoveFailed, target, queue)
	}
	if err := g.TransferLeadership(to.ID, to.Address); err != nil {
		return fmt.Errorf("%w: %v", errMoveFailed, err)
	}
	for {
		switch id := meta.NodeID(g.LeaderID()); {
		case id == target:
			return nil
		case id != "" && id != b.nodeID():
			return fmt.Errorf("%w: node %s took over instead of node %s", errMoveFailed, id, target)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: node %s did not take over within %v", errMoveFailed, target, moveTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
