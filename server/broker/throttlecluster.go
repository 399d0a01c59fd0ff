package broker

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/throttle"
	"github.com/filamq/fila/server/throttle/grant"
)

// Throttles across nodes (throttling.md, "Cluster"; docs/throttles.md, "In a cluster"). On a
// node of a cluster, a throttled delivery is counted by the throttle's owner, the node the meta
// state names (ClaimThrottle), through package grant:
//
//   - a queue leader that needs a throttle without an owner claims it for its own node (the meta
//     state keeps the first claim), and its messages wait meanwhile;
//   - on the owner, a delivery is counted in the throttle's grant.Owner (Room, then Take), and
//     the owner serves the other nodes' TokenRequests from it (ServeTokens);
//   - elsewhere, a delivery spends a token the node holds (grant.Borrower); a message without one
//     waits like a throttled one (it counts in waiting) while a TokenRequest goes out on a
//     goroutine of its own — the delivery loop never waits on the network — and the lanes that
//     waited look again when the grant comes;
//   - a node whose requests to the owner fail on the link for ownerDeadMs claims the throttle in
//     its place (replacing the owner's epoch). The new owner issues nothing until its
//     predecessor's tokens are spent and out of every window (grant.TakeOver), counted from when
//     it could still be granting: until it applied the claim, or stopped confirming its meta
//     state current (Cluster.AuthMaxStaleness; an owner that cannot confirm it grants nothing).
//
// A single node counts in its throttle.Registry as it always did: this is only built when the
// node is one of a cluster and its network carries tokens.

// tokenNetwork is the optional side of a Network that carries throttle tokens (nodelink.Link).
type tokenNetwork interface {
	RequestTokens(node meta.NodeID, req *cluster.TokenRequest, timeout time.Duration) (*cluster.TokenGrant, error)
	ThrottleCounts(node meta.NodeID, req *cluster.ThrottleCounts, timeout time.Duration) (*cluster.ThrottleCountsResult, error)
	ThrottleWaiting(node meta.NodeID, req *cluster.ThrottleWaiting, timeout time.Duration) (*cluster.ThrottleWaitingResult, error)
}

const (
	tokenTimeout = 2 * time.Second // a TokenRequest unanswered this long failed
	claimRetryMs = 50              // a message waiting for its throttle's owner to be recorded looks again then
	ownerDeadMs  = 1000            // requests failing on the link this long: the owner is replaced
	linkRetryMs  = 100             // after a request failed on the link
	// remoteKeepMs: an owner enforces a node's limits for this long after its last request
	// (beyond their windows and a lease).
	remoteKeepMs = 10_000
)

// clusterThrottles is the node's side of every throttle in a cluster; nil on a single node.
type clusterThrottles struct {
	b   *Broker
	net tokenNetwork
	cfg grant.Config
	// takeoverMs is how long a replaced owner may go on granting (it grants only while it can
	// confirm its meta state current).
	takeoverMs int64

	mu       sync.Mutex
	owned    map[string]*ownedThrottle
	borrowed map[string]*borrowedThrottle
	claiming map[string]bool
}

// ownedThrottle is a throttle this node owns at epoch.
type ownedThrottle struct {
	epoch  uint64
	first  bool  // the throttle's first owner, claimed by this process: nothing was counted before
	since  int64 // otherwise: no predecessor grants after since
	o      *grant.Owner
	local  []throttle.Limit             // this node's effective limits, as last seen
	remote map[meta.NodeID]remoteLimits // each other node's, from its requests
}

type remoteLimits struct {
	limits []throttle.Limit
	until  int64 // enforced until then
}

// borrowedThrottle is a throttle another node owns at epoch.
type borrowedThrottle struct {
	owner        meta.NodeID
	epoch        uint64
	bw           *grant.Borrower
	waiters      map[waiter]struct{}
	failingSince int64 // when requests to the owner began to fail on the link (0: they do not)
}

// waiter is a lane with messages waiting for a grant.
type waiter struct {
	a    *actor
	lane queuegroup.Lane
}

func newClusterThrottles(b *Broker) *clusterThrottles {
	net, ok := b.opts.Cluster.Network.(tokenNetwork)
	if !ok {
		return nil
	}
	stale := b.opts.Cluster.AuthMaxStaleness
	if stale <= 0 {
		stale = DefaultAuthMaxStaleness
	}
	return &clusterThrottles{b: b, net: net, cfg: grant.DefaultConfig, takeoverMs: stale.Milliseconds(),
		owned: map[string]*ownedThrottle{}, borrowed: map[string]*borrowedThrottle{}, claiming: map[string]bool{}}
}

// grantBucket is a bucket's name in package grant.
func grantBucket(k throttle.BucketKey) string {
	if k.Missing {
		return "\x01"
	}
	return "\x00" + k.Group
}

// take is laneThrottles.Admit on a node of a cluster: room in every bucket of refs, counted at
// once, or when to look again. It runs on the actor's goroutine and never waits on the network.
func (c *clusterThrottles) take(w waiter, refs []throttle.Ref, now int64) (bool, int64) {
	cat := c.b.catalog()
	self := c.b.nodeID()
	c.mu.Lock()
	defer c.mu.Unlock()
	ok, retryAt := true, now
	spends := make([]spend, 0, len(refs))
	for _, ref := range refs {
		name, key := ref.T.Name(), grantBucket(ref.B)
		ow, has := cat.ThrottleOwner(name)
		switch {
		case !has || ow.Node == "":
			c.claim(name, 0, now)
			ok, retryAt = false, max(retryAt, now+claimRetryMs)
		case ow.Node == self:
			ot := c.ownedAt(name, ow, now)
			ot.local = c.b.throttles.Limits(ref.T)
			if !c.ready(ot, now) || !cat.Keys().Fresh() {
				ok, retryAt = false, max(retryAt, now+claimRetryMs)
			} else if room, at := ot.o.Room(now, key); !room {
				ok, retryAt = false, max(retryAt, at)
			} else {
				spends = append(spends, spend{o: ot.o, key: key})
			}
		default:
			bt := c.borrowedAt(name, ow)
			if bt.bw.Held(now, key) == 0 {
				ok = false
				retryAt = max(retryAt, c.ask(bt, ref, key, w, now))
			} else {
				spends = append(spends, spend{bw: bt.bw, key: key})
			}
		}
	}
	if !ok {
		return false, retryAt
	}
	for _, s := range spends {
		if s.o != nil {
			s.o.Take(now, s.key) // Room said yes under the same lock
		} else {
			s.bw.Spend(now, s.key) // Held said one is there
		}
	}
	return true, 0
}

// spend is one bucket's part of a delivery that take found room for.
type spend struct {
	o   *grant.Owner
	bw  *grant.Borrower
	key string
}

// claim proposes that this node own throttle name (replacing the owner of epoch replaces, or
// none), once at a time per throttle. c.mu is held.
func (c *clusterThrottles) claim(name string, replaces uint64, now int64) {
	if c.claiming[name] {
		return
	}
	c.claiming[name] = true
	go func() {
		c.b.adminMu.Lock()
		err := c.b.proposeMeta(meta.ClaimThrottle(name, c.b.nodeID(), replaces, now))
		c.b.adminMu.Unlock()
		if err != nil {
			c.b.log.Debug("claiming a throttle failed; its messages wait and claim it again", "throttle", name, "err", err)
		}
		c.mu.Lock()
		delete(c.claiming, name)
		c.mu.Unlock()
	}()
}

// ownedAt is the state of throttle name, which this node owns as ow says. c.mu is held.
func (c *clusterThrottles) ownedAt(name string, ow meta.ThrottleOwner, now int64) *ownedThrottle {
	ot := c.owned[name]
	if ot != nil && ot.epoch == ow.Epoch {
		return ot
	}
	ot = &ownedThrottle{epoch: ow.Epoch, remote: map[meta.NodeID]remoteLimits{}}
	switch {
	case ow.Epoch == 1 && ow.Since >= c.b.started:
		ot.first = true
	case ow.Since >= c.b.started:
		ot.since = now + c.takeoverMs // its predecessor grants until it learns, or goes stale
	default:
		ot.since = now // owned by this node's previous process, which has stopped
	}
	c.owned[name] = ot
	return ot
}

// ready makes ot's grant.Owner from the limits known, and reports whether it has one. c.mu is held.
func (c *clusterThrottles) ready(ot *ownedThrottle, now int64) bool {
	all := slices.Clone(ot.local)
	for id, r := range ot.remote {
		if r.until < now {
			delete(ot.remote, id)
			continue
		}
		all = append(all, r.limits...)
	}
	limits := throttle.Effective(all)
	switch {
	case len(limits) == 0:
		return ot.o != nil
	case ot.o == nil && ot.first:
		ot.o, _ = grant.NewOwner(c.cfg, limits, ot.epoch)
	case ot.o == nil:
		ot.o, _ = grant.TakeOver(c.cfg, limits, ot.epoch, ot.since)
	case !slices.Equal(limits, ot.o.Limits()):
		_ = ot.o.SetLimits(limits)
	}
	return ot.o != nil
}

// borrowedAt is the state of throttle name, which another node owns as ow says; a new owner
// starts it afresh (the tokens of the old one are its concern). c.mu is held.
func (c *clusterThrottles) borrowedAt(name string, ow meta.ThrottleOwner) *borrowedThrottle {
	bt := c.borrowed[name]
	if bt == nil || bt.owner != ow.Node || bt.epoch != ow.Epoch {
		bt = &borrowedThrottle{owner: ow.Node, epoch: ow.Epoch, bw: grant.NewBorrower(c.cfg), waiters: map[waiter]struct{}{}}
		c.borrowed[name] = bt
	}
	return bt
}

// ask sends a TokenRequest for bucket key of ref when none is out, and returns when the waiting
// messages should look again if no grant wakes them first. c.mu is held.
func (c *clusterThrottles) ask(bt *borrowedThrottle, ref throttle.Ref, key string, w waiter, now int64) int64 {
	bt.waiters[w] = struct{}{}
	_, req, retryAt := bt.bw.Spend(now, key) // it holds none: no token is spent
	if req == nil {
		if retryAt > 0 {
			return retryAt
		}
		return now + c.cfg.LeaseMs // a request is out; its grant wakes the lane
	}
	frame := &cluster.TokenRequest{Throttle: ref.T.Name(), Epoch: bt.epoch, Missing: ref.B.Missing, Group: []byte(ref.B.Group),
		Seq: req.Seq, Want: uint32(min(req.Want, math.MaxUint32))}
	for _, l := range c.b.throttles.Limits(ref.T) {
		frame.Limits = append(frame.Limits, cluster.ThrottleLimit{Max: l.Max, WindowMs: l.WindowMs})
	}
	for _, r := range req.Returns {
		frame.Returns = append(frame.Returns, cluster.GrantSettlement{Epoch: r.ID.Epoch, GrantSeq: r.ID.Seq, Unspent: uint32(min(r.Unspent, math.MaxUint32))})
	}
	go c.request(bt, key, req.Seq, frame)
	return now + c.cfg.LeaseMs
}

// request carries a TokenRequest to the owner and hands its answer to the borrower, then wakes
// the lanes waiting for tokens of the throttle.
func (c *clusterThrottles) request(bt *borrowedThrottle, key string, seq uint64, frame *cluster.TokenRequest) {
	g, err := c.net.RequestTokens(bt.owner, frame, tokenTimeout)
	now := c.b.clock().UnixMilli()
	c.mu.Lock()
	reply := grant.Grant{Bucket: key, ReqSeq: seq}
	switch {
	case err != nil:
		if bt.failingSince == 0 {
			bt.failingSince = now
		}
		reply.RetryAt = now + linkRetryMs
		if now-bt.failingSince >= ownerDeadMs && c.borrowed[frame.Throttle] == bt {
			c.claim(frame.Throttle, bt.epoch, now)
		}
	case g.ErrorCode != cluster.CodeOk:
		bt.failingSince = 0
		reply.RetryAt = now + claimRetryMs // the meta states disagree for now
	default:
		bt.failingSince = 0
		reply.ID, reply.N, reply.LeaseMs = grant.GrantID{Epoch: g.Epoch, Seq: g.GrantSeq}, uint64(g.N), int64(g.LeaseMs)
		if g.N == 0 {
			reply.RetryAt = now + int64(g.RetryAfterMs)
		}
	}
	bt.bw.Granted(now, reply)
	waiters := bt.waiters
	bt.waiters = map[waiter]struct{}{}
	c.mu.Unlock()
	for w := range waiters {
		w.a.postAwake(func(a *actor) { a.st.Lane(w.lane).WakeParked() })
	}
}
