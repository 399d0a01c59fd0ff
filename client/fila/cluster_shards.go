package fila

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A sharded queue (docs/sharding.md) is several Raft groups, each led by its own node, and a
// Consume of it on a node subscribes to the shards that node leads. A ClusterConsumer of a
// sharded queue whose shards' groups it may not consume one by one (cluster_shardfair.go) is
// therefore one subscription per node that leads a shard, its deliveries merged into one stream
// as they come: every shardCheck it asks each such node which shards it leads now (its own
// GetRoutes answer) and subscribes again on a node whose set changed (a failover gave it a shard,
// or took one), on a node that now leads a shard, and drops a node that leads none. A node's
// subscription that ends for a reason a failover explains is made again at the next check.
// Deliveries from a subscription that was dropped and not yet settled come again once their
// leases end.

// shardCheck is how often a sharded queue's subscriptions are checked against its shards' leaders.
const shardCheck = 250 * time.Millisecond

// shardPart is the subscription on one node that leads shards of the queue.
type shardPart struct {
	addr  string
	led   string // the shards the node led when it subscribed, as "0,2"
	inner *Consumer
}

// shardLeaders asks any node for queue's route: the leaders' addresses of its shards, nil when
// the queue is not sharded.
func (c *Cluster) shardLeaders(ctx context.Context, queue string) ([]string, error) {
	cl, err := c.Any(ctx)
	if err != nil {
		return nil, err
	}
	rs, err := cl.GetRoutes(ctx, queue)
	if err != nil || len(rs) != 1 || len(rs[0].Shards) == 0 {
		return nil, err
	}
	var addrs []string
	for _, s := range rs[0].Shards {
		if s.LeaderAddr != "" && !slices.Contains(addrs, s.LeaderAddr) {
			addrs = append(addrs, s.LeaderAddr)
		}
	}
	return addrs, nil
}

// ledBy asks the node at addr which shards of queue it leads, as "0,2" ("" for none).
func (c *Cluster) ledBy(ctx context.Context, addr, queue string) (string, error) {
	cl, err := c.node(ctx, addr)
	if err != nil {
		return "", err
	}
	rs, err := cl.GetRoutes(ctx, queue)
	if err != nil || len(rs) != 1 {
		return "", err
	}
	var mine []string
	for _, s := range rs[0].Shards {
		if s.LeaderAddr == addr {
			mine = append(mine, strconv.FormatUint(uint64(s.ShardIndex), 10))
		}
	}
	return strings.Join(mine, ","), nil
}

// consumeShards starts s on the sharded queue whose shards' leaders are at addrs: it returns
// once one node answered ConsumeOk, or with the last failure when none did within ctx.
func (s *ClusterConsumer) consumeShards(ctx context.Context, addrs []string) error {
	parts := map[string]*shardPart{}
	ended := make(chan *shardPart, 16)
	var pumps sync.WaitGroup
	r := s.c.retrier()
	for {
		_, err := s.checkShards(ctx, addrs, parts, ended, &pumps)
		if len(parts) > 0 {
			s.addr = strings.Join(sortedKeys(parts), ",")
			go s.runShards(parts, ended, &pumps)
			return nil
		}
		if err != nil && s.c.classify(err) == retryFinal || !r.pause(ctx, 0) {
			if err == nil {
				err = ctx.Err()
			}
			return err
		}
		if more, err := s.c.shardLeaders(ctx, s.queue); err == nil {
			addrs = more
		}
	}
}

// checkShards brings parts in line with the shards' leaders: addrs are nodes that lead shards
// as last heard (besides those of parts). It returns how many subscriptions it made, and the
// last failure to make one.
func (s *ClusterConsumer) checkShards(ctx context.Context, addrs []string, parts map[string]*shardPart, ended chan *shardPart,
	pumps *sync.WaitGroup) (made int, last error) {
	for addr := range parts {
		if !slices.Contains(addrs, addr) {
			addrs = append(addrs, addr)
		}
	}
	for _, addr := range addrs {
		led, err := s.c.ledBy(ctx, addr, s.queue)
		p := parts[addr]
		if err != nil || p != nil && p.led == led {
			continue
		}
		if p != nil {
			p.inner.Close()
			delete(parts, addr)
		}
		if led == "" {
			continue
		}
		cl, err := s.c.node(ctx, addr)
		var inner *Consumer
		if err == nil {
			inner, err = cl.Consume(ctx, s.queue, s.opts)
		}
		if err != nil {
			last = nodeError(addr, err)
			continue
		}
		p = &shardPart{addr: addr, led: led, inner: inner}
		parts[addr] = p
		made++
		pumps.Go(func() { s.pump(p, ended) })
	}
	return made, last
}

// pump hands p's deliveries to Next until p's subscription ends, then reports it on ended.
func (s *ClusterConsumer) pump(p *shardPart, ended chan *shardPart) {
	for {
		d, err := p.inner.Next(s.ctx)
		if err != nil {
			break
		}
		select {
		case s.out <- d:
		case <-s.ctx.Done():
		}
	}
	select {
	case ended <- p:
	case <-s.ctx.Done():
	}
}

// runShards keeps the parts of a sharded queue's subscription in line with its shards' leaders
// until Close, or a final failure of a part (QueueNotFound, Forbidden...).
func (s *ClusterConsumer) runShards(parts map[string]*shardPart, ended chan *shardPart, pumps *sync.WaitGroup) {
	defer close(s.done)
	defer close(s.out)
	defer pumps.Wait()
	tick := time.NewTicker(shardCheck)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			for _, p := range parts {
				p.inner.Close()
			}
			s.finish(s.closedErr())
			return
		case p := <-ended:
			why := p.inner.Err()
			if s.ctx.Err() == nil && s.c.classify(why) == retryFinal {
				for _, q := range parts {
					q.inner.Close()
				}
				s.finish(why)
				s.stop()
				return
			}
			if parts[p.addr] == p {
				delete(parts, p.addr)
				s.c.log.Info("fila: a shard subscription ended, subscribing again", "queue", s.queue, "node", p.addr, "why", why)
			}
			continue
		case <-tick.C:
		}
		addrs, _ := s.c.shardLeaders(s.ctx, s.queue)
		made, _ := s.checkShards(s.ctx, addrs, parts, ended, pumps)
		s.mu.Lock()
		s.addr = strings.Join(sortedKeys(parts), ",")
		s.moves += made
		s.mu.Unlock()
	}
}

func sortedKeys(parts map[string]*shardPart) []string {
	out := make([]string, 0, len(parts))
	for a := range parts {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}
