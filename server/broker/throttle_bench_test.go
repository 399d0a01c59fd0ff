package broker

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/storage"
)

// countingSink signals done once n deliveries have arrived.
type countingSink struct {
	n, want atomic.Int64
	done    chan struct{}
}

func (k *countingSink) Subscribed(string) {}
func (k *countingSink) Ended(*Error)      {}

func (k *countingSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	if k.n.Add(int64(len(ds))) >= k.want.Load() {
		select {
		case k.done <- struct{}{}:
		default:
		}
	}
	if onWritten != nil {
		onWritten()
	}
	return true
}

// BenchmarkThrottleDelivery delivers a backlog of b.N messages (in-memory store, one subscription,
// server-managed credit) without a throttle, with one unkeyed throttle and with one keyed by a
// header with 10,000 values, both at a limit far above the achievable rate: the broker's cost of
// a throttle that never binds, per delivery.
func BenchmarkThrottleDelivery(b *testing.B) {
	never := []ThrottleLimit{{Max: 1 << 40, WindowMs: 1000}}
	for _, v := range []struct {
		name string
		ds   []ThrottleDeclaration
	}{
		{"none", nil},
		{"unkeyed", []ThrottleDeclaration{{Name: "t", Limits: never}}},
		{"10000buckets", []ThrottleDeclaration{{Name: "t", Limits: never, Key: keys.Key{{Kind: keys.Header, Name: "k"}}}}},
	} {
		b.Run(v.name, func(b *testing.B) {
			br, err := Open(Options{Store: storage.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			if e := br.CreateQueue(QueueSpec{Name: "q", VisibilityTimeoutMs: 3_600_000}); e != nil {
				b.Fatal(e)
			}
			for i := 0; i < b.N; i += 1000 {
				msgs := make([]Message, min(1000, b.N-i))
				for j := range msgs {
					msgs[j] = Message{Queue: "q", Payload: []byte("x"), Headers: map[string]string{"k": strconv.Itoa((i + j) % 10_000)}}
				}
				done := make(chan struct{})
				br.Enqueue(msgs, func([]EnqueueResult, *Error) { close(done) })
				<-done
			}
			sink := &countingSink{done: make(chan struct{}, 1)}
			sink.want.Store(int64(b.N))
			b.ResetTimer()
			if _, e := br.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c", Throttles: v.ds}, sink); e != nil {
				b.Fatal(e)
			}
			<-sink.done
			b.StopTimer()
			if got := sink.n.Load(); got != int64(b.N) {
				b.Fatal(fmt.Sprintf("%d deliveries of %d", got, b.N))
			}
		})
	}
}

// stampSink records the lease times of its deliveries.
type stampSink struct {
	mu sync.Mutex
	at []int64
}

func (k *stampSink) Subscribed(string) {}
func (k *stampSink) Ended(*Error)      {}

func (k *stampSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	k.mu.Lock()
	for _, d := range ds {
		k.at = append(k.at, d.LeasedAt)
	}
	k.mu.Unlock()
	if onWritten != nil {
		onWritten()
	}
	return true
}

// BenchmarkThrottleSaturated runs a backlog behind 200 deliveries per 100 ms for 2 s of real
// time (in-memory broker) and reports the achieved rate against the limit, from the deliveries'
// lease times after the first window.
func BenchmarkThrottleSaturated(b *testing.B) {
	const n, windowMs, runMs = 200, 100, 2000
	for b.Loop() {
		br, err := Open(Options{Store: storage.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		if e := br.CreateQueue(QueueSpec{Name: "q", VisibilityTimeoutMs: 3_600_000}); e != nil {
			b.Fatal(e)
		}
		msgs := make([]Message, 2*n*runMs/windowMs)
		for i := range msgs {
			msgs[i] = Message{Queue: "q", Payload: []byte("x")}
		}
		done := make(chan struct{})
		br.Enqueue(msgs, func([]EnqueueResult, *Error) { close(done) })
		<-done
		sink := &stampSink{}
		d := ThrottleDeclaration{Name: "t", Limits: []ThrottleLimit{{Max: n, WindowMs: windowMs}}}
		if _, e := br.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c", Throttles: []ThrottleDeclaration{d}}, sink); e != nil {
			b.Fatal(e)
		}
		time.Sleep((runMs + windowMs) * time.Millisecond)
		br.Close()
		sink.mu.Lock()
		first := sink.at[0]
		count := 0
		for _, at := range sink.at {
			if at >= first+windowMs && at < first+windowMs+runMs {
				count++
			}
		}
		sink.mu.Unlock()
		b.ReportMetric(100*float64(count)/float64(n*runMs/windowMs), "%limit")
	}
}
