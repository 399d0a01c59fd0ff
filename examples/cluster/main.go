// Command cluster produces and consumes through fila.Cluster, which sends each request to the
// node that leads its queue and follows the leader when it changes: kill -9 the leader while it
// runs and it goes on, printing which node leads the queue now. Messages whose lease the old
// leader held are delivered again after a failover; nothing acknowledged is lost.
//
//	go run ./cluster -n 100
//
// Against the three local nodes of `make cluster` (run from the repository root), until
// interrupted; kill -9 the node it names as leader (the fila-server whose --listen port that is,
// as `ps -ef | grep fila-server` shows), and start it again with make cluster's command line:
//
//	go run ./cluster -addr 127.0.0.1:5561,127.0.0.1:5562,127.0.0.1:5563 -n 0
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/examples/internal/flags"
)

func main() {
	addr := flags.Addr()
	queue := flag.String("queue", "demo-cluster", "queue to use (created if missing)")
	n := flag.Int("n", 100, "messages to send, then wait until each is delivered (0 = until interrupted)")
	rate := flag.Int("rate", 200, "messages per second")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := fila.DialCluster(dialCtx, strings.Split(*addr, ","), nil)
	flags.Exit(err)
	defer c.Close()
	admin, err := c.Any(dialCtx)
	flags.Exit(err)
	flags.Exit(flags.EnsureQueue(dialCtx, admin, fila.QueueConfig{Name: *queue}))

	var s stats
	sub, err := c.Consume(dialCtx, *queue, fila.ConsumeOptions{})
	flags.Exit(err)
	defer sub.Close()
	go s.consume(ctx, sub)

	produced := make(chan error, 1)
	go func() { produced <- s.produce(ctx, c, *queue, *n, *rate) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-produced:
			if err == nil && *n > 0 {
				err = s.waitDelivered(ctx)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				flags.Exit(err)
			}
			acked, delivered, again := s.counts()
			fmt.Printf("all %d messages delivered (%d deliveries, %d of them again after a failover)\n", acked, delivered, again)
			return
		case <-tick.C:
			leader, _ := c.Route(*queue)
			acked, delivered, again := s.counts()
			fmt.Printf("leader %s: %d enqueued, %d delivered (%d again)\n", leader, acked, delivered, again)
		}
	}
}

// stats is what was enqueued (acknowledged by the cluster) and what was delivered.
type stats struct {
	mu        sync.Mutex
	acked     map[string]bool // payloads enqueued
	delivered map[string]int  // deliveries per payload
	again     int
	changed   chan struct{}
}

func (s *stats) init() {
	if s.acked == nil {
		s.acked, s.delivered, s.changed = map[string]bool{}, map[string]int{}, make(chan struct{}, 1)
	}
}

func (s *stats) counts() (acked, delivered, again int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init()
	for _, k := range s.delivered {
		delivered += k
	}
	return len(s.acked), delivered, s.again
}

// produce enqueues n messages (0: until ctx ends), rate per second, each with an idempotency key
// so that a batch sent again after a lost connection stores nothing twice.
func (s *stats) produce(ctx context.Context, c *fila.Cluster, queue string, n, rate int) error {
	run := time.Now().UnixNano()
	tick := time.NewTicker(time.Second / time.Duration(max(rate, 1)))
	defer tick.Stop()
	for i := 0; n == 0 || i < n; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		body := fmt.Sprintf("message %d", i)
		res, err := c.Enqueue(ctx, fila.Message{Queue: queue, Payload: []byte(body), IdempotencyKey: fmt.Sprintf("%d-%d", run, i)})
		if err == nil {
			err = res[0].Err
		}
		if err != nil {
			return fmt.Errorf("enqueue %q: %w", body, err)
		}
		s.mu.Lock()
		s.init()
		s.acked[body] = true
		s.mu.Unlock()
	}
	return nil
}

// consume acks every delivery; a message delivered again after a failover is counted.
func (s *stats) consume(ctx context.Context, sub *fila.ClusterConsumer) {
	for {
		d, err := sub.Next(ctx)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.init()
		body := string(d.Payload)
		if s.delivered[body]++; s.delivered[body] > 1 {
			s.again++
		}
		s.mu.Unlock()
		select {
		case s.changed <- struct{}{}:
		default:
		}
		// MessageNotFound: the lease ended (or an ack resent after a lost connection had been
		// applied): the message is, or was, delivered again.
		if err := d.Ack(ctx); err != nil && !errors.Is(err, fila.ErrMessageNotFound) && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "ack:", err)
		}
	}
}

// waitDelivered waits until every enqueued message was delivered.
func (s *stats) waitDelivered(ctx context.Context) error {
	for {
		s.mu.Lock()
		s.init()
		missing := 0
		for body := range s.acked {
			if s.delivered[body] == 0 {
				missing++
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if missing == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
