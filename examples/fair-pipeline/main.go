// Command fair-pipeline shows fair scheduling across tenants. One noisy tenant enqueues a large
// backlog first; two quiet tenants (one with weight 2) enqueue a few jobs after it. A FIFO queue
// would make them wait behind the whole backlog; Fila's Deficit Round Robin over fairness keys
// serves them at once, in proportion to their weights.
//
//	go run ./fair-pipeline
package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/examples/internal/flags"
)

type tenant struct {
	name   string
	jobs   int
	weight uint32
}

func main() {
	addr := flags.Addr()
	noisy := flag.Int("noisy", 500, "jobs of the noisy tenant, enqueued first")
	show := flag.Int("show", 24, "deliveries to print in order")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := fila.Dial(ctx, *addr, nil)
	flags.Exit(err)
	defer c.Close()
	queue := fmt.Sprintf("fair-pipeline-%d", time.Now().UnixNano())
	_, err = c.CreateQueue(ctx, fila.QueueConfig{Name: queue})
	flags.Exit(err)
	defer c.DeleteQueue(context.Background(), queue)

	tenants := []tenant{{"noisy", *noisy, 1}, {"quiet-a", 6, 1}, {"quiet-b", 6, 2}}
	total := 0
	for _, t := range tenants {
		msgs := make([]fila.Message, t.jobs)
		for i := range msgs {
			msgs[i] = fila.Message{Queue: queue, FairnessKey: t.name, Weight: t.weight, Payload: fmt.Appendf(nil, "%s job %d", t.name, i)}
		}
		for len(msgs) > 0 { // at most 256 messages per Enqueue frame here
			batch := msgs[:min(256, len(msgs))]
			msgs = msgs[len(batch):]
			_, err := c.Enqueue(ctx, batch...)
			flags.Exit(err)
		}
		total += t.jobs
		fmt.Printf("enqueued %d jobs for %s (weight %d)\n", t.jobs, t.name, t.weight)
	}

	cons, err := c.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 1})
	flags.Exit(err)
	defer cons.Close()
	var order []string
	served := map[string]int{}
	quietDone := 0
	for i := 0; quietDone < 12; i++ {
		d, err := cons.Next(ctx)
		flags.Exit(err)
		flags.Exit(d.Ack(ctx))
		served[d.FairnessKey]++
		if d.FairnessKey != "noisy" {
			quietDone++
		}
		if i < *show {
			order = append(order, d.FairnessKey)
		}
		if quietDone == 12 {
			fmt.Printf("first %d deliveries: %s\n", len(order), strings.Join(order, " "))
			fmt.Printf("all 12 quiet jobs were done after %d deliveries (of %d queued); the noisy tenant got %d of them\n",
				i+1, total, served["noisy"])
		}
	}
}
