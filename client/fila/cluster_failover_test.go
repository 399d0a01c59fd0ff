package fila_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// clusterKills is how many leaders TestClusterClientsSurviveLeaderKills kills: 2, or
// FILA_CLUSTER_KILLS (3 took 7-34 s on a shared 2-core machine).
func clusterKills(t *testing.T) int {
	if s := os.Getenv("FILA_CLUSTER_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FILA_CLUSTER_KILLS=%q: want a positive number", s)
		}
		return n
	}
	return 2
}

// history is what the producer was told and what the consumer received.
type history struct {
	mu        sync.Mutex
	acked     map[fila.MessageID]bool // enqueues answered Ok
	delivered map[fila.MessageID]int  // deliveries per message
	errs      []error                 // every error the application saw, other than redelivery
	ackLost   int                     // acks answered MessageNotFound (documented: resent, or the lease ended)
	batched   int                     // of acked, the ClusterProducer's
}

func (h *history) fail(what string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.errs) < 20 {
		h.errs = append(h.errs, fmt.Errorf("%s: %w", what, err))
	}
}

func (h *history) ackedCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

// missing counts acknowledged enqueues not delivered yet.
func (h *history) missing() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for id := range h.acked {
		if h.delivered[id] == 0 {
			n++
		}
	}
	return n
}

// Two producers (Cluster.Enqueue, and a ClusterProducer) and a consumer of Clusters dialled with
// every node as a seed go on while the queue's
// leader is killed with SIGKILL, again and again (each killed node is started again before the
// next kill): no call returns an error (an Ack may answer MessageNotFound, documented: the
// message is delivered again), and every enqueue answered Ok is delivered.
func TestClusterClientsSurviveLeaderKills(t *testing.T) {
	kills := clusterKills(t)
	tc := startTestCluster(t)
	createReplicatedQueue(t, tc.seeds(), "orders")
	prod := dialTestCluster(t, tc.seeds(), nil)
	cons := dialTestCluster(t, tc.seeds(), nil)
	h := &history{acked: map[fila.MessageID]bool{}, delivered: map[fila.MessageID]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*serverWait) // a safety net
	defer cancel()

	sub, err := cons.Consume(ctx, "orders", fila.ConsumeOptions{MaxUnacked: 64})
	if err != nil {
		t.Fatal(err)
	}
	var consumed sync.WaitGroup
	consumed.Go(func() {
		for d := range sub.C() {
			h.mu.Lock()
			h.delivered[d.ID]++
			h.mu.Unlock()
			switch err := d.Ack(ctx); {
			case errors.Is(err, fila.ErrMessageNotFound):
				h.mu.Lock()
				h.ackLost++
				h.mu.Unlock()
			case err != nil:
				h.fail("ack", err)
			}
		}
	})

	stopProducing := make(chan struct{})
	var produced sync.WaitGroup
	produced.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond) // pacing, so that the two cores are shared
		defer tick.Stop()
		for i := 0; ; i += 10 {
			select {
			case <-stopProducing:
				return
			case <-tick.C:
			}
			msgs := make([]fila.Message, 10)
			for k := range msgs {
				key := fmt.Sprintf("m%d", i+k)
				msgs[k] = fila.Message{Queue: "orders", Payload: []byte(key), IdempotencyKey: key}
			}
			res, err := prod.Enqueue(ctx, msgs...)
			if err != nil {
				h.fail("enqueue", err)
				continue
			}
			h.mu.Lock()
			for _, r := range res {
				if r.Err == nil {
					h.acked[r.ID] = true
				}
			}
			h.mu.Unlock()
			for _, r := range res {
				if r.Err != nil {
					h.fail("enqueue item", r.Err)
				}
			}
		}
	})

	// A batching producer beside it, with its own Cluster.
	batching := dialTestCluster(t, tc.seeds(), nil).NewProducer(fila.ProducerOptions{})
	produced.Go(func() {
		defer batching.Close()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i += 10 {
			select {
			case <-stopProducing:
				return
			case <-tick.C:
			}
			pending := make([]*fila.Pending, 10)
			for k := range pending {
				key := fmt.Sprintf("p%d", i+k)
				pending[k] = batching.SendAsync(fila.Message{Queue: "orders", Payload: []byte(key), IdempotencyKey: key})
			}
			for _, pd := range pending {
				id, err := pd.Wait(ctx)
				if err != nil {
					h.fail("producer", err)
					continue
				}
				h.mu.Lock()
				h.acked[id] = true
				h.batched++
				h.mu.Unlock()
			}
		}
	})

	// waitProgress waits until n more enqueues were answered Ok.
	waitProgress := func(what string, n int) {
		t.Helper()
		target := h.ackedCount() + n
		for h.ackedCount() < target {
			if ctx.Err() != nil {
				t.Fatalf("%s: the producer made no progress (%d acknowledged)", what, h.ackedCount())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitProgress("before the first kill", 100)
	for k := range kills {
		addr, ok := prod.Route("orders")
		if !ok {
			t.Fatal("the producer knows no leader")
		}
		victim := tc.byAddr(addr)
		start := time.Now()
		victim.p.Kill()
		waitProgress(fmt.Sprintf("after kill %d (node %d)", k+1, victim.id), 100)
		t.Logf("kill %d: node %d, leading orders, killed; 100 enqueues answered Ok %v later", k+1, victim.id, time.Since(start).Round(time.Millisecond))
		restart := time.Now()
		if err := victim.start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %d started again in %v", victim.id, time.Since(restart).Round(time.Millisecond))
		waitProgress(fmt.Sprintf("after node %d came back", victim.id), 100)
	}
	close(stopProducing)
	produced.Wait()
	for h.missing() > 0 {
		if ctx.Err() != nil {
			t.Fatalf("%d acknowledged enqueues were never delivered", h.missing())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sub.Close()
	consumed.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	redelivered := 0
	for _, n := range h.delivered {
		redelivered += n - 1
	}
	t.Logf("%d enqueues acknowledged (%d of them through the ClusterProducer), all delivered; %d deliveries again, %d acks answered MessageNotFound; the subscription moved %d times",
		len(h.acked), h.batched, redelivered, h.ackLost, sub.Moves())
	if h.batched == 0 {
		t.Error("the ClusterProducer had no message acknowledged")
	}
	for _, err := range h.errs {
		t.Error(err)
	}
	if sub.Moves() == 0 {
		t.Errorf("the subscription never moved, through %d kills of its queue's leader", kills)
	}
}
