package listener_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/listener"
)

// Benchmarks over real QUIC on loopback against a real listener and Pebble store. Each prints a
// summary line: BENCH name=… value=… unit=…  (run: make bench, or
// go test -run '^$' -bench . ./server/rift/listener).

func benchReport(name string, value float64, unit string) {
	fmt.Printf("BENCH name=%s value=%.6g unit=%s\n", name, value, unit)
}

func BenchmarkPubSub64B(b *testing.B) { benchPubSub(b, 64) }
func BenchmarkPubSub1KB(b *testing.B) { benchPubSub(b, 1024) }

// benchPubSub: one publisher stream → one subscriber on another connection, with at most
// `window` messages in flight so the subscriber is never cut off as slow.
func benchPubSub(b *testing.B, size int) {
	f := startBench(b, func(o *listener.Options) { o.SubQueueMsgs = 1 << 16; o.SubQueueBytes = 256 << 20 })
	subConn := rt.Connect(b, f.addr, "admin-token")
	sub := rt.Subscribe(b, subConn, "bench.x", "")
	pubConn := rt.Connect(b, f.addr, "admin-token")
	pub := rt.Open(b, pubConn)
	const window = 8192
	var received atomic.Int64
	progress := make(chan struct{}, 1)
	done := make(chan error, 1)
	n := b.N
	go func() {
		for i := 0; i < n; i++ {
			if _, err := sub.Next(); err != nil {
				done <- err
				return
			}
			received.Add(1)
			select {
			case progress <- struct{}{}:
			default:
			}
		}
		done <- nil
	}()
	frame := riftproto.AppendFrame(nil, &riftproto.Publish{Subject: "bench.x", Payload: make([]byte, size)})
	buf := make([]byte, 0, 64<<10)
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for sent := 0; sent < n; {
		for int64(sent)-received.Load() >= window {
			<-progress
		}
		buf = buf[:0]
		for sent < n && len(buf)+len(frame) <= cap(buf) && int64(sent)-received.Load() < window {
			buf = append(buf, frame...)
			sent++
		}
		if _, err := pub.S.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	el := time.Since(start)
	b.StopTimer()
	if n >= 1000 {
		benchReport(fmt.Sprintf("rift_pubsub_%dB_1to1", size), float64(n)/el.Seconds(), "msg/s")
		benchReport(fmt.Sprintf("rift_pubsub_%dB_1to1_bytes", size), float64(n*size)/el.Seconds()/1e6, "MB/s")
	}
}

// BenchmarkRequestReply measures round trips through a responder connection: REQUEST on a new
// stream, the server's private inbox, the responder's PUBLISH to it, the MESSAGE back.
func BenchmarkRequestReply(b *testing.B) {
	f := startBench(b, nil)
	responder := rt.Connect(b, f.addr, "svc-token")
	sub := rt.Subscribe(b, responder, "svc.echo", "")
	out := rt.Open(b, responder)
	go func() {
		var buf []byte
		for {
			fr, err := sub.Next()
			if err != nil {
				return
			}
			m := fr.(*riftproto.Message)
			buf = riftproto.AppendFrame(buf[:0], &riftproto.Publish{Subject: m.Reply, Payload: m.Payload})
			if _, err := out.S.Write(buf); err != nil {
				return
			}
		}
	}()
	c := rt.Connect(b, f.addr, "game-token")
	payload := make([]byte, 128)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		s := rt.Open(b, c)
		s.Send(b, &riftproto.Request{TimeoutMs: 10_000, Subject: "svc.echo", Payload: payload})
		s.S.Close()
		if fr, err := s.Next(); err != nil {
			b.Fatal(err)
		} else if _, ok := fr.(*riftproto.Message); !ok {
			b.Fatalf("reply %T %+v", fr, fr)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	if len(lat) >= 100 {
		slices.Sort(lat)
		benchReport("rift_request_reply_p50", float64(lat[len(lat)/2].Microseconds()), "us")
		benchReport("rift_request_reply_p99", float64(lat[len(lat)*99/100].Microseconds()), "us")
	}
}

// BenchmarkStreamPublishFsync: 32 concurrent STREAM_PUBLISH callers on an fsync stream (their
// fsyncs are group-committed).
func BenchmarkStreamPublishFsync(b *testing.B) {
	f := startBench(b, nil)
	c := rt.Connect(b, f.addr, "reader-token")
	payload := make([]byte, 1024)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.SetBytes(1024)
	b.ResetTimer()
	start := time.Now()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				s := rt.Open(b, c)
				s.Send(b, &riftproto.StreamPublish{Stream: benchStream, Subject: benchStream + ".x", Payload: payload})
				s.S.Close()
				if fr, err := s.Next(); err != nil {
					b.Error(err)
					return
				} else if _, ok := fr.(*riftproto.Stored); !ok {
					b.Errorf("answer %T %+v", fr, fr)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if b.N >= 1000 {
		benchReport("rift_stream_publish_fsync_1KB_32c", float64(b.N)/el.Seconds(), "msg/s")
	}
}

// BenchmarkFetchAck: fetch 256 at a time from an fsync stream and acknowledge each record, with
// the acks sent concurrently (16 at a time).
func BenchmarkFetchAck(b *testing.B) {
	f := startBench(b, nil)
	c := rt.Connect(b, f.addr, "reader-token")
	payload := make([]byte, 1024)
	for i := 0; i < b.N; {
		for range min(256, b.N-i) {
			f.svc.Streams.Publish("events", "events.x", "", payload)
			i++
		}
	}
	call(b, c, &riftproto.ConsumerOpen{Stream: "events", Name: "bench", AckWaitMs: 3_600_000, MaxAckPending: 65536})
	b.ResetTimer()
	start := time.Now()
	got := 0
	for got < b.N {
		ds := fetch(b, c, "events", "bench", 256)
		if len(ds) == 0 {
			b.Fatalf("fetched %d of %d", got, b.N)
		}
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for _, d := range ds {
			sem <- struct{}{}
			wg.Add(1)
			go func(seq uint64) {
				defer func() { <-sem; wg.Done() }()
				s := rt.Open(b, c)
				s.Send(b, &riftproto.Ack{Stream: "events", Name: "bench", Sequence: seq})
				s.S.Close()
				if fr, err := s.Next(); err != nil {
					b.Error(err)
				} else if _, ok := fr.(*riftproto.Ok); !ok {
					b.Errorf("ack answered %T %+v", fr, fr)
				}
			}(d.Sequence)
		}
		wg.Wait()
		got += len(ds)
	}
	el := time.Since(start)
	b.StopTimer()
	if b.N >= 1000 {
		benchReport("rift_stream_fetch_ack_1KB", float64(b.N)/el.Seconds(), "msg/s")
	}
}

// startBench is start for benchmarks.
func startBench(b *testing.B, tune func(*listener.Options)) *fixture {
	f := &fixture{t: b, dir: b.TempDir(), clock: &clock{t: time.Now()}}
	f.opts = listener.Options{Addr: "127.0.0.1:0", TLS: rt.ServerTLS(b)}
	if tune != nil {
		tune(&f.opts)
	}
	f.open()
	b.Cleanup(f.stop)
	return f
}

var benchStream = "events"

// BenchmarkIdleSubscriptions: the heap that idle subscriptions over real QUIC cost, server and
// client sides together (one process), with the default queue bound of 8,192 messages each. A
// subscription's queue used to be a channel of its bound (448 KiB each); it is a ring that grows
// with the messages waiting.
func BenchmarkIdleSubscriptions(b *testing.B) {
	const conns, perConn = 10, 50
	for range b.N {
		f := startBench(b, nil)
		before := heapAfterGC()
		var subs []*rt.Stream
		for range conns {
			c := rt.Connect(b, f.addr, "admin-token")
			for j := range perConn {
				subs = append(subs, rt.Subscribe(b, c, fmt.Sprintf("idle.%d", j), ""))
			}
		}
		per := float64(heapAfterGC()-before) / float64(len(subs))
		b.ReportMetric(per, "heap-B/sub")
		benchReport("rift_idle_subscription_heap", per, "B")
		f.stop()
	}
}
