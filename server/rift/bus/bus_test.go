package bus

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSlowConsumerEndsOnlyItself(t *testing.T) {
	b := New(Options{QueueMsgs: 4})
	slow, _ := b.Subscribe("a.*", "")
	fast, _ := b.Subscribe("a.>", "")
	for i := range 10 {
		if _, err := b.Publish("a.b", "", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if m, err := fast.Next(context.Background()); err != nil || m.Payload[0] != byte(i) {
			t.Fatalf("fast: %v %v", m, err)
		}
	}
	if !errors.Is(slow.Err(), ErrSlowConsumer) {
		t.Fatalf("slow: %v", slow.Err())
	}
	if b.Subscriptions() != 1 {
		t.Fatalf("%d subscriptions, want the fast one", b.Subscriptions())
	}
	b.Publish("nobody.listens", "", nil)
	// slow took 4 messages and refused the 5th; fast took all 10.
	if c, want := b.Counters(), (Counters{Published: 11, Delivered: 14, SlowConsumers: 1}); c != want {
		t.Fatalf("counters %+v, want %+v", c, want)
	}
}

func TestByteBound(t *testing.T) {
	b := New(Options{QueueBytes: 10})
	s, _ := b.Subscribe("x", "")
	b.Publish("x", "", make([]byte, 6))
	if n, _ := b.Publish("x", "", make([]byte, 6)); n != 0 || !errors.Is(s.Err(), ErrSlowConsumer) {
		t.Fatalf("byte bound: n=%d err=%v", n, s.Err())
	}
}

func TestPayloadIsCopied(t *testing.T) {
	b := New(Options{})
	s, _ := b.Subscribe("x", "")
	p := []byte("abc")
	b.Publish("x", "", p)
	p[0] = 'z'
	if m, _ := s.Next(context.Background()); string(m.Payload) != "abc" {
		t.Fatalf("payload aliased the caller's slice: %q", m.Payload)
	}
}

func TestRequest(t *testing.T) {
	b := New(Options{})
	ctx := context.Background()
	if _, err := b.Request(ctx, "svc", nil, time.Second); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("no responders: %v", err)
	}
	s, _ := b.Subscribe("svc", "")
	go func() {
		m, _ := s.Next(ctx)
		b.Publish(m.Reply, "", append([]byte("re:"), m.Payload...))
	}()
	m, err := b.Request(ctx, "svc", []byte("q"), 10*time.Second)
	if err != nil || string(m.Payload) != "re:q" {
		t.Fatalf("request: %+v %v", m, err)
	}
	if _, err := b.Request(ctx, "svc", nil, time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("timeout: %v", err)
	}
	if b.Subscriptions() != 1 {
		t.Fatalf("inbox subscriptions leaked: %d", b.Subscriptions())
	}
}

// A reply reaches its Request and, like any publication, the subscriptions matching the inbox;
// only the first reply counts; Close ends a waiting Request.
func TestRequestReplyIsAlsoAPublication(t *testing.T) {
	b := New(Options{})
	ctx := context.Background()
	watcher, _ := b.Subscribe("_INBOX.>", "")
	s, _ := b.Subscribe("svc", "")
	go func() {
		m, _ := s.Next(ctx)
		b.Publish(m.Reply, "", []byte("first"))
		if n, _ := b.Publish(m.Reply, "", []byte("second")); n != 1 { // the watcher only
			t.Errorf("the second reply reached %d receivers, want 1", n)
		}
	}()
	m, err := b.Request(ctx, "svc", nil, 10*time.Second)
	if err != nil || string(m.Payload) != "first" {
		t.Fatalf("request: %+v %v", m, err)
	}
	for _, want := range []string{"first", "second"} {
		got, err := watcher.Next(ctx)
		if err != nil || string(got.Payload) != want || got.Subject != m.Subject {
			t.Fatalf("watcher got %+v %v, want %q on %s", got, err, want, m.Subject)
		}
	}
	go func() {
		s.Next(ctx) // a request that is never answered
		b.Close()
	}()
	if _, err := b.Request(ctx, "svc", nil, time.Minute); !errors.Is(err, ErrClosed) {
		t.Fatalf("request when the bus closed: %v", err)
	}
}

func TestCloseEndsEverySubscription(t *testing.T) {
	b := New(Options{})
	s, _ := b.Subscribe(">", "g")
	b.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if _, err := b.Subscribe("x", ""); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscribe after Close: %v", err)
	}
}

// A Publisher's remembered matches follow subscriptions coming and going, and Close.
func TestPublisherFollowsSubscriptions(t *testing.T) {
	b := New(Options{})
	p := b.Publisher()
	if n, err := p.Publish("a.b", "", nil); n != 0 || err != nil {
		t.Fatalf("nobody subscribed: %d %v", n, err)
	}
	s1, _ := b.Subscribe("a.*", "")
	if n, _ := p.Publish("a.b", "", []byte("1")); n != 1 {
		t.Fatalf("after subscribing: %d receivers", n)
	}
	s2, _ := b.Subscribe("a.>", "q")
	s3, _ := b.Subscribe("a.b", "q")
	if n, _ := p.Publish("a.b", "", []byte("2")); n != 2 {
		t.Fatalf("plain + one queue group member: %d receivers", n)
	}
	if n, _ := p.Publish("a.c", "", []byte("3")); n != 2 {
		t.Fatalf("another subject: %d receivers", n)
	}
	s1.Unsubscribe()
	if n, _ := p.Publish("a.c", "", []byte("4")); n != 1 {
		t.Fatalf("after unsubscribing: %d receivers", n)
	}
	got := 0
	for _, s := range []*Subscription{s2, s3} {
		for {
			if _, ok := s.TryNext(); !ok {
				break
			}
			got++
		}
	}
	if got != 3 { // "2" to one member, "3" and "4" to s2 (the only member matching a.c)
		t.Fatalf("queue group received %d messages, want 3", got)
	}
	b.Close()
	if _, err := p.Publish("a.c", "", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func BenchmarkPublishOneSubscriber(b *testing.B) {
	bus := New(Options{QueueMsgs: 1 << 16})
	s, _ := bus.Subscribe("bench.*", "")
	payload := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		bus.Publish("bench.x", "", payload)
		s.TryNext()
	}
}

func BenchmarkPublisherOneSubscriber(b *testing.B) {
	bus := New(Options{QueueMsgs: 1 << 16})
	s, _ := bus.Subscribe("bench.*", "")
	p := bus.Publisher()
	payload := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		p.Publish("bench.x", "", payload)
		s.TryNext()
	}
}

// A reply whose Publish counted it as delivered to the waiting request is what that request
// returns, even when the request is cancelled at the same moment; a request that fails was
// handed no reply (its replier's Publish counts none).
func TestADeliveredReplyIsNeverAFailedRequest(t *testing.T) {
	b := New(Options{})
	defer b.Close()
	s, _ := b.Subscribe("svc", "")
	type cancelled struct {
		cancel context.CancelFunc
		n      chan int
	}
	calls := make(chan cancelled)
	go func() {
		for c := range calls {
			m, err := s.Next(context.Background())
			if err != nil {
				return
			}
			c.cancel() // the requester's give-up races the reply
			n, _ := b.Publish(m.Reply, "", []byte("reply"))
			c.n <- n
		}
	}()
	defer close(calls)
	for i := range 500 {
		ctx, cancel := context.WithCancel(context.Background())
		c := cancelled{cancel: cancel, n: make(chan int, 1)}
		calls <- c
		m, err := b.Request(ctx, "svc", nil, 10*time.Second)
		n := <-c.n
		if delivered := n == 1; delivered != (err == nil) {
			t.Fatalf("call %d: the reply's Publish counted %d deliveries, the request returned %q, %v", i, n, m.Payload, err)
		}
		if err == nil && string(m.Payload) != "reply" {
			t.Fatalf("call %d: reply %q", i, m.Payload)
		}
	}
}
