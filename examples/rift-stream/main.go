// Command rift-stream creates a durable Rift stream at run time (or finds it there), stores
// messages in it and reads them back with a durable consumer, acknowledging each:
//
//	fila-server --rift-listen 127.0.0.1:7443 --rift-dev-certs data/rift-certs
//	go run ./rift-stream -n 3
//
// The stream outlives the program and the server (its definition is kept with its records): run
// it again and the consumer resumes after what it acknowledged. `fila rift stream describe
// demo` shows it, `fila rift stream delete demo` removes it. Creating a stream needs a control
// identity (the development one is).
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
	name := flag.String("stream", "demo", "stream to create (or use)")
	n := flag.Int("n", 3, "messages to store")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := r.Connect(ctx)
	flags.Exit(err)
	defer c.Close()

	subjects := *name + ".orders.>"
	info, created, err := c.CreateStream(ctx, rift.StreamConfig{Name: *name, Subjects: []string{subjects}, MaxAge: 24 * time.Hour})
	flags.Exit(err)
	if created {
		fmt.Printf("created stream %s for %s\n", info.Name, subjects)
	} else {
		fmt.Printf("stream %s exists with %d messages\n", info.Name, info.Messages)
	}
	for i := range *n {
		st, err := c.StreamPublish(ctx, *name, fmt.Sprintf("%s.orders.%d", *name, i), "", fmt.Appendf(nil, "order %d", i))
		flags.Exit(err)
		fmt.Printf("stored #%d\n", st.Sequence)
	}

	// A durable consumer: fetch what is there, acknowledge after processing (at least once).
	k, err := c.Consumer(ctx, *name, "printer", rift.ConsumerConfig{AckWait: 30 * time.Second, MaxAckPending: 100})
	flags.Exit(err)
	for {
		ds, err := k.Fetch(ctx, 100)
		flags.Exit(err)
		if len(ds) == 0 {
			return
		}
		for _, d := range ds {
			fmt.Printf("fetched #%d %s: %s\n", d.Sequence, d.Subject, d.Payload)
			flags.Exit(k.Ack(ctx, d.Sequence))
		}
	}
}
