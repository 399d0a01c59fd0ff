// Command producer enqueues messages with the SDK's batching Producer, which gathers concurrent
// sends into few Enqueue frames and, with reconnection on, resends frames a dropped connection
// left unanswered (an idempotency key keeps such a resend from storing a message twice).
//
//	go run ./producer -queue demo -n 10
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/examples/internal/flags"
)

func main() {
	addr := flags.Addr()
	queue := flag.String("queue", "demo", "queue to enqueue into (created if missing)")
	n := flag.Int("n", 10, "messages to send")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := fila.Dial(ctx, *addr, &fila.Options{MaxReconnects: -1})
	flags.Exit(err)
	defer c.Close()
	flags.Exit(flags.EnsureQueue(ctx, c, fila.QueueConfig{Name: *queue}))

	p := c.NewProducer(fila.ProducerOptions{})
	defer p.Close()
	pending := make([]*fila.Pending, *n)
	for i := range pending {
		pending[i] = p.SendAsync(fila.Message{
			Queue:          *queue,
			Headers:        map[string]string{"source": "examples/producer"},
			Payload:        fmt.Appendf(nil, "message %d", i),
			IdempotencyKey: fmt.Sprintf("producer-example-%d-%d", time.Now().UnixNano(), i),
		})
	}
	for i, pd := range pending {
		id, err := pd.Wait(ctx)
		flags.Exit(err)
		fmt.Printf("enqueued message %d as %s\n", i, id)
	}
}
