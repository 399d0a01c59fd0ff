package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/tools/internal/fibpconn"
)

// runner holds what the workloads share.
type runner struct {
	o       options
	srv     *server
	queues  int
	idleRSS int64 // measured before any workload
}

// newQueue creates a fresh queue for one workload.
func (r *runner) newQueue(prefix string) (string, error) {
	return r.newQueueWith(prefix, fibp.CreateQueue{})
}

// newQueueWith creates a fresh queue with the settings of cfg (its name is chosen here).
func (r *runner) newQueueWith(prefix string, cfg fibp.CreateQueue) (string, error) {
	r.queues++
	name := fmt.Sprintf("%s-%d", prefix, r.queues)
	c, err := fibpconn.Dial(r.srv.addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	cfg.Name = name
	res, err := c.Call(&cfg)
	if err != nil {
		return "", err
	}
	if code := res.(*fibp.CreateQueueResult).ErrorCode; code != fibp.CodeOk {
		return "", fmt.Errorf("create %s: %v", name, code)
	}
	return name, nil
}

// load describes a producer/consumer mix.
type load struct {
	queue     string
	producers int
	window    int // Enqueue frames in flight per producer
	batch     int // messages per Enqueue frame
	payload   int
	keys      int                        // fairness keys, assigned round-robin (0 = none given)
	weights   []int                      // per key, when set
	consumers int                        // 0 = produce only
	credit    uint32                     // per consumer
	limit     int64                      // stop producing after this many messages (0 = no limit)
	groups    int                        // values of the "group" header, assigned round-robin (0 = no header)
	unique    bool                       // every message carries an idempotency key of its own
	throttles []fibp.ThrottleDeclaration // declared by every consumer
}

// counters are updated by the load goroutines.
type counters struct {
	enqueued, acked atomic.Int64
	failed          atomic.Int64
	keyCount        sync.Map // fairness key → *atomic.Int64 of deliveries
}

func (ct *counters) countKey(k string) {
	v, ok := ct.keyCount.Load(k)
	if !ok {
		v, _ = ct.keyCount.LoadOrStore(k, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

// start launches the load; stop ends it and closes the connections.
func (r *runner) start(l load, ct *counters) (stop func(), err error) {
	var conns []*fibpconn.Conn
	quit := make(chan struct{})
	var wg sync.WaitGroup
	stop = func() {
		close(quit)
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}
	payload := make([]byte, l.payload)
	for i := range l.consumers {
		c, err := fibpconn.Dial(r.srv.addr)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, c)
		if err := consumeLoop(c, l, ct, i); err != nil {
			stop()
			return nil, err
		}
	}
	var produced atomic.Int64
	for p := range l.producers {
		c, err := fibpconn.Dial(r.srv.addr)
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			produceLoop(c, l, ct, payload, p, quit, &produced)
		}()
	}
	return stop, nil
}

func produceLoop(c *fibpconn.Conn, l load, ct *counters, payload []byte, p int, quit chan struct{}, produced *atomic.Int64) {
	sem := make(chan struct{}, l.window)
	seq := p
	for {
		select {
		case <-quit:
			return
		case sem <- struct{}{}:
		}
		if l.limit > 0 && produced.Add(int64(l.batch)) > l.limit {
			<-sem
			return
		}
		req := &fibp.Enqueue{Messages: make([]fibp.EnqueueMessage, l.batch)}
		for i := range req.Messages {
			m := fibp.EnqueueMessage{Queue: l.queue, Payload: payload}
			if l.keys > 0 {
				k := seq % l.keys
				m.FairnessKey = wire.Some(fmt.Sprintf("k%d", k))
				if len(l.weights) > 0 {
					m.Weight = wire.Some(uint32(l.weights[k]))
				}
			}
			if l.groups > 0 {
				m.Headers = map[string]string{"group": strconv.Itoa(seq % l.groups)}
			}
			if l.unique {
				m.IdempotencyKey = wire.Some(strconv.Itoa(p) + "-" + strconv.Itoa(seq))
			}
			seq++
			req.Messages[i] = m
		}
		c.Go(req, func(f fibp.Frame, err error) {
			<-sem
			res, ok := f.(*fibp.EnqueueResult)
			if err != nil || !ok {
				ct.failed.Add(int64(l.batch))
				time.Sleep(10 * time.Millisecond) // ChannelFull or closing: back off
				return
			}
			for _, r := range res.Results {
				if r.ErrorCode == fibp.CodeOk {
					ct.enqueued.Add(1)
				} else {
					ct.failed.Add(1)
				}
			}
		})
	}
}

// consumeLoop subscribes and acks every delivery in one Ack frame, granting the credit back.
func consumeLoop(c *fibpconn.Conn, l load, ct *counters, _ int) error {
	var sub uint32
	ready := make(chan struct{})
	onDelivery := func(d *fibp.Delivery) {
		<-ready
		ack := &fibp.Ack{Items: make([]fibp.AckItem, len(d.Messages))}
		for i, m := range d.Messages {
			ack.Items[i] = fibp.AckItem{Queue: m.Queue, MessageID: m.MessageID}
			if l.keys > 0 {
				ct.countKey(m.FairnessKey)
			}
		}
		n := len(d.Messages)
		c.Go(ack, func(f fibp.Frame, err error) {
			if res, ok := f.(*fibp.AckResult); ok && err == nil {
				for _, r := range res.Results {
					if r.ErrorCode == fibp.CodeOk {
						ct.acked.Add(1)
					}
				}
			}
		})
		c.Credit(sub, uint32(n))
	}
	var err error
	sub, err = c.ConsumeWith(&fibp.Consume{Queue: l.queue, Credit: l.credit, Throttles: l.throttles}, onDelivery)
	close(ready)
	return err
}

// measure runs for d after a warm-up, with a progress bar, and returns the rate of count.
func measure(label string, d time.Duration, count func() int64) float64 {
	time.Sleep(min(d/5, time.Second)) // warm-up
	bar := progressbar.NewOptions64(d.Milliseconds(),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
	start, from := time.Now(), count()
	for time.Since(start) < d {
		time.Sleep(50 * time.Millisecond)
		el := time.Since(start)
		bar.Set64(el.Milliseconds())
		bar.Describe(fmt.Sprintf("%s %.0f msg/s", label, float64(count()-from)/el.Seconds()))
	}
	bar.Finish()
	return float64(count()-from) / time.Since(start).Seconds()
}
