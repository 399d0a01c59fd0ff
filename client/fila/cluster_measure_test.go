package fila_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// TestMeasureClusterEnqueue (FILA_MEASURE_CLUSTER=seconds only) measures Enqueue on three nodes,
// 1 KB messages in batches of 64 from 4 goroutines, fsync on: a Client on the queue's leader
// (direct), a Cluster seeded with a follower only (the first answer's route hint, then direct), and
// a Client on a follower (every frame forwarded by it); and the batching Producer of a Client on
// the leader against a Cluster's ClusterProducer seeded with a follower. It logs messages/s and
// the three servers' CPU per message.
func TestMeasureClusterEnqueue(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_CLUSTER"))
	if secs <= 0 {
		t.Skip("FILA_MEASURE_CLUSTER=seconds runs it")
	}
	tc := startTestCluster(t)
	leaderAddr := createReplicatedQueue(t, tc.seeds(), "bench")
	var follower string
	for _, n := range tc.nodes {
		if n.addr != leaderAddr {
			follower = n.addr
			break
		}
	}
	payload := make([]byte, 1024)
	batch := make([]fila.Message, 64)
	for i := range batch {
		batch[i] = fila.Message{Queue: "bench", Payload: payload}
	}
	run := func(name string, enqueue func(context.Context) error) {
		cpu0 := tc.cpu(t)
		var sent atomic.Int64
		var failed atomic.Pointer[error]
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs)*time.Second)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if err := enqueue(context.Background()); err != nil {
						failed.CompareAndSwap(nil, &err) // a plain Client does not retry: the goroutine stops
						return
					}
					sent.Add(int64(len(batch)))
				}
			})
		}
		wg.Wait()
		el := time.Since(start)
		cpu := tc.cpu(t) - cpu0
		n := sent.Load()
		t.Logf("MEASURE %-15s %8.0f msg/s  %5.1f µs of server CPU/msg  (%d msgs in %v)",
			name, float64(n)/el.Seconds(), float64(cpu.Microseconds())/float64(max(n, 1)), n, el.Round(time.Millisecond))
		if err := failed.Load(); err != nil {
			t.Logf("MEASURE %s: a goroutine stopped at %v", name, *err)
		}
	}
	check := func(res []fila.EnqueueResult, err error) error {
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err
			}
		}
		return nil
	}
	ctx := context.Background()
	direct, err := fila.Dial(ctx, leaderAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	cl := dialTestCluster(t, []string{follower}, nil)
	forwarded, err := fila.Dial(ctx, follower, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer forwarded.Close()
	// Producers: each goroutine sends 64 messages asynchronously and waits for them.
	produce := func(send func(fila.Message) *fila.Pending) func(context.Context) error {
		return func(ctx context.Context) error {
			pending := make([]*fila.Pending, len(batch))
			for i := range batch {
				pending[i] = send(batch[i])
			}
			for _, pd := range pending {
				if _, err := pd.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		}
	}
	directProducer := direct.NewProducer(fila.ProducerOptions{})
	defer directProducer.Close()
	clusterProducer := cl.NewProducer(fila.ProducerOptions{})
	defer clusterProducer.Close()
	for range 2 {
		run("producer-direct", produce(directProducer.SendAsync))
		run("producer-hints", produce(clusterProducer.SendAsync))
	}
	for range 2 {
		run("direct", func(ctx context.Context) error { return check(direct.Enqueue(ctx, batch...)) })
		run("hints", func(ctx context.Context) error { return check(cl.Enqueue(ctx, batch...)) })
		run("forwarded", func(ctx context.Context) error { return check(forwarded.Enqueue(ctx, batch...)) })
	}
}

// cpu is the user and system CPU the cluster's processes used so far (Linux: /proc/PID/stat).
func (c *testCluster) cpu(t *testing.T) time.Duration {
	var ticks int64
	for _, n := range c.nodes {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(n.p.Pid()) + "/stat")
		if err != nil {
			t.Skip("no /proc: ", err)
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ 100
}
