package broker

import (
	"math"
	"slices"
	"sync"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/throttle"
	"github.com/filamq/fila/server/throttle/grant"
)

// The owner's side of throttles across nodes (throttlecluster.go): the TokenRequests and
// TokenReturns of the other nodes' queue leaders, served from the throttle's grant.Owner.

// ServeTokens answers a TokenRequest of node from (nodelink.TokenServer): tokens when this node
// owns the throttle at the request's epoch and can confirm its meta state current.
func (b *Broker) ServeTokens(from meta.NodeID, req *cluster.TokenRequest) *cluster.TokenGrant {
	c := b.ct
	if c == nil {
		return &cluster.TokenGrant{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "this node counts no throttle for others"}
	}
	limits, msg := requestLimits(req.Limits)
	if msg != "" {
		return &cluster.TokenGrant{ErrorCode: cluster.CodeProtocol, ErrorMessage: msg}
	}
	cat := b.catalog()
	ow, has := cat.ThrottleOwner(req.Throttle)
	if !has || ow.Node != b.nodeID() || ow.Epoch != req.Epoch {
		var epoch uint64
		if has && ow.Node == b.nodeID() {
			epoch = ow.Epoch
		}
		return &cluster.TokenGrant{ErrorCode: cluster.CodeNotLeader, Epoch: epoch,
			ErrorMessage: "node " + string(b.nodeID()) + " does not own throttle " + req.Throttle + " at that epoch"}
	}
	if !cat.Keys().Fresh() {
		return &cluster.TokenGrant{ErrorCode: cluster.CodeUnavailable, Epoch: ow.Epoch,
			ErrorMessage: "node " + string(b.nodeID()) + " cannot confirm its meta state current: it grants nothing"}
	}
	now := b.clock().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	ot := c.ownedAt(req.Throttle, ow, now)
	var keep int64
	for _, l := range limits {
		keep = max(keep, l.Span())
	}
	ot.remote[from] = remoteLimits{limits: limits, until: now + keep + c.cfg.LeaseMs + remoteKeepMs}
	if !c.ready(ot, now) || req.Want == 0 { // no owner state yet, or only the node's limits
		return &cluster.TokenGrant{ErrorCode: cluster.CodeOk, Epoch: ow.Epoch, RetryAfterMs: claimRetryMs}
	}
	g := ot.o.Serve(now, grant.Request{Bucket: requestBucket(req.Missing, req.Group), Seq: req.Seq, Want: uint64(req.Want),
		Returns: settlements(req.Returns)})
	res := &cluster.TokenGrant{ErrorCode: cluster.CodeOk, Epoch: ow.Epoch, GrantSeq: g.ID.Seq, N: uint32(g.N), LeaseMs: uint32(g.LeaseMs)}
	if g.N == 0 {
		res.RetryAfterMs = uint32(min(max(g.RetryAt-now, 1), math.MaxUint32))
	}
	return res
}

// SettleTokens applies a TokenReturn of node from (nodelink.TokenServer).
func (b *Broker) SettleTokens(_ meta.NodeID, ret *cluster.TokenReturn) *cluster.TokenReturnResult {
	c := b.ct
	if c == nil {
		return &cluster.TokenReturnResult{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "this node counts no throttle for others"}
	}
	now := b.clock().UnixMilli()
	c.mu.Lock()
	defer c.mu.Unlock()
	if ot := c.owned[ret.Throttle]; ot != nil && ot.o != nil && ot.epoch == ret.Epoch {
		ot.o.Settle(now, requestBucket(ret.Missing, ret.Group), settlements(ret.Returns))
	}
	return &cluster.TokenReturnResult{ErrorCode: cluster.CodeOk}
}

// requestLimits checks the limits a request carries: one to MaxDeclaredLimits, none zero.
func requestLimits(ls []cluster.ThrottleLimit) ([]throttle.Limit, string) {
	if len(ls) == 0 || len(ls) > throttle.MaxDeclaredLimits {
		return nil, "a token request carries 1 to 64 limits"
	}
	out := make([]throttle.Limit, len(ls))
	for i, l := range ls {
		if l.Max == 0 || l.WindowMs == 0 {
			return nil, "a token request's limit has a zero maximum or window"
		}
		out[i] = throttle.Limit{Max: l.Max, WindowMs: l.WindowMs}
	}
	return throttle.Effective(out), ""
}

func requestBucket(missing bool, group []byte) string {
	return grantBucket(throttle.BucketKey{Missing: missing, Group: string(group)})
}

func settlements(rs []cluster.GrantSettlement) []grant.Return {
	out := make([]grant.Return, len(rs))
	for i, r := range rs {
		out[i] = grant.Return{ID: grant.GrantID{Epoch: r.Epoch, Seq: r.GrantSeq}, Unspent: uint64(r.Unspent)}
	}
	return out
}

// ThrottleCounts answers another node's ThrottleCounts (nodelink.TokenServer): what this node, the
// throttle's owner at the request's epoch, counts.
func (b *Broker) ThrottleCounts(_ meta.NodeID, req *cluster.ThrottleCounts) *cluster.ThrottleCountsResult {
	c := b.ct
	if c == nil {
		return &cluster.ThrottleCountsResult{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "this node counts no throttle for others"}
	}
	cat := b.catalog()
	if ow, has := cat.ThrottleOwner(req.Throttle); !has || ow.Node != b.nodeID() || ow.Epoch != req.Epoch {
		return &cluster.ThrottleCountsResult{ErrorCode: cluster.CodeNotLeader,
			ErrorMessage: "node " + string(b.nodeID()) + " does not own throttle " + req.Throttle + " at that epoch"}
	}
	keys := make([]throttle.BucketKey, len(req.Buckets))
	for i, r := range req.Buckets {
		keys[i] = throttle.BucketKey{Missing: r.Missing, Group: string(r.Group)}
	}
	f := c.ownFigures(req.Throttle, req.Epoch, keys, b.clock().UnixMilli())
	if f == nil {
		return &cluster.ThrottleCountsResult{ErrorCode: cluster.CodeUnavailable, ErrorMessage: "node " + string(b.nodeID()) + " has counted nothing of throttle " + req.Throttle + " yet"}
	}
	x := &cluster.ThrottleCountsResult{ErrorCode: cluster.CodeOk, ActiveBuckets: f.active, BucketsAtLimit: f.atLimit}
	for _, l := range f.limits {
		x.Limits = append(x.Limits, cluster.ThrottleLimit{Max: l.Max, WindowMs: l.WindowMs})
	}
	for _, bs := range f.buckets {
		x.Buckets = append(x.Buckets, cluster.BucketCounts{Counted: bs.Counted, NextRoomAt: bs.NextRoomAt})
	}
	return x
}

// ownerFigures is what a throttle's owner counts: its limits (every node's), its active and full
// buckets, and the figures of some buckets (Waiting is the queues' to add).
type ownerFigures struct {
	limits          []throttle.Limit
	active, atLimit uint64
	buckets         []throttle.BucketStats
}

// ownFigures is what this node counts of throttle name, which it owns at epoch; nil when it holds
// nothing of it (it counted nothing yet).
func (c *clusterThrottles) ownFigures(name string, epoch uint64, keys []throttle.BucketKey, now int64) *ownerFigures {
	c.mu.Lock()
	defer c.mu.Unlock()
	ot := c.owned[name]
	if ot == nil || ot.epoch != epoch || ot.o == nil {
		return nil
	}
	f := &ownerFigures{limits: ot.o.Limits()}
	f.active, f.atLimit = ot.o.Stats(now)
	for _, k := range keys {
		key := grantBucket(k)
		f.buckets = append(f.buckets, throttle.BucketStats{Key: k, Counted: ot.o.Counted(now, key), NextRoomAt: ot.o.NextRoom(now, key)})
	}
	return f
}

// figures is what the owner of throttle name counts, asked over the link when another node owns
// it; nil (and no error) when it has no owner or its owner counted nothing yet: nothing was
// delivered under it in the cluster.
func (c *clusterThrottles) figures(name string, keys []throttle.BucketKey) (*ownerFigures, *Error) {
	ow, has := c.b.catalog().ThrottleOwner(name)
	if !has || ow.Node == "" {
		return nil, nil
	}
	if ow.Node == c.b.nodeID() {
		return c.ownFigures(name, ow.Epoch, keys, c.b.clock().UnixMilli()), nil
	}
	req := &cluster.ThrottleCounts{Throttle: name, Epoch: ow.Epoch}
	for _, k := range keys {
		req.Buckets = append(req.Buckets, cluster.BucketRef{Missing: k.Missing, Group: []byte(k.Group)})
	}
	x, err := c.net.ThrottleCounts(ow.Node, req, tokenTimeout)
	switch {
	case err != nil:
		return nil, errorf(CodeNodeNotReady, "throttle %q is counted by node %s, which did not answer (%v); retry", name, ow.Node, err)
	case x.ErrorCode != cluster.CodeOk || len(x.Buckets) != len(keys):
		return nil, errorf(CodeNodeNotReady, "throttle %q: its owner, node %s, answered %v: %s; retry", name, ow.Node, x.ErrorCode, x.ErrorMessage)
	}
	f := &ownerFigures{active: x.ActiveBuckets, atLimit: x.BucketsAtLimit}
	for _, l := range x.Limits {
		f.limits = append(f.limits, throttle.Limit{Max: l.Max, WindowMs: l.WindowMs})
	}
	for i, bc := range x.Buckets {
		f.buckets = append(f.buckets, throttle.BucketStats{Key: keys[i], Counted: bc.Counted, NextRoomAt: bc.NextRoomAt})
	}
	return f, nil
}

// ThrottleWaiting answers another node's ThrottleWaiting (nodelink.TokenServer): this node's part
// of the throttle, empty when no live subscription here declares it.
func (b *Broker) ThrottleWaiting(_ meta.NodeID, req *cluster.ThrottleWaiting) *cluster.ThrottleWaitingResult {
	x := &cluster.ThrottleWaitingResult{}
	sum, err := b.throttles.Stats(req.Throttle, b.clock().UnixMilli())
	if err != nil {
		return x
	}
	x.Subscribers, x.Queues = uint32(min(sum.Subscribers, math.MaxUint32)), sum.Queues
	for k, n := range b.waitingIn(req.Throttle, sum.Queues) {
		x.Buckets = append(x.Buckets, cluster.BucketWaiting{Missing: k.Missing, Group: []byte(k.Group), Waiting: n})
	}
	return x
}

// othersPart adds every other member's part of throttle name (ThrottleWaiting, asked of all at
// once) to sum's subscribers and queues and to waiting. A node that does not answer within
// tokenTimeout is left out.
func (c *clusterThrottles) othersPart(name string, sum *throttle.Summary, waiting map[throttle.BucketKey]uint64) {
	var others []meta.NodeID
	for _, n := range c.b.catalog().Nodes() {
		if n.ID != c.b.nodeID() {
			others = append(others, n.ID)
		}
	}
	parts := make([]*cluster.ThrottleWaitingResult, len(others))
	var wg sync.WaitGroup
	for i, id := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if x, err := c.net.ThrottleWaiting(id, &cluster.ThrottleWaiting{Throttle: name}, tokenTimeout); err == nil {
				parts[i] = x
			}
		}()
	}
	wg.Wait()
	for _, x := range parts {
		if x == nil {
			continue
		}
		sum.Subscribers += int(x.Subscribers)
		sum.Queues = append(sum.Queues, x.Queues...)
		for _, bw := range x.Buckets {
			waiting[throttle.BucketKey{Missing: bw.Missing, Group: string(bw.Group)}] += bw.Waiting
		}
	}
	slices.Sort(sum.Queues)
	sum.Queues = slices.Compact(sum.Queues)
}
