package powerfail

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/filamq/fila/client/fila"
)

// loadCounts is what the server acknowledged during one round's load.
type loadCounts struct {
	single, batched atomic.Int64 // enqueues answered Ok, by producer
	delivered       atomic.Int64
	acked           atomic.Int64 // acks answered Ok
}

// produce enqueues to the queue until the connection or ctx ends, batch messages per Enqueue
// frame, recording every message the server answered Ok.
func produce(ctx context.Context, addr string, round int, name string, batch int, l *ledger, ok *atomic.Int64) {
	c, err := fila.Dial(ctx, addr, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for n := 0; ; {
		msgs := make([]fila.Message, batch)
		for i := range msgs {
			msgs[i] = fila.Message{Queue: queueName, Payload: fmt.Appendf(nil, "r%d/%s/%d", round, name, n)}
			n++
		}
		res, err := c.Enqueue(ctx, msgs...)
		if err != nil {
			return
		}
		for i, r := range res {
			if r.Err == nil {
				l.enqueueOk(r.ID, string(msgs[i].Payload))
				ok.Add(1)
			}
		}
	}
}

// holdBack is how many deliveries the consumer keeps unacked at a time: it holds every tenth
// delivery until this many newer ones are held, so that at any moment some recent messages are
// leased (kept alive), not acked, and must come back after the crash.
const holdBack = 32

// consume takes deliveries until the connection or ctx ends and acks every one, the held-back
// ones late.
func consume(ctx context.Context, addr string, round int, l *ledger, counts *loadCounts) {
	c, err := fila.Dial(ctx, addr, nil)
	if err != nil {
		return
	}
	defer c.Close()
	cons, err := c.Consume(ctx, queueName, fila.ConsumeOptions{MaxUnacked: 256})
	if err != nil {
		return
	}
	var acks sync.WaitGroup
	defer acks.Wait()
	var held []*fila.Delivery
	for n := 1; ; n++ {
		d, err := cons.Next(ctx)
		if err != nil {
			return
		}
		l.delivered(round, d)
		counts.delivered.Add(1)
		if n%10 == 0 {
			held = append(held, d)
			if len(held) <= holdBack {
				continue
			}
			d, held = held[0], held[1:]
		}
		l.ackSending(d.ID)
		acks.Go(func() {
			if d.Ack(ctx) == nil {
				l.ackOk(round, d.ID)
				counts.acked.Add(1)
			}
		})
	}
}
