package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Many busy queues on a cluster: the lifecycle (enqueue -> consume -> ack, 1 KB, fsync) spread
// over N queues whose groups lead on whichever node the cluster chose, each node's queues served
// by producers and consumers connected to that node. Every node gets queuesProducers producers and
// queuesConsumers consumer connections whatever N is, and the same credit per connection, so the
// only thing that changes between cluster_queues10 and cluster_queues1000 is the number of groups
// the load is spread over. The QUEUES line sets 1,000 against 10 (target 0.7).

const (
	queuesProducers = 2    // producer connections per node that leads queues
	queuesConsumers = 2    // consumer connections per node that leads queues
	queuesMinCredit = 16   // credit of one subscription, at least
	queuesTarget    = 0.7  // 1,000 busy queues against 10: at least this
	queuesCreateWin = 32   // CreateQueue frames in flight while creating the queues
	queuesPrefix    = "mq" // the queues are mq0, mq1, ...
)

// queuesFlags keep the queues awake while they are created and filled, which takes minutes for a
// thousand on this machine: the figure is about busy queues, and a queue that fell asleep before
// the load reached it would be measured waking (a wake per queue, each about an election).
var queuesFlags = []string{"--queue-idle-timeout", "1h"}

// queuesName is the figure of the lifecycle over n queues.
func queuesName(n int) string { return fmt.Sprintf("cluster_queues%d_lifecycle_1kb", n) }

// notMeasured is a side that leaves every figure n/a (NATS has no counterpart here yet).
func notMeasured(n int) side {
	return func(context.Context, *env, *peer) ([]float64, error) {
		out := make([]float64, n)
		for i := range out {
			out[i] = math.NaN()
		}
		return out, nil
	}
}

// filaQueuesLifecycle creates n queues, pre-fills them with -prefill messages in all, then
// measures acknowledged messages per second while the producers keep enqueueing.
func filaQueuesLifecycle(n int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		if p.cluster == nil {
			return nil, fmt.Errorf("the many-queues lifecycle needs a cluster")
		}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprint(queuesPrefix, i)
		}
		start := time.Now()
		if err := createQueues(ctx, p.addr, names); err != nil {
			return nil, err
		}
		byNode, err := queueLeaders(ctx, p.cluster, names)
		if err != nil {
			return nil, err
		}
		spread := make([]string, 0, len(byNode))
		for addr, qs := range byNode {
			spread = append(spread, fmt.Sprintf("%s leads %d", addr, len(qs)))
		}
		slices.Sort(spread)
		fmt.Fprintf(os.Stderr, "   fila: %d queues created and led in %v (%s)\n", n, time.Since(start).Round(time.Millisecond), strings.Join(spread, ", "))

		fill := make([]*filaLoad, 0, len(byNode))
		filled := func() int64 {
			var s int64
			for _, l := range fill {
				s += l.enqueued.Load()
			}
			return s
		}
		for addr, qs := range byNode {
			l := newFilaLoad(addr, "", 1024)
			l.limit = e.o.prefill * int64(len(qs)) / int64(n)
			fill = append(fill, l)
			if err := l.produceQueues(queuesProducers, qs); err != nil {
				stopLoads(fill)
				return nil, err
			}
		}
		// Done at nine tenths: an Enqueue frame left unanswered (seen with 1,000 queues: the
		// pre-fill stalled at 99 %) would hold its producer's window for good.
		done := make(chan struct{})
		go func() {
			for filled() < e.o.prefill*9/10 && ctx.Err() == nil {
				time.Sleep(probeWait)
			}
			close(done)
		}()
		err = e.waitFillAt(ctx, "fila prefill", filled, done, e.o.prefill*9/10)
		stopLoads(fill)
		if err != nil {
			return nil, err
		}

		// Leaders move while a thousand groups are created and filled on a busy machine: the
		// routes are asked again, and the subscriptions made again while one answers NotLeader.
		var loads []*filaLoad
		defer func() { stopLoads(loads) }()
		for try := 1; ; try++ {
			if byNode, err = queueLeaders(ctx, p.cluster, names); err != nil {
				return nil, err
			}
			if err = subscribeQueues(byNode, &loads); err == nil {
				break
			}
			stopLoads(loads)
			loads = nil
			if try == 5 {
				return nil, err
			}
			fmt.Fprintf(os.Stderr, "   fila: subscribing again: %v\n", err)
		}
		rate, err := e.measureRate(ctx, fmt.Sprintf("fila lifecycle over %d queues", n), func() int64 {
			var s int64
			for _, l := range loads {
				s += l.acked.Load()
			}
			return s
		})
		return []float64{rate}, err
	}
}

// subscribeQueues starts, on every node, the consumers and then the producers of the queues it
// leads, appending each node's load to loads. A subscription answered NotLeader (the leadership
// moved since the routes were read) is made again on the node the answer names, on a consumer
// connection of its own there.
func subscribeQueues(byNode map[string][]string, loads *[]*filaLoad) error {
	at := map[string]*filaLoad{}
	served := map[string][]string{} // the queues subscribed to, by node
	pending := byNode
	for round := 0; len(pending) > 0; round++ {
		if round == 10 {
			return fmt.Errorf("leaders still moving after %d rounds of subscriptions", round)
		}
		moved := map[string][]string{}
		for addr, qs := range pending {
			l := at[addr]
			if l == nil {
				l = newFilaLoad(addr, "", 1024)
				at[addr] = l
				*loads = append(*loads, l)
			}
			before := countAll(moved)
			if err := l.consumeQueues(queuesConsumers, qs, moved); err != nil {
				return err
			}
			if countAll(moved) == before {
				served[addr] = append(served[addr], qs...)
			} else {
				away := map[string]bool{}
				for _, mq := range moved {
					for _, q := range mq {
						away[q] = true
					}
				}
				for _, q := range qs {
					if !away[q] {
						served[addr] = append(served[addr], q)
					}
				}
			}
		}
		if n := countAll(moved); n > 0 {
			fmt.Fprintf(os.Stderr, "   fila: %d subscriptions answered NotLeader, made again where the answer says\n", n)
		}
		pending = moved
	}
	for _, l := range *loads {
		if len(served[l.addr]) == 0 {
			continue
		}
		if err := l.produceQueues(queuesProducers, served[l.addr]); err != nil {
			return err
		}
	}
	return nil
}

// leaderAddrIn finds the leader a NotLeader answer names in fibpconn's error for a Consume (which
// prints the Error frame, its metadata included).
var leaderAddrIn = regexp.MustCompile(`"leader_addr":"([^"]+)"`)

func stopLoads(ls []*filaLoad) {
	for _, l := range ls {
		l.stop()
	}
}

// createQueues creates every queue through the node at addr, queuesCreateWin at a time, again
// while the cluster answers that it cannot yet (its meta group electing, a new group's replica
// opening late).
func createQueues(ctx context.Context, addr string, names []string) error {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	type answer struct {
		name string
		code fibp.ErrorCode
		err  error
	}
	pending := slices.Clone(names)
	for round := 0; len(pending) > 0; round++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if round > 0 {
			time.Sleep(probeWait)
		}
		if round > 50 {
			return fmt.Errorf("%d queues not created after %d rounds (%s first)", len(pending), round, pending[0])
		}
		answers := make(chan answer, len(pending))
		sem := make(chan struct{}, queuesCreateWin)
		for _, name := range pending {
			sem <- struct{}{}
			c.Go(&fibp.CreateQueue{Name: name}, func(f fibp.Frame, err error) {
				<-sem
				a := answer{name: name, err: err}
				if r, ok := f.(*fibp.CreateQueueResult); ok && err == nil {
					a.code = r.ErrorCode
				}
				answers <- a
			})
		}
		var again []string
		for range pending {
			a := <-answers
			switch {
			case a.err != nil:
				return fmt.Errorf("create queue %s: %w", a.name, a.err)
			case a.code == fibp.CodeOk || a.code == fibp.CodeQueueAlreadyExists:
			case a.code == fibp.CodeNotLeader || a.code == fibp.CodeNodeNotReady || a.code == fibp.CodeStorageError:
				again = append(again, a.name)
			default:
				return fmt.Errorf("create queue %s: %v", a.name, a.code)
			}
		}
		pending = again
	}
	return nil
}

// queueLeaders asks the cluster's nodes for the queues' routes until each queue has a leader
// among the nodes, and returns the queues by their leader's client address.
func queueLeaders(ctx context.Context, c *cluster, names []string) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	refs := make([]fibp.QueueRef, len(names))
	for i, q := range names {
		refs[i] = fibp.QueueRef{Queue: q}
	}
	var last error
	for {
		for _, n := range c.nodes {
			byNode, err := routesFrom(n.addr, refs, c)
			if err == nil {
				return byNode, nil
			}
			last = err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("queues without a leader: %w (%v)", ctx.Err(), last)
		case <-time.After(probeWait):
		}
	}
}

// routesFrom asks the node at addr for the queues' routes; an error unless every queue has a
// leader that is one of c's nodes.
func routesFrom(addr string, refs []fibp.QueueRef, c *cluster) (map[string][]string, error) {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	f, err := conn.Call(&fibp.GetRoutes{Queues: refs})
	if err != nil {
		return nil, err
	}
	res, ok := f.(*fibp.GetRoutesResult)
	if !ok || res.ErrorCode != fibp.CodeOk {
		return nil, fmt.Errorf("GetRoutes answered %T %v", f, res.ErrorCode)
	}
	byNode := map[string][]string{}
	for _, r := range res.Entries {
		if c.index(r.LeaderAddr) < 0 {
			return nil, fmt.Errorf("%s: leader %q (node %d) is none of the cluster's nodes", r.Queue, r.LeaderAddr, r.LeaderNodeID)
		}
		byNode[r.LeaderAddr] = append(byNode[r.LeaderAddr], r.Queue)
	}
	if got := countAll(byNode); got != len(refs) {
		return nil, fmt.Errorf("routes for %d of %d queues", got, len(refs))
	}
	return byNode, nil
}

func countAll(m map[string][]string) int {
	n := 0
	for _, qs := range m {
		n += len(qs)
	}
	return n
}

// produceQueues starts n producers on the load's node, each keeping batchWindow Enqueue frames of
// batchSize messages in flight, every frame to one queue, the queues taken in turn (each producer
// starting elsewhere).
func (l *filaLoad) produceQueues(n int, queues []string) error {
	reqs := make([]*fibp.Enqueue, len(queues))
	for i, q := range queues {
		reqs[i] = &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, batchSize)}
		for j := range reqs[i].Messages {
			reqs[i].Messages[j] = fibp.EnqueueMessage{Queue: q, Payload: l.payload}
		}
	}
	for p := range n {
		c, err := l.dial()
		if err != nil {
			return err
		}
		next := p * len(reqs) / n
		l.wg.Go(func() {
			l.produceLoopWith(c, func() *fibp.Enqueue {
				r := reqs[next%len(reqs)]
				next++
				return r
			})
		})
	}
	return nil
}

// consumeQueues subscribes to every queue over n connections, the queues dealt out in turn, each
// connection's consumerCredit shared by its subscriptions (queuesMinCredit at least). Every
// Delivery is acknowledged in one Ack frame and its credit granted back.
func (l *filaLoad) consumeQueues(n int, queues []string, moved map[string][]string) error {
	for i := range n {
		var mine []string
		for j := i; j < len(queues); j += n {
			mine = append(mine, queues[j])
		}
		if len(mine) == 0 {
			continue
		}
		c, err := l.dial()
		if err != nil {
			return err
		}
		credit := uint32(max(queuesMinCredit, consumerCredit/len(mine)))
		for _, q := range mine {
			var sub uint32
			ready := make(chan struct{})
			sub, err = c.Consume(q, credit, func(d *fibp.Delivery) {
				<-ready
				ack := &fibp.Ack{Items: make([]fibp.AckItem, 0, len(d.Messages))}
				for _, m := range d.Messages {
					ack.Items = append(ack.Items, fibp.AckItem{Queue: m.Queue, MessageID: m.MessageID})
				}
				c.Go(ack, l.countAcks)
				c.Credit(sub, uint32(len(d.Messages)))
			})
			close(ready)
			switch m := leaderAddrIn.FindStringSubmatch(fmt.Sprint(err)); {
			case err == nil:
			case m != nil:
				moved[m[1]] = append(moved[m[1]], q)
			default:
				return fmt.Errorf("consume %s on %s: %w", q, l.addr, err)
			}
		}
	}
	return nil
}

// queuesLines renders, when both were measured in the run, the lifecycle over 1,000 queues
// against the one over 10:
//
//	QUEUES broker=fila q1000=21000 q10=30000 ratio=0.700 unit=msg/s target=0.70 result=met
func queuesLines(figs []figure) []string {
	many := slices.IndexFunc(figs, func(f figure) bool { return f.name == queuesName(1000) })
	few := slices.IndexFunc(figs, func(f figure) bool { return f.name == queuesName(10) })
	if many < 0 || few < 0 || math.IsNaN(figs[many].fila) || math.IsNaN(figs[few].fila) {
		return nil
	}
	r := ratio(figs[many].fila, figs[few].fila)
	res := "met"
	if r < queuesTarget {
		res = "missed"
	}
	return []string{fmt.Sprintf("QUEUES broker=fila q1000=%s q10=%s ratio=%s unit=msg/s target=%.2f result=%s",
		plain(figs[many].fila, "msg/s"), plain(figs[few].fila, "msg/s"), plainRatio(r), queuesTarget, res)}
}

// waitFillAt is waitFill checking that count reached at rather than the whole -prefill.
func (e *env) waitFillAt(ctx context.Context, label string, count func() int64, done <-chan struct{}, at int64) error {
	b := bar(e.o.prefill, label)
	defer b.Finish()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			if n := count(); n < at {
				return fmt.Errorf("pre-fill stopped at %d of %d messages", n, at)
			}
			return nil
		case <-tick.C:
			b.Set64(count())
		}
	}
}
