package broker

import (
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/storage"
)

// countingSink signals done once n deliveries have arrived.
type countingSink struct {
	n, want atomic.Int64
	done    chan struct{}
}

func (k *countingSink) Subscribed(uint32, string) {}

func (k *countingSink) Deliver(_ uint32, ds []Delivery, onWritten func()) bool {
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
			if e := br.Subscribe(Subscription{Queue: "q", ConsumerID: "c", Throttles: v.ds}, sink); e != nil {
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
