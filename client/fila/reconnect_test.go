package fila

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// fakeRedial is a Client with no connection whose dials and sleeps are recorded, not performed.
func fakeRedial(o Options, seeds []string, dialErr error) (*Client, *[]string, *[]time.Duration) {
	var dialed []string
	var slept []time.Duration
	c := &Client{
		opts:  o.withDefaults(),
		seeds: seeds,
		subs:  map[uint32]*Consumer{},
		up:    make(chan struct{}),
		done:  make(chan struct{}),
		rand:  func() float64 { return 0 },
		dial: func(_ context.Context, addr string) (net.Conn, error) {
			dialed = append(dialed, addr)
			return nil, dialErr
		},
		sleep: func(d time.Duration) bool { slept = append(slept, d); return true },
	}
	c.log = c.opts.Logger
	c.life, c.lifeStop = context.WithCancel(context.Background())
	return c, &dialed, &slept
}

func TestRedialTriesEverySeedPerAttemptAndGivesUp(t *testing.T) {
	refused := errors.New("connection refused")
	c, dialed, slept := fakeRedial(Options{MaxReconnects: 3, ReconnectWait: 10 * time.Millisecond,
		MaxReconnectWait: 30 * time.Millisecond}, []string{"a:1", "b:2", "c:3"}, refused)
	l, err := c.redial("b:2")
	if l != nil {
		t.Fatal("redial connected with a dialer that always fails")
	}
	var re *ReconnectError
	if !errors.As(err, &re) || re.Attempts != 3 || !errors.Is(err, ErrDisconnected) || !errors.Is(err, refused) || re.Cause != nil {
		t.Fatalf("redial = %v (%#v), want a *ReconnectError after 3 attempts wrapping the dial error", err, re)
	}
	want := []string{"b:2", "c:3", "a:1", "b:2", "c:3", "a:1", "b:2", "c:3", "a:1"}
	if !slices.Equal(*dialed, want) {
		t.Errorf("dialed %v, want %v (starting with the lost address)", *dialed, want)
	}
	if w := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 15 * time.Millisecond}; !slices.Equal(*slept, w) {
		t.Errorf("slept %v, want %v (rand 0: half of 10, 20, 30-capped ms)", *slept, w)
	}
}

func TestRedialStopsWhenTheClientStops(t *testing.T) {
	c, dialed, _ := fakeRedial(Options{MaxReconnects: -1}, []string{"a:1"}, errors.New("refused"))
	n := 0
	c.sleep = func(time.Duration) bool { n++; return n < 5 } // the client "stops" during the 5th wait
	if l, err := c.redial("a:1"); l != nil || err != nil {
		t.Fatalf("redial = %v, %v; want nil, nil once the client stopped", l, err)
	}
	if len(*dialed) != 4 {
		t.Errorf("dialed %d times, want 4", len(*dialed))
	}
}

func TestReconnectErrorMatching(t *testing.T) {
	last := errors.New("refused")
	err := error(&ReconnectError{Attempts: 2, Last: last, Cause: context.DeadlineExceeded})
	var re *ReconnectError
	if !errors.Is(err, ErrDisconnected) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, last) ||
		!errors.As(err, &re) || re.Attempts != 2 {
		t.Errorf("%v does not match ErrDisconnected, its cause and its last dial error", err)
	}
}

// TestReconnectResendsAndResubscribes drops the connection under a pending Enqueue of a
// Producer, a consumer and a plain request: the plain request fails with ErrConnectionLost, the
// Enqueue is sent again on the new connection and its answer reaches the Producer, and the
// consumer subscribes again with its full window and goes on receiving.
func TestReconnectResendsAndResubscribes(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	var events []ConnectionEventKind
	evc := make(chan ConnectionEventKind, 8)
	c, sc := dialPeer(t, p, &Options{MaxReconnects: -1, ReconnectWait: time.Millisecond,
		ConnectionHandler: func(e ConnectionEvent) { evc <- e.Kind }})
	cons, f0 := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: 5})
	sc.Send(f0.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(9, time.Minute)}})
	old := next(t, cons)
	prod := c.NewProducer(ProducerOptions{Linger: -1})
	defer prod.Close()
	pd := prod.SendAsync(Message{Queue: "orders", Payload: []byte("x"), IdempotencyKey: "k1"})
	sc.Expect(t, fibp.OpEnqueue)
	plain := async(func() error { _, err := c.GetConfig(testCtx(t), "k"); return err })
	sc.Expect(t, fibp.OpGetConfig)
	sc.Close()

	if err := wait(t, plain); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("request in flight when the connection dropped: %v, want ErrConnectionLost", err)
	}
	sc2 := p.Accept(t)
	got := map[fibp.Opcode]fibptest.Frame{}
	for range 2 {
		f := sc2.Next(t)
		got[f.Header.Opcode] = f
	}
	cf, ef := got[fibp.OpConsume], got[fibp.OpEnqueue]
	if cf.Frame == nil || ef.Frame == nil {
		t.Fatalf("after reconnecting got %v, want a Consume and the resent Enqueue", got)
	}
	if cr := cf.Frame.(*fibp.Consume); cr.Queue != "orders" || cr.Credit != 5 {
		t.Errorf("resubscription %+v, want queue orders with credit 5", cr)
	}
	if m := ef.Frame.(*fibp.Enqueue).Messages; len(m) != 1 || m[0].IdempotencyKey.Value != "k1" {
		t.Errorf("resent Enqueue %+v", m)
	}
	sc2.Reply(cf, &fibp.ConsumeOk{ConsumerID: "consumer-2"})
	sc2.Reply(ef, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{{MessageID: MessageID{7}, Duplicate: true}}})
	if id, err := pd.Wait(testCtx(t)); err != nil || id != (MessageID{7}) {
		t.Errorf("Send across the reconnect = %v, %v", id, err)
	}
	sc2.Send(cf.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(3, time.Minute)}})
	d := next(t, cons)
	if d.ID != (MessageID{3}) {
		t.Errorf("delivery after the reconnect %v", d.ID)
	}
	// The delivery of the lost connection can be acked, but earns no credit: the resubscription
	// opened a fresh window. The new one does.
	for i, dd := range []*Delivery{old, d} {
		done := async(func() error { return dd.Ack(testCtx(t)) })
		af := sc2.Expect(t, fibp.OpAck)
		if i == 1 {
			if cr := sc2.Expect(t, fibp.OpCredit); cr.Header.RequestID != cf.Header.RequestID {
				t.Errorf("credit for request %d, want the resubscription's %d", cr.Header.RequestID, cf.Header.RequestID)
			}
		}
		sc2.Reply(af, &fibp.AckResult{Results: []fibp.AckResultItem{{}}})
		if err := wait(t, done); err != nil {
			t.Errorf("ack %d: %v", i, err)
		}
		if i == 0 {
			sc2.ExpectQuiet(t, 50*time.Millisecond)
		}
	}
	for len(events) < 2 {
		select {
		case k := <-evc:
			events = append(events, k)
		case <-time.After(fibptest.Timeout):
			t.Fatalf("events %v, want Disconnected then Reconnected", events)
		}
	}
	if !slices.Equal(events, []ConnectionEventKind{Disconnected, Reconnected}) {
		t.Errorf("events %v", events)
	}
	if c.Err() != nil || cons.Err() != nil {
		t.Errorf("client %v, consumer %v after the reconnect; want both running", c.Err(), cons.Err())
	}
}

// TestCallsWaitDuringAnOutage: with the server gone, a call waits until its context ends and
// then fails with a *ReconnectError carrying the context's error.
func TestCallsWaitDuringAnOutage(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, &Options{MaxReconnects: -1, ReconnectWait: time.Millisecond, MaxReconnectWait: 5 * time.Millisecond})
	p.Close()
	sc.Close()
	<-waitDisconnected(c)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.GetConfig(ctx, "k")
	if ctx.Err() == nil {
		t.Errorf("the call returned %v before its context ended", err)
	}
	var re *ReconnectError
	if !errors.Is(err, ErrDisconnected) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) || re.Cause == nil {
		t.Errorf("call during the outage: %v, want a *ReconnectError with DeadlineExceeded", err)
	}
	if c.Err() != nil {
		t.Errorf("client stopped with %v; want it still reconnecting", c.Err())
	}
	c.Close()
	if _, err := c.GetConfig(testCtx(t), "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestReconnectGivesUp: the client stops with a *ReconnectError after MaxReconnects attempts.
func TestReconnectGivesUp(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, &Options{MaxReconnects: 2, ReconnectWait: time.Millisecond})
	p.Close()
	sc.Close()
	select {
	case <-c.Done():
	case <-time.After(fibptest.Timeout):
		t.Fatal("the client did not give up")
	}
	var re *ReconnectError
	if err := c.Err(); !errors.As(err, &re) || re.Attempts != 2 || re.Cause != nil {
		t.Errorf("Err = %v, want a *ReconnectError after 2 attempts", err)
	}
	if _, err := c.GetConfig(testCtx(t), "k"); !errors.Is(err, ErrDisconnected) {
		t.Errorf("call after giving up: %v, want ErrDisconnected", err)
	}
}

// waitDisconnected returns a channel closed once c has noticed the connection is gone.
func waitDisconnected(c *Client) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for c.Connected() {
			time.Sleep(time.Millisecond)
		}
		close(ch)
	}()
	return ch
}

// TestConsumerClosedDuringOutage: a consumer closed around a reconnection is not subscribed on
// the new connection, or is cancelled there at once.
func TestConsumerClosedDuringOutage(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, &Options{MaxReconnects: -1, ReconnectWait: time.Millisecond})
	cons, _ := subscribe(t, c, sc, ConsumeOptions{})
	sc.Close()
	cons.Close()
	sc2 := p.Accept(t)
	done := async(func() error { _, err := c.GetConfig(testCtx(t), "k"); return err })
	subscribed := false
	for {
		f := sc2.Next(t)
		switch f.Header.Opcode {
		case fibp.OpConsume:
			subscribed = true
			continue
		case fibp.OpCancelConsume:
			if !subscribed {
				t.Error("CancelConsume without a Consume on the new connection")
			}
			subscribed = false
			continue
		case fibp.OpGetConfig:
			sc2.Reply(f, &fibp.GetConfigResult{Value: "v"})
		default:
			t.Fatalf("unexpected %v", f.Header.Opcode)
		}
		break
	}
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if subscribed {
		t.Error("the closed consumer was subscribed again and not cancelled")
	}
	sc2.ExpectQuiet(t, 50*time.Millisecond)
}
