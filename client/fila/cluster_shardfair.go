package fila

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/filamq/fila/generated/shard"
)

// Weighted fairness across the shards of a sharded queue (docs/sharding.md, "What holds, within
// and across shards"). Each shard's leader serves its fairness keys by DRR, exactly, but the
// leaders know nothing of each other. A ClusterConsumer therefore subscribes to every shard on
// its own (a Consume of the shard's group, orders*i, on its leader, each with its own credit
// window) and hands the deliveries to Next by a smooth weighted round robin of the shards, a
// shard's weight being the sum of the weights of its backlogged fairness keys (keys with
// pending messages in its GetStats, read from its leader every fairRefresh). A shard whose turn
// it is is waited for (it is backlogged, and its own credit does not depend on the others'), up
// to fairWait: a shard that delivers nothing for that long (throttled, delayed, or drained since
// the last refresh) is dry, out of the turns until it delivers again. Shards of weight 0
// (drained, or not read yet) and dry ones are served, outside the turns, whenever they have a
// delivery at hand.
//
// So among any n deliveries Next returns while every shard is backlogged and none went dry,
// shard i has W_i/W·n of them within one (the smooth round robin's lag), and within the shard
// DRR gives key k w_k/W_i of the shard's within w_k: key k's count is w_k/W·n within 2·w_k.
// Shard 0's group bears the queue's name, so it is consumed as "orders*0" (broker/shardsub.go)
// and its weight is the queue's GetStats (every shard's keys) less the other shards'.
//
// A key that may not Consume or GetStats a shard's group (an ACL naming the queue only) gets
// the unweighted subscription per node (cluster_shards.go).

const (
	fairRefresh = 300 * time.Millisecond // how often the shards' backlogged weights are read
	fairWait    = 250 * time.Millisecond // how long a backlogged shard's turn is waited for
	fairPoll    = 20 * time.Millisecond  // how long an unweighted shard is waited for at a time
)

// fairPart is the subscription to one shard's group on its leader.
type fairPart struct {
	addr  string
	inner *Consumer
	dry   bool // its turn was waited for in vain: out of the weighted turns until it delivers
}

// fairShards is the state of a ClusterConsumer of a sharded queue consumed shard by shard.
type fairShards struct {
	parts []*fairPart // by shard index; nil while a shard has no subscription
	cur   []int64     // the smooth weighted round robin's current weights, by shard index
	next  int         // where an unweighted round begins

	mu      sync.Mutex
	leaders []string // the shards' leaders as last heard, by index
	weights []int64  // the shards' backlogged weights, by index; 0 = drained or unknown
}

// consumeFair starts s on the sharded queue of n shards shard by shard. It returns errFairRefused
// when a shard's group cannot be consumed with this key (the caller falls back to consuming per
// node), or another failure when no shard could be subscribed within ctx.
func (s *ClusterConsumer) consumeFair(ctx context.Context) error {
	if strings.HasSuffix(s.queue, deadLetterSuffix) { // its shards' lanes have no group of their own
		return errFairRefused
	}
	cl, err := s.c.Any(ctx)
	if err != nil {
		return err
	}
	rs, err := cl.GetRoutes(ctx, s.queue)
	if err != nil {
		return err
	}
	if len(rs) != 1 || len(rs[0].Shards) == 0 {
		return errFairRefused // not sharded any more: consumed as before
	}
	n := len(rs[0].Shards)
	f := &fairShards{parts: make([]*fairPart, n), cur: make([]int64, n), leaders: make([]string, n), weights: make([]int64, n)}
	r := s.c.retrier()
	for {
		_, err := s.fairCheck(ctx, f)
		if errors.Is(err, errFairRefused) {
			f.closeAll()
			return err
		}
		if f.live() > 0 {
			s.addr = f.nodes()
			s.readWeights(f) // before the first delivery: its turn is weighted already
			go s.runFair(f)
			return nil
		}
		if err != nil && s.c.classify(err) == retryFinal || !r.pause(ctx, 0) {
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
	}
}

// deadLetterSuffix ends a dead-letter queue's name (reserved: no queue's name ends so).
const deadLetterSuffix = ".dlq"

var errFairRefused = errors.New("fila: the shards' groups cannot be consumed one by one")

// fairRoutes asks any node for the leaders of queue's shards.
func (c *Cluster) fairRoutes(ctx context.Context, queue string, n int) ([]string, error) {
	cl, err := c.Any(ctx)
	if err != nil {
		return nil, err
	}
	rs, err := cl.GetRoutes(ctx, queue)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	if len(rs) == 1 {
		for _, sr := range rs[0].Shards {
			if int(sr.ShardIndex) < n {
				out[sr.ShardIndex] = sr.LeaderAddr
			}
		}
	}
	return out, nil
}

// fairCheck subscribes to every shard that has no live subscription on its leader as last heard.
// It returns how many subscriptions it made, and the last failure (errFairRefused when a
// shard's group answered Forbidden).
func (s *ClusterConsumer) fairCheck(ctx context.Context, f *fairShards) (made int, last error) {
	leaders, err := s.c.fairRoutes(ctx, s.queue, len(f.parts))
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.leaders = leaders
	f.mu.Unlock()
	for i, addr := range leaders {
		p := f.parts[i]
		if p != nil && p.addr == addr && p.inner.Err() == nil {
			continue
		}
		if p != nil {
			p.inner.Close()
			f.parts[i] = nil
		}
		if addr == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		inner, err := s.fairSubscribe(cctx, addr, shardGroup(s.queue, uint32(i)))
		cancel()
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				// The leader as last heard did not answer within the second (it may have just
				// died): not a failure of the consumer; subscribed again at the next check.
				last = nodeError(addr, ErrNodeNotReady)
				continue
			}
			if errors.Is(err, ErrForbidden) || i == 0 && errors.Is(err, ErrQueueNotFound) { // a server before orders*0
				return made, fmt.Errorf("%w: %w", errFairRefused, err)
			}
			last = err
			continue
		}
		f.parts[i] = &fairPart{addr: addr, inner: inner}
		made++
	}
	return made, last
}

// fairSubscribe consumes group on the node at addr.
func (s *ClusterConsumer) fairSubscribe(ctx context.Context, addr, group string) (*Consumer, error) {
	cl, err := s.c.node(ctx, addr)
	if err != nil {
		return nil, nodeError(addr, err)
	}
	inner, err := cl.Consume(ctx, group, s.opts)
	if err != nil {
		return nil, nodeError(addr, err)
	}
	return inner, nil
}

func (f *fairShards) live() int {
	n := 0
	for _, p := range f.parts {
		if p != nil {
			n++
		}
	}
	return n
}

func (f *fairShards) closeAll() {
	for i, p := range f.parts {
		if p != nil {
			p.inner.Close()
			f.parts[i] = nil
		}
	}
}

// runFair hands the shards' deliveries to Next in weighted turns, and keeps the shards'
// subscriptions on their leaders, until Close or a final failure.
func (s *ClusterConsumer) runFair(f *fairShards) {
	defer close(s.done)
	defer close(s.out)
	refreshed, stop := make(chan struct{}), make(chan struct{})
	go func() { defer close(refreshed); s.refreshFair(f, stop) }()
	defer func() { close(stop); <-refreshed }() // a final failure ends it too, not only Close
	defer f.closeAll()
	checked := time.Now()
	for s.ctx.Err() == nil {
		if time.Since(checked) >= shardCheck {
			made, err := s.fairCheck(s.ctx, f)
			if errors.Is(err, errFairRefused) || err != nil && s.c.classify(err) == retryFinal && !isNotFound(err) {
				s.finish(err)
				return
			}
			checked = time.Now()
			s.mu.Lock()
			s.addr = f.nodes()
			s.moves += made
			s.mu.Unlock()
		}
		d, i := s.fairNext(f)
		if d == nil {
			if i >= 0 { // its subscription ended: subscribed again at the next check
				why := f.parts[i].inner.Err()
				if s.c.classify(why) == retryFinal {
					s.finish(why)
					return
				}
				f.parts[i].inner.Close()
				f.parts[i] = nil
			}
			continue
		}
		select {
		case s.out <- d:
		case <-s.ctx.Done():
		}
	}
	s.finish(s.closedErr())
}

func isNotFound(err error) bool { return errors.Is(err, ErrQueueNotFound) }

// nodes is the comma-separated addresses of the shards' subscriptions.
func (f *fairShards) nodes() string {
	var out []string
	for _, p := range f.parts {
		if p != nil && !slices.Contains(out, p.addr) {
			out = append(out, p.addr)
		}
	}
	return strings.Join(out, ",")
}

// fairNext takes the next delivery: one a shard outside the weighted turns (of weight 0, or
// dry) has at hand; else from the weighted shard whose turn it is, waited for up to fairWait;
// else from any shard. It returns nil with the shard's index when that shard's subscription
// ended, nil and -1 when nothing came.
func (s *ClusterConsumer) fairNext(f *fairShards) (*Delivery, int) {
	f.mu.Lock()
	weights := append([]int64(nil), f.weights...)
	f.mu.Unlock()
	if d, i := s.offTurn(f, weights); d != nil || i >= 0 {
		return d, i
	}
	turn := func(i int) bool { return f.parts[i] != nil && !f.parts[i].dry && weights[i] > 0 }
	best, total := weightedTurn(f.cur, weights, turn)
	if best < 0 {
		return s.anyNext(f)
	}
	p := f.parts[best]
	d, err := s.fairTake(p, fairWait)
	switch {
	case d != nil:
		return d, -1
	case p.inner.Err() != nil:
		return nil, best
	case err != nil && s.ctx.Err() == nil: // backlogged by its stats, yet it delivers nothing
		for i := range f.parts { // the turn is undone
			if turn(i) {
				f.cur[i] -= weights[i]
			}
		}
		f.cur[best] += total
		p.dry = true
	}
	return nil, -1
}

// weightedTurn is a turn of the smooth weighted round robin (nginx's): every shard i that is in
// the turns gains weights[i], and the one with the most current weight (the first of equals)
// takes the turn and gives back the total. It returns that shard (-1 when none is in the turns)
// and the total.
func weightedTurn(cur, weights []int64, in func(int) bool) (best int, total int64) {
	best = -1
	for i := range cur {
		if !in(i) {
			continue
		}
		cur[i] += weights[i]
		total += weights[i]
		if best < 0 || cur[i] > cur[best] {
			best = i
		}
	}
	if best >= 0 {
		cur[best] -= total
	}
	return best, total
}

// offTurn takes, without waiting, a delivery at hand from the next shard in turn of those outside
// the weighted turns: of weight 0 (drained when last read, or not read yet) or dry (it delivered
// nothing when its turn was waited for: throttled, delayed, or drained since). A dry shard that
// delivers rejoins the weighted turns.
func (s *ClusterConsumer) offTurn(f *fairShards, weights []int64) (*Delivery, int) {
	n := len(f.parts)
	for k := range n {
		i := (f.next + k) % n
		p := f.parts[i]
		if p == nil || !p.dry && weights[i] > 0 {
			continue
		}
		f.next = (i + 1) % n
		d, _ := s.fairTake(p, 0)
		if d != nil {
			p.dry = false
			return d, -1
		}
		if p.inner.Err() != nil {
			return nil, i
		}
		return nil, -1
	}
	return nil, -1
}

// anyNext takes a delivery from the first shard, in turn, that has one within fairPoll.
func (s *ClusterConsumer) anyNext(f *fairShards) (*Delivery, int) {
	n := len(f.parts)
	for k := range n {
		i := (f.next + k) % n
		p := f.parts[i]
		if p == nil {
			continue
		}
		d, _ := s.fairTake(p, fairPoll/time.Duration(n))
		if d != nil {
			f.next = (i + 1) % n
			return d, -1
		}
		if p.inner.Err() != nil {
			return nil, i
		}
	}
	if f.live() == 0 {
		select {
		case <-time.After(fairPoll):
		case <-s.ctx.Done():
		}
	}
	return nil, -1
}

// fairTake waits up to wait for p's next delivery.
func (s *ClusterConsumer) fairTake(p *fairPart, wait time.Duration) (*Delivery, error) {
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	return p.inner.Next(ctx)
}

// refreshFair reads every shard's backlogged weight from its leader every fairRefresh: the sum
// of the weights of its fairness keys with pending messages, until the consumer's context ends or
// stop is closed (runFair ended).
func (s *ClusterConsumer) refreshFair(f *fairShards, stop <-chan struct{}) {
	tick := time.NewTicker(fairRefresh)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-s.ctx.Done():
			return
		case <-stop:
			return
		}
		s.readWeights(f)
	}
}

// readWeights reads every shard's backlogged weight from its leader.
func (s *ClusterConsumer) readWeights(f *fairShards) {
	f.mu.Lock()
	leaders := append([]string(nil), f.leaders...)
	f.mu.Unlock()
	ws := make([]int64, len(leaders))
	var rest int64
	for i := 1; i < len(leaders); i++ {
		ws[i] = s.shardWeight(leaders[i], shard.Name(s.queue, uint32(i)))
		rest += ws[i]
	}
	// Shard 0's group bears the queue's name, whose GetStats answers for every shard.
	ws[0] = max(s.shardWeight(leaders[0], s.queue)-rest, 0)
	f.mu.Lock()
	copy(f.weights, ws)
	f.mu.Unlock()
}

// shardGroup is the name of shard i's group alone: a Consume of the queue's own name on a node
// takes every shard the node leads, so shard 0 is named "orders*0" (server/broker/shardsub.go).
func shardGroup(queue string, i uint32) string {
	if i == 0 {
		return queue + shard.Sep + "0"
	}
	return shard.Name(queue, i)
}

// shardWeight is the backlogged weight of group on its leader at addr; 0 when it cannot be read.
func (s *ClusterConsumer) shardWeight(addr, group string) int64 {
	if addr == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Second)
	defer cancel()
	cl, err := s.c.node(ctx, addr)
	if err != nil {
		return 0
	}
	st, err := cl.GetStats(ctx, group)
	if err != nil {
		return 0
	}
	var w int64
	for _, k := range st.PerKeyStats {
		if k.PendingCount > 0 {
			w += int64(max(k.Weight, 1))
		}
	}
	return w
}
