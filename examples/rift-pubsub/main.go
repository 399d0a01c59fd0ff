// Command rift-pubsub publishes on Rift subjects and receives them on a wildcard subscription.
// Start a server with Rift in development mode first:
//
//	fila-server --rift-listen 127.0.0.1:7443 --rift-dev-certs data/rift-certs
//	go run ./rift-pubsub
//
// Core Rift pub/sub is at most once: a subscriber receives what is published while it is
// subscribed. Rift messages have no headers (see docs/rift.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/filamq/fila/examples/internal/flags"
)

func main() {
	r := flags.RiftFlags()
	n := flag.Int("n", 3, "messages to publish")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := r.Connect(ctx)
	flags.Exit(err)
	defer c.Close()

	sub, err := c.Subscribe(ctx, "greetings.>", "") // ">" matches the rest of the subject
	flags.Exit(err)
	defer sub.Close()
	for i := range *n {
		flags.Exit(c.Publish(ctx, fmt.Sprintf("greetings.lang%d", i), "", fmt.Appendf(nil, "hello %d", i)))
	}
	flags.Exit(c.Flush(ctx))
	for range *n {
		m, err := sub.Recv(ctx)
		flags.Exit(err)
		fmt.Printf("received %s: %s\n", m.Subject, m.Payload)
	}
}
