package rift_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of this client against a fila-server subprocess on loopback: the path the
// comparison tool (tools/compare) measures. Each prints BENCH name=… value=… unit=… lines.
//
//	go test -run '^$' -bench . ./rift

func benchReport(name string, value float64, unit string) {
	fmt.Printf("BENCH name=%s value=%.6g unit=%s\n", name, value, unit)
}

func BenchmarkClientPubSub64B(b *testing.B) { benchClientPubSub(b, 64) }
func BenchmarkClientPubSub1KB(b *testing.B) { benchClientPubSub(b, 1024) }

// benchClientPubSub: Publisher.Publish per message on one connection, Subscription.Recv on
// another, with at most `window` messages in flight (as tools/compare does).
func benchClientPubSub(b *testing.B, size int) {
	s := startServer(b)
	ctx := context.Background()
	sc := s.client(b, "admin-token")
	sub, err := sc.Subscribe(ctx, "bench.x", "")
	if err != nil {
		b.Fatal(err)
	}
	pc := s.client(b, "admin-token")
	pub, err := pc.Publisher(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const window = 4096
	var received atomic.Int64
	n := b.N
	done := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if _, err := sub.Recv(ctx); err != nil {
				done <- err
				return
			}
			received.Add(1)
		}
		done <- nil
	}()
	payload := make([]byte, size)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < n; sent++ {
		for int64(sent)-received.Load() >= window {
			time.Sleep(50 * time.Microsecond)
		}
		if err := pub.Publish(ctx, "bench.x", "", payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if n >= 1000 {
		benchReport(fmt.Sprintf("rift_client_pubsub_%dB_1to1", size), float64(n)/el.Seconds(), "msg/s")
	}
}

// BenchmarkClientRequestReply: Client.Request round trips of 1 KB through a responder that
// publishes each payload back on its publisher.
func BenchmarkClientRequestReply(b *testing.B) {
	s := startServer(b)
	ctx := context.Background()
	rc := s.client(b, "svc-token")
	sub, err := rc.Subscribe(ctx, "svc.echo", "")
	if err != nil {
		b.Fatal(err)
	}
	rpub, err := rc.Publisher(ctx)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		for {
			m, err := sub.Recv(ctx)
			if err != nil || rpub.Publish(ctx, m.Reply, "", m.Payload) != nil {
				return
			}
		}
	}()
	c := s.client(b, "game-token")
	payload := make([]byte, 1024)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Request(ctx, "svc.echo", payload, 5*time.Second); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	if len(lat) >= 100 {
		slices.Sort(lat)
		benchReport("rift_client_request_reply_p50", float64(lat[len(lat)/2].Microseconds()), "us")
		benchReport("rift_client_request_reply_p99", float64(lat[len(lat)*99/100].Microseconds()), "us")
	}
}

// BenchmarkClientStreamPublishFsync: 32 goroutines calling StreamPublish (1 KB) on one client,
// against an fsync stream.
func BenchmarkClientStreamPublishFsync(b *testing.B) {
	s := startServer(b)
	ctx := context.Background()
	c := s.client(b, "admin-token")
	payload := make([]byte, 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := c.StreamPublish(ctx, "events", "events.x", "", payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if b.N >= 1000 {
		benchReport("rift_client_stream_publish_fsync_1KB_32c", float64(b.N)/el.Seconds(), "msg/s")
	}
}
