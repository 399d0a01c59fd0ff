package fila_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// TestMeasureShardedLifecycle (FILA_MEASURE_SHARDS=seconds only) measures the lifecycle
// (enqueue -> consume -> ack, 1 KB, fsync on) of one queue with 1, 2 and 4 shards on three nodes:
// 4 producer goroutines of a Cluster sending batches of 64 messages over 64 fairness keys (so that
// they spread over the shards), one ClusterConsumer acking each delivery from 8 goroutines. It
// logs acknowledged messages/s, the ratio to 1 shard and the servers' CPU per message.
func TestMeasureShardedLifecycle(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_SHARDS"))
	if secs <= 0 {
		t.Skip("FILA_MEASURE_SHARDS=seconds runs it")
	}
	tc := startTestCluster(t)
	var base float64
	for _, shards := range []int{1, 2, 4} {
		queue := fmt.Sprint("life", shards)
		body := fmt.Sprintf(`{"name": %q, "shards": %d}`, queue, shards)
		if code, answer := postQueue(t, tc.nodes[0], body); code != 200 {
			t.Fatalf("creating %s: %d %s", queue, code, answer)
		}
		rate, cpu := measureLifecycle(t, tc, queue, time.Duration(secs)*time.Second)
		if shards == 1 {
			base = rate
		}
		t.Logf("MEASURE shards=%d %8.0f msg/s acknowledged (%.2f of 1 shard), %5.1f µs of server CPU/msg", shards, rate, rate/base, cpu)
	}
}

// measureLifecycle runs the lifecycle on queue for d and returns acknowledged messages/s and the
// servers' CPU µs per message.
func measureLifecycle(t *testing.T, tc *testCluster, queue string, d time.Duration) (rate, cpuPerMsg float64) {
	t.Helper()
	prod := dialTestCluster(t, tc.seeds(), nil)
	cons := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	payload := make([]byte, 1024)
	batch := make([]fila.Message, 64)
	for i := range batch {
		batch[i] = fila.Message{Queue: queue, Payload: payload, FairnessKey: fmt.Sprint("k", i)}
	}
	if _, err := prod.Enqueue(ctx, batch...); err != nil { // warm-up: routes and shard plan
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	sub, err := cons.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 512})
	if err != nil {
		t.Fatal(err)
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for dl := range sub.C() {
				if dl.Ack(ctx) == nil {
					acked.Add(1)
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, _ = prod.Enqueue(ctx, batch...)
			}
		})
	}
	time.Sleep(d / 4) // steady state first
	n0, cpu0, start := acked.Load(), tc.cpu(t), time.Now()
	time.Sleep(d)
	n, cpu, el := acked.Load()-n0, tc.cpu(t)-cpu0, time.Since(start)
	cancel()
	sub.Close()
	wg.Wait()
	return float64(n) / el.Seconds(), float64(cpu.Microseconds()) / float64(max(n, 1))
}
