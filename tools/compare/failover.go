package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// Failover time, measured at the client the same way on both brokers: on a three-node cluster
// whose every node is up and caught up, the node that leads the queue (the stream) is killed
// with SIGKILL; from that moment a client tries the surviving nodes until an enqueue (a publish)
// is answered Ok, then consumes until that message is delivered. The figure is the time from the
// kill to the delivery. The killed node is then started again (same data directory, same
// addresses) and the next trial waits until it serves again, so that every trial starts from
// three nodes. -failover-trials sets the trials; the figures are the p50 and the maximum.

// failoverUnit is the failover figures' unit.
const failoverUnit = "ms"

// failoverWait bounds one trial's failover: a cluster that does not serve again within it fails
// the run.
const failoverWait = time.Minute

func failoverFigures() []figure {
	return []figure{
		{name: "cluster_failover_p50", unit: failoverUnit, better: lowerBetter, target: 1},
		{name: "cluster_failover_max", unit: failoverUnit, better: lowerBetter, target: 1},
	}
}

// failoverTrial is one trial's times from the kill.
type failoverTrial struct {
	killed, leader string        // the node killed, the node that served next
	enqueued       time.Duration // the first enqueue answered Ok
	consumed       time.Duration // its delivery
	restarted      time.Duration // the killed node serving again, from its start
}

func (t failoverTrial) String() string {
	return fmt.Sprintf("killed %s, %s serves: enqueued after %v, delivered after %v; %s back in %v", t.killed, t.leader,
		t.enqueued.Round(time.Millisecond), t.consumed.Round(time.Millisecond), t.killed, t.restarted.Round(time.Millisecond))
}

// failoverResult turns the trials into the figures (p50 and max of the delivery times, in ms)
// and prints each trial on stderr.
func failoverResult(broker string, trials []failoverTrial) []float64 {
	took := make([]time.Duration, len(trials))
	for i, t := range trials {
		took[i] = t.consumed
	}
	slices.Sort(took)
	fmt.Fprintf(os.Stderr, "   %s: failover over %d trials, kill -> delivery: %v\n", broker, len(trials), took)
	return []float64{float64(percentile(took, 50)) / 1e6, float64(took[len(took)-1]) / 1e6}
}

// filaFailover runs the trials on a fila cluster, on a queue of three replicas.
func filaFailover(ctx context.Context, e *env, p *peer) ([]float64, error) {
	c := p.cluster
	const queue = "failover"
	if _, err := e.queueAddr(ctx, p, queue); err != nil {
		return nil, err
	}
	var trials []failoverTrial
	for i := range e.o.failoverTrials {
		leader, err := e.filaSettled(ctx, c, queue, i)
		if err != nil {
			return nil, err
		}
		k := c.index(leader)
		t := failoverTrial{killed: c.nodes[k].name}
		start := time.Now()
		c.nodes[k].kill()
		n, enq, cons, err := filaExchange(ctx, c, queue, fmt.Sprintf("trial %d", i))
		if err != nil {
			return nil, fmt.Errorf("trial %d: after node %s was killed: %w", i, t.killed, err)
		}
		t.leader, t.enqueued, t.consumed = n.name, enq.Sub(start), cons.Sub(start)
		back := time.Now()
		if err := c.start(ctx, c.nodes[k]); err != nil {
			return nil, err
		}
		t.restarted = time.Since(back)
		fmt.Fprintf(os.Stderr, "   fila trial %d: %v\n", i+1, t)
		trials = append(trials, t)
	}
	return failoverResult("fila", trials), nil
}

// filaRejoinSettle is how long a trial waits after a restarted node answers for the queue again
// before it kills the next leader: the nodes' link redials with a backoff of at most 2 s, and
// nothing a client can ask says yet whether the link is up.
const filaRejoinSettle = 3 * time.Second

// filaSettled waits until every node answers for queue (one leads it, the others answer
// NotLeader: their replicas are open), lets a restarted node's link come up (filaRejoinSettle,
// from the second trial on), and has an enqueue and its delivery go through the leader, whose
// address it returns.
func (e *env) filaSettled(ctx context.Context, c *cluster, queue string, trial int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	probe := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: []byte("probe")}}}
	for _, n := range c.nodes {
		for {
			// A follower answers NotLeader, a node whose replica is not open yet QueueNotFound
			// or NodeNotReady. The leader stores the probe, which the exchange below consumes.
			code, _, err := enqueueOn(n.addr, probe)
			if err == nil && (code == fibp.CodeOk || code == fibp.CodeNotLeader) {
				break
			}
			select {
			case <-ctx.Done():
				return "", fmt.Errorf("node %s does not answer for %s (%v, %v): %w", n.name, queue, code, err, ctx.Err())
			case <-time.After(probeWait):
			}
		}
	}
	if trial > 0 {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(filaRejoinSettle):
		}
	}
	n, _, _, err := filaExchange(ctx, c, queue, fmt.Sprintf("before trial %d", trial))
	if err != nil {
		return "", err
	}
	return n.addr, nil
}

// filaExchange offers an enqueue of payload to each live node in turn until one takes it (a
// follower forwards it, and its route hint names the leader, which is the node returned), then
// consumes on that node until the message is delivered (acknowledging it and anything older);
// it returns the node and when each happened.
func filaExchange(ctx context.Context, c *cluster, queue, payload string) (n *node, enqueued, consumed time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	req := &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: []byte(payload)}}}
	var last []string
	for {
		for _, n := range c.nodes {
			if n.proc == nil || n.proc.exited() {
				continue
			}
			code, leader, err := enqueueOn(n.addr, req)
			if err == nil && code == fibp.CodeOk {
				enqueued = time.Now()
				if i := c.index(leader); i >= 0 {
					n = c.nodes[i] // a follower forwarded the enqueue: its route hint names the leader
				}
				consumed, err = consumeUntil(ctx, c, n, queue, payload)
				return n, enqueued, consumed, err
			}
			last = append(last[:0], fmt.Sprintf("node %s: %v %v", n.name, code, err))
		}
		select {
		case <-ctx.Done():
			return nil, enqueued, consumed, fmt.Errorf("no node took an enqueue to %s (%s): %w", queue, strings.Join(last, "; "), ctx.Err())
		case <-time.After(probeWait):
		}
	}
}

// enqueueOn enqueues on one node and returns the item's answer, and the leader's address when
// the answer carries a route hint (the node forwarded the enqueue to it).
func enqueueOn(addr string, req *fibp.Enqueue) (fibp.ErrorCode, string, error) {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return 0, "", err
	}
	defer conn.Close()
	res, err := conn.Call(req)
	if err != nil {
		return 0, "", err
	}
	r, ok := res.(*fibp.EnqueueResult)
	if !ok || len(r.Results) != 1 {
		return 0, "", fmt.Errorf("enqueue answered %#v", res)
	}
	var leader string
	for _, h := range r.RouteHints {
		if h.Queue == req.Messages[0].Queue {
			leader = h.LeaderAddr
		}
	}
	return r.Results[0].ErrorCode, leader, nil
}

// consumeUntil subscribes to queue (on n first, then on each live node in turn: a node that does
// not lead it refuses the subscription) until a delivery carries payload, acknowledging every
// message delivered, and returns when that one arrived.
func consumeUntil(ctx context.Context, c *cluster, n *node, queue, payload string) (time.Time, error) {
	next := c.index(n.addr)
	for {
		at, err := consumeOn(ctx, n.addr, queue, payload)
		if err == nil {
			return at, nil
		}
		select {
		case <-ctx.Done():
			return at, fmt.Errorf("%s was not delivered (%v): %w", payload, err, ctx.Err())
		case <-time.After(probeWait):
		}
		for range c.nodes {
			next = (next + 1) % len(c.nodes)
			if n = c.nodes[next]; n.proc != nil && !n.proc.exited() {
				break
			}
		}
	}
}

// consumeOn subscribes to queue on addr and waits for payload's delivery (deliveryWait at most).
func consumeOn(ctx context.Context, addr, queue, payload string) (time.Time, error) {
	conn, err := fibpconn.Dial(addr)
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close()
	got := make(chan time.Time, 1)
	var sub uint32
	subscribed := make(chan struct{})
	sub, err = conn.Consume(queue, latencyCredit, func(d *fibp.Delivery) {
		<-subscribed // sub is known
		at := time.Now()
		ack := &fibp.Ack{}
		for _, m := range d.Messages {
			ack.Items = append(ack.Items, fibp.AckItem{Queue: m.Queue, MessageID: m.MessageID})
			if string(m.Payload) == payload {
				select {
				case got <- at:
				default:
				}
			}
		}
		conn.Go(ack, func(fibp.Frame, error) {})
		// Credit back for what was delivered: older messages (an ack a killed leader never
		// stored, then a lease run out) come first, and may be more than the credit.
		conn.Credit(sub, uint32(len(d.Messages)))
	})
	close(subscribed)
	if err != nil {
		return time.Time{}, err
	}
	select {
	case at := <-got:
		return at, nil
	case e := <-conn.Ended(sub): // the node stopped leading the queue: look for the one that does
		return time.Time{}, fmt.Errorf("the subscription ended: %v", e)
	case <-time.After(deliveryWait):
		return time.Time{}, errors.New("no delivery within 10 s")
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// jsFailover runs the trials on a JetStream cluster: an R3 work-queue stream with an R3 durable
// pull consumer, the client connected to every server.
func jsFailover(ctx context.Context, e *env, p *peer) ([]float64, error) {
	c := p.cluster
	nc, err := natsClusterConnect(c)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	const stream = "FAILOVER"
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"failover"}, Replicas: clusterSize,
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy})
	if err != nil {
		return nil, err
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "failover", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return nil, err
	}
	var trials []failoverTrial
	for i := range e.o.failoverTrials {
		leader, err := jsSettled(ctx, js, c, stream, cons, i)
		if err != nil {
			return nil, err
		}
		t := failoverTrial{killed: leader.name}
		start := time.Now()
		leader.kill()
		enq, cons2, err := jsExchange(ctx, js, cons, fmt.Sprintf("trial %d", i))
		if err != nil {
			return nil, fmt.Errorf("trial %d: after %s was killed: %w", i, t.killed, err)
		}
		t.enqueued, t.consumed = enq.Sub(start), cons2.Sub(start)
		if n, err := natsStreamLeader(ctx, js, c, stream); err == nil {
			t.leader = n.name
		}
		back := time.Now()
		if err := c.start(ctx, leader); err != nil {
			return nil, err
		}
		t.restarted = time.Since(back)
		fmt.Fprintf(os.Stderr, "   nats trial %d: %v\n", i+1, t)
		trials = append(trials, t)
	}
	return failoverResult("nats", trials), nil
}

// jsSettled waits until the stream and its consumer have a leader and every replica is current,
// has a publish and its delivery go through, and returns the stream's leader.
func jsSettled(ctx context.Context, js jetstream.JetStream, c *cluster, stream string, cons jetstream.Consumer, trial int) (*node, error) {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	for {
		si, err := streamInfo(ctx, js, stream)
		var ci *jetstream.ConsumerInfo
		if err == nil {
			ictx, icancel := context.WithTimeout(ctx, time.Second)
			ci, err = cons.Info(ictx)
			icancel()
		}
		if err == nil && caughtUp(si.Cluster) && caughtUp(ci.Cluster) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stream %s not caught up on every server (%v): %w", stream, err, ctx.Err())
		case <-time.After(probeWait):
		}
	}
	if _, _, err := jsExchange(ctx, js, cons, fmt.Sprintf("before trial %d", trial)); err != nil {
		return nil, err
	}
	return natsStreamLeader(ctx, js, c, stream)
}

// caughtUp reports whether a stream's or consumer's group has a leader and clusterSize-1
// replicas, all current and online.
func caughtUp(ci *jetstream.ClusterInfo) bool {
	if ci == nil || ci.Leader == "" || len(ci.Replicas) != clusterSize-1 {
		return false
	}
	for _, r := range ci.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// jsExchange publishes payload until a publish is acknowledged, then fetches from the consumer
// until it is delivered (acknowledging it and anything older), and returns when each happened.
func jsExchange(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, payload string) (published, consumed time.Time, err error) {
	ctx, cancel := context.WithTimeout(ctx, failoverWait)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err = js.Publish(pctx, "failover", []byte(payload))
		pcancel()
		if err == nil {
			published = time.Now()
			break
		}
		if ctx.Err() != nil {
			return published, consumed, fmt.Errorf("no publish acknowledged (%v): %w", err, ctx.Err())
		}
		time.Sleep(probeWait)
	}
	for {
		batch, err := cons.Fetch(latencyCredit, jetstream.FetchMaxWait(time.Second))
		if err == nil {
			for m := range batch.Messages() {
				if string(m.Data()) == payload && consumed.IsZero() {
					consumed = time.Now()
				}
				actx, acancel := context.WithTimeout(ctx, time.Second)
				m.DoubleAck(actx)
				acancel()
			}
			err = batch.Error()
		}
		if !consumed.IsZero() {
			return published, consumed, nil
		}
		if ctx.Err() != nil {
			return published, consumed, fmt.Errorf("%s was not delivered (%v): %w", payload, err, ctx.Err())
		}
		if err != nil {
			time.Sleep(probeWait)
		}
	}
}
