// Command consumer processes a queue with a handler: Consume runs it on up to -concurrency
// deliveries at once, acks each message whose handler returns nil and nacks (retry, then
// dead-letter) each whose handler returns an error.
//
//	go run ./consumer -queue demo -n 10
package main

import (
	"context"
	"flag"
	"fmt"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/examples/internal/flags"
)

func main() {
	addr := flags.Addr()
	queue := flag.String("queue", "demo", "queue to consume")
	n := flag.Int64("n", 0, "stop after this many messages (0 = until Ctrl-C)")
	concurrency := flag.Int("concurrency", 4, "handlers running at once")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c, err := fila.Dial(ctx, *addr, &fila.Options{MaxReconnects: -1})
	flags.Exit(err)
	defer c.Close()
	flags.Exit(flags.EnsureQueue(ctx, c, fila.QueueConfig{Name: *queue}))
	cons, err := c.Consume(ctx, *queue, fila.ConsumeOptions{MaxUnacked: 64})
	flags.Exit(err)
	defer cons.Close()

	var done atomic.Int64
	err = cons.Consume(ctx, func(ctx context.Context, d *fila.Delivery) error {
		if strings.Contains(string(d.Payload), "poison") {
			return fmt.Errorf("cannot process %q", d.Payload) // nacked: retried, then dead-lettered
		}
		fmt.Printf("processed %s: %s (attempt %d)\n", d.ID, d.Payload, d.AttemptCount)
		if *n > 0 && done.Add(1) == *n {
			stop() // Consume returns once the running handlers are done
		}
		return nil
	}, *concurrency)
	if ctx.Err() == nil {
		flags.Exit(err)
	}
}
