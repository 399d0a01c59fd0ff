package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsLoad drives JetStream producers (async publish with a window) and pull consumers with the
// official client, each on its own connection.
type jsLoad struct {
	e       *env
	p       *peer
	subject string
	payload []byte
	limit   int64 // producers stop once this many publishes were acknowledged (0 = never)

	published, failed atomic.Int64

	quit  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []*nats.Conn
	stops []func()
}

func newJSLoad(e *env, p *peer, subject string, size int) *jsLoad {
	return &jsLoad{e: e, p: p, subject: subject, payload: make([]byte, size), quit: make(chan struct{})}
}

func (l *jsLoad) connect(opts ...jetstream.JetStreamOpt) (jetstream.JetStream, error) {
	nc, err := l.e.natsConnect(l.p)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns = append(l.conns, nc)
	l.mu.Unlock()
	return jetstream.New(nc, opts...)
}

// stop ends producers and consumers and closes every connection.
func (l *jsLoad) stop() {
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.stops {
		s()
	}
	for _, nc := range l.conns {
		nc.Close()
	}
	l.conns, l.stops = nil, nil
}

// produce starts n producers, each with batchSize*batchWindow async publishes awaiting their ack:
// as many messages in flight as a Fila producer has.
func (l *jsLoad) produce(n int) error {
	for range n {
		js, err := l.connect(jetstream.WithPublishAsyncMaxPending(batchSize*batchWindow),
			jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { l.published.Add(1) }),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { l.failed.Add(1) }))
		if err != nil {
			return err
		}
		l.wg.Go(func() { l.produceLoop(js) })
	}
	return nil
}

func (l *jsLoad) produceLoop(js jetstream.JetStream) {
	for {
		select {
		case <-l.quit:
			return
		default:
		}
		if l.limit > 0 && l.published.Load() >= l.limit {
			<-js.PublishAsyncComplete()
			return
		}
		_, err := js.PublishAsync(l.subject, l.payload, jetstream.WithStallWait(10*time.Second))
		if err != nil && !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			l.failed.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// createStream makes a file-storage stream on one subject with the given retention: R3 on a
// cluster, whose leader the load's later connections then go to (as fila's go to the queue's
// leader).
func (l *jsLoad) createStream(ctx context.Context, name string, retention jetstream.RetentionPolicy) (jetstream.Stream, error) {
	js, err := l.connect()
	if err != nil {
		return nil, err
	}
	conf := jetstream.StreamConfig{Name: name, Subjects: []string{l.subject}, Storage: jetstream.FileStorage, Retention: retention}
	if l.p.cluster != nil {
		conf.Replicas = clusterSize
	}
	st, err := js.CreateStream(ctx, conf)
	if err != nil || l.p.cluster == nil {
		return st, err
	}
	n, err := natsStreamLeader(ctx, js, l.p.cluster, name)
	if err != nil {
		return nil, err
	}
	l.p = &peer{addr: n.addr, cluster: l.p.cluster}
	return st, nil
}

// jsPublish measures acknowledged async publishes per second from publishProducers producers.
func jsPublish(size int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		l := newJSLoad(e, p, "bench", size)
		defer l.stop()
		if _, err := l.createStream(ctx, "BENCH", jetstream.LimitsPolicy); err != nil {
			return nil, err
		}
		if err := l.produce(publishProducers); err != nil {
			return nil, err
		}
		rate, err := e.measureRate(ctx, "nats publish", l.published.Load)
		if err == nil && l.published.Load() == 0 {
			err = fmt.Errorf("no publish was acknowledged (%d failed)", l.failed.Load())
		}
		return []float64{rate}, err
	}
}

// jsLifecycle pre-fills a work-queue stream, then measures acknowledged messages per second while
// lifecycleProducers keep publishing and n pull consumers of one durable consumer ack explicitly.
// Acknowledged messages are counted on the server: a work-queue stream removes a message when its
// ack is processed, so acked = published − messages still stored.
func jsLifecycle(n int) side {
	return func(ctx context.Context, e *env, p *peer) ([]float64, error) {
		l := newJSLoad(e, p, "work", 1024)
		defer l.stop()
		stream, err := l.createStream(ctx, "WORK", jetstream.WorkQueuePolicy)
		if err != nil {
			return nil, err
		}
		if err := l.prefill(ctx); err != nil {
			return nil, err
		}
		_, err = stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "workers",
			AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: n * consumerCredit})
		if err != nil {
			return nil, err
		}
		if err := l.consume(ctx, n); err != nil {
			return nil, err
		}
		if err := l.produce(lifecycleProducers); err != nil {
			return nil, err
		}
		var last atomic.Int64
		acked := func() int64 {
			// Read the publish count first: a publish stored in between only makes the figure lower.
			pub := l.published.Load()
			info, err := stream.Info(ctx)
			if err != nil {
				return last.Load()
			}
			v := pub - int64(info.State.Msgs)
			last.Store(v)
			return v
		}
		rate, err := e.measureRate(ctx, fmt.Sprintf("nats lifecycle %dc", n), acked)
		return []float64{rate}, err
	}
}

// prefill publishes -prefill messages with lifecycleProducers producers and waits for their acks.
func (l *jsLoad) prefill(ctx context.Context) error {
	fill := newJSLoad(l.e, l.p, l.subject, len(l.payload))
	fill.limit = l.e.o.prefill
	defer fill.stop()
	if err := fill.produce(lifecycleProducers); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { fill.wg.Wait(); close(done) }()
	if err := l.e.waitFill(ctx, "nats prefill", fill.published.Load, done); err != nil {
		return err
	}
	l.published.Store(fill.published.Load()) // the lifecycle count starts from what is stored
	return nil
}

// consume starts n pull consumers on the durable consumer "workers", each on its own connection
// with consumerCredit messages per pull, acknowledging every message.
func (l *jsLoad) consume(ctx context.Context, n int) error {
	for range n {
		js, err := l.connect()
		if err != nil {
			return err
		}
		c, err := js.Consumer(ctx, "WORK", "workers")
		if err != nil {
			return err
		}
		cc, err := c.Consume(func(m jetstream.Msg) { m.Ack() }, jetstream.PullMaxMessages(consumerCredit))
		if err != nil {
			return err
		}
		l.mu.Lock()
		l.stops = append(l.stops, cc.Stop)
		l.mu.Unlock()
	}
	return nil
}

// jsLatency publishes one message at a time (waiting for its PubAck) to a work-queue stream and
// times it from the publish to its arrival at a pull consumer, which acks it.
func jsLatency(ctx context.Context, e *env, p *peer) ([]float64, error) {
	l := newJSLoad(e, p, "latency", 1024)
	defer l.stop()
	arrived := make(chan time.Time, 1)
	pjs, err := l.pair(ctx, "LATENCY", func(m jetstream.Msg) {
		at := time.Now()
		m.Ack()
		arrived <- at
	})
	if err != nil {
		return nil, err
	}
	p50, p99, err := e.measureLatency(ctx, "nats latency", func() (time.Duration, error) {
		start := time.Now()
		if _, err := pjs.Publish(ctx, "latency", l.payload); err != nil {
			return 0, err
		}
		select {
		case at := <-arrived:
			return at.Sub(start), nil
		case <-time.After(deliveryWait):
			return 0, errors.New("a message was not delivered within 10 s")
		}
	})
	return []float64{p50, p99}, err
}

// pair sets up the one-message-at-a-time workloads (latency, round trip): a work-queue stream
// named stream on the load's subject, with a durable pull consumer named after the subject that
// acks explicitly and hands each message to onMsg (latencyCredit pulled at a time), on a
// connection of its own; it returns the producer's connection. Both close with l.stop.
func (l *jsLoad) pair(ctx context.Context, stream string, onMsg func(jetstream.Msg)) (jetstream.JetStream, error) {
	st, err := l.createStream(ctx, stream, jetstream.WorkQueuePolicy)
	if err != nil {
		return nil, err
	}
	if _, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: l.subject,
		AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		return nil, err
	}
	cjs, err := l.connect()
	if err != nil {
		return nil, err
	}
	c, err := cjs.Consumer(ctx, stream, l.subject)
	if err != nil {
		return nil, err
	}
	cc, err := c.Consume(onMsg, jetstream.PullMaxMessages(latencyCredit))
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.stops = append(l.stops, cc.Stop)
	l.mu.Unlock()
	return l.connect()
}
