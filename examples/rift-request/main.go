// Command rift-request answers requests on a Rift subject and sends one: the responder
// subscribes in a queue group (so several responders would share the work) and replies to each
// message's reply subject; the requester waits for the first answer.
//
//	fila-server --rift-listen 127.0.0.1:7443 --rift-dev-certs data/rift-certs
//	go run ./rift-request -name Ada
package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/filamq/fila/client/rift"
	"github.com/filamq/fila/examples/internal/flags"
)

func main() {
	r := flags.RiftFlags()
	name := flag.String("name", "world", "what to send")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := r.Connect(ctx)
	flags.Exit(err)
	defer c.Close()

	sub, err := c.Subscribe(ctx, "greeter.hello", "greeters")
	flags.Exit(err)
	defer sub.Close()
	go respond(ctx, c, sub)

	reply, err := c.Request(ctx, "greeter.hello", []byte(*name), 5*time.Second)
	flags.Exit(err)
	fmt.Printf("reply: %s\n", reply.Payload)
}

// respond answers every request on sub until ctx ends.
func respond(ctx context.Context, c *rift.Client, sub *rift.Subscription) {
	for {
		m, err := sub.Recv(ctx)
		if err != nil {
			return
		}
		if m.Reply != "" {
			c.Publish(ctx, m.Reply, "", fmt.Appendf(nil, "hello, %s", m.Payload))
			c.Flush(ctx)
		}
	}
}
