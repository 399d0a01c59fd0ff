package fila

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// subscribe runs Consume against the scripted peer and answers ConsumeOk.
func subscribe(t *testing.T, c *Client, sc *fibptest.Conn, opts ConsumeOptions) (*Consumer, fibptest.Frame) {
	t.Helper()
	var cons *Consumer
	done := async(func() (err error) { cons, err = c.Consume(testCtx(t), "orders", opts); return err })
	f := sc.Expect(t, fibp.OpConsume)
	sc.Reply(f, &fibp.ConsumeOk{ConsumerID: "consumer-1"})
	if err := wait(t, done); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	return cons, f
}

func deliveryMsg(n byte, lease time.Duration) fibp.DeliveryMessage {
	now := time.Now()
	return fibp.DeliveryMessage{
		MessageID: MessageID{n}, Queue: "orders", Payload: []byte{n}, FairnessKey: "default",
		Weight: 1, AttemptCount: 1, EnqueuedAt: uint64(now.UnixMilli()) - 5,
		LeasedAt: uint64(now.UnixMilli()), LeaseExpiresAt: uint64(now.Add(lease).UnixMilli()),
	}
}

func next(t *testing.T, cons *Consumer) *Delivery {
	t.Helper()
	d, err := cons.Next(testCtx(t))
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return d
}

func TestConsumeFrameAndDeliveryFields(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: 8, Throttles: []Throttle{{
		Name:   "stripe",
		Limits: []ThrottleLimit{{Max: 100, Window: time.Second}},
		Key:    Key{HeaderPart("merchant")}, WhenKeyMissing: fibp.WhenKeyMissingUnthrottled,
	}}})
	req := f.Frame.(*fibp.Consume)
	if req.Queue != "orders" || req.Credit != 8 || len(req.Throttles) != 1 {
		t.Fatalf("Consume = %+v", req)
	}
	th := req.Throttles[0]
	if th.Name != "stripe" || th.Limits[0] != (fibp.ThrottleLimit{MaxDeliveries: 100, WindowMs: 1000}) ||
		FormatKey(th.Key) != "header:merchant" || th.WhenKeyMissing != fibp.WhenKeyMissingUnthrottled {
		t.Errorf("throttle = %+v", th)
	}
	if cons.ConsumerID() != "consumer-1" {
		t.Errorf("consumer ID = %q", cons.ConsumerID())
	}
	m := deliveryMsg(9, time.Minute)
	m.Headers = map[string]string{"h": "v"}
	m.RedriveCount = 2
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{m}})
	d := next(t, cons)
	if d.ID != m.MessageID || d.Queue != "orders" || d.Headers["h"] != "v" || string(d.Payload) != "\x09" ||
		d.FairnessKey != "default" || d.Weight != 1 || d.AttemptCount != 1 || d.RedriveCount != 2 ||
		d.LeasedAt.UnixMilli() != int64(m.LeasedAt) || d.LeaseExpiresAt.UnixMilli() != int64(m.LeaseExpiresAt) ||
		d.EnqueuedAt.UnixMilli() != int64(m.EnqueuedAt) {
		t.Errorf("delivery = %+v", d)
	}
}

func TestConsumeError(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.Consume(testCtx(t), "orders", ConsumeOptions{}); return err })
	f := sc.Expect(t, fibp.OpConsume)
	if f.Frame.(*fibp.Consume).Credit != DefaultMaxUnacked {
		t.Errorf("default credit = %d", f.Frame.(*fibp.Consume).Credit)
	}
	sc.Reply(f, &fibp.Error{ErrorCode: fibp.CodeThrottleConflict, Message: `throttle "x" is declared with another key`})
	if err := wait(t, done); !errors.Is(err, ErrThrottleConflict) {
		t.Errorf("err = %v", err)
	}
}

func TestCreditGrantedPerAck(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, &Options{})
	cons, f := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: 4, DisableLeaseKeepAlive: true})
	subID := f.Header.RequestID
	sc.Send(subID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{
		deliveryMsg(1, time.Minute), deliveryMsg(2, time.Minute), deliveryMsg(3, time.Minute), deliveryMsg(4, time.Minute),
	}})
	var ds []*Delivery
	for range 4 {
		ds = append(ds, next(t, cons))
	}
	sc.ExpectQuiet(t, 50*time.Millisecond) // nothing settled: no credit

	for _, d := range ds[:2] {
		done := async(func() error { return d.Ack(testCtx(t)) })
		ack := sc.Expect(t, fibp.OpAck)
		items := ack.Frame.(*fibp.Ack).Items
		if len(items) != 1 || items[0].MessageID != d.ID || items[0].Queue != "orders" {
			t.Fatalf("Ack items = %+v", items)
		}
		cr := sc.Expect(t, fibp.OpCredit)
		if cr.Header.RequestID != subID || cr.Frame.(*fibp.Credit).AdditionalCredit != 1 {
			t.Fatalf("Credit on request %d = %+v", cr.Header.RequestID, cr.Frame)
		}
		sc.Reply(ack, &fibp.AckResult{Results: []fibp.AckResultItem{{}}})
		if err := wait(t, done); err != nil {
			t.Fatal(err)
		}
	}
	retry := 50 * time.Millisecond
	done := async(func() error { return ds[2].Nack(testCtx(t), "boom", &retry) })
	nack := sc.Expect(t, fibp.OpNack)
	item := nack.Frame.(*fibp.Nack).Items[0]
	if item.Error != "boom" || item.RetryAfterMs != wire.Some[uint64](50) || item.MessageID != ds[2].ID {
		t.Errorf("Nack item = %+v", item)
	}
	sc.Expect(t, fibp.OpCredit)
	sc.Reply(nack, &fibp.NackResult{Results: []fibp.NackResultItem{{ErrorCode: fibp.CodeMessageNotFound}}})
	if err := wait(t, done); !errors.Is(err, ErrMessageNotFound) {
		t.Errorf("Nack err = %v, want the item's MessageNotFound", err)
	}
	// Acking the same delivery again grants nothing more.
	done = async(func() error { return ds[0].Ack(testCtx(t)) })
	ack := sc.Expect(t, fibp.OpAck)
	sc.Reply(ack, &fibp.AckResult{Results: []fibp.AckResultItem{{ErrorCode: fibp.CodeMessageNotFound}}})
	wait(t, done)
	sc.ExpectQuiet(t, 50*time.Millisecond)
}

// creditServer delivers total messages on one subscription, honouring credit exactly as a
// broker must, and records the most unacked messages it ever had outstanding.
type creditServer struct {
	total int

	mu        sync.Mutex
	sub       uint32
	credit    uint32
	sent      int
	unacked   map[MessageID]bool
	maxUnack  int
	granted   uint32
	ackFrames int
	extends   int
	cancelled bool
}

func (s *creditServer) handle(c *fibptest.Conn, f fibptest.Frame) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch req := f.Frame.(type) {
	case *fibp.Consume:
		s.sub, s.credit, s.unacked = f.Header.RequestID, req.Credit, map[MessageID]bool{}
		c.Reply(f, &fibp.ConsumeOk{ConsumerID: "c"})
	case *fibp.Credit:
		s.credit += req.AdditionalCredit
		s.granted += req.AdditionalCredit
	case *fibp.Ack:
		s.ackFrames++
		res := &fibp.AckResult{}
		for _, it := range req.Items {
			item := fibp.AckResultItem{}
			if !s.unacked[it.MessageID] {
				item.ErrorCode = fibp.CodeMessageNotFound
			}
			delete(s.unacked, it.MessageID)
			res.Results = append(res.Results, item)
		}
		c.Reply(f, res)
	case *fibp.ExtendLease:
		s.extends++
		res := &fibp.ExtendLeaseResult{}
		for range req.Items {
			res.Results = append(res.Results, fibp.ExtendLeaseResultItem{LeaseExpiresAt: 1})
		}
		c.Reply(f, res)
	case *fibp.CancelConsume:
		s.cancelled = true
	}
	s.deliverLocked(c)
}

func (s *creditServer) deliverLocked(c *fibptest.Conn) {
	for s.sub != 0 && s.credit > 0 && s.sent < s.total {
		n := min(int(s.credit), 3, s.total-s.sent)
		d := &fibp.Delivery{}
		for range n {
			s.sent++
			m := deliveryMsg(byte(s.sent), time.Minute)
			s.unacked[m.MessageID] = true
			d.Messages = append(d.Messages, m)
		}
		s.credit -= uint32(n)
		s.maxUnack = max(s.maxUnack, len(s.unacked))
		c.Send(s.sub, d)
	}
}

func TestCreditWindowNeverExceeded(t *testing.T) {
	srv := &creditServer{total: 60}
	p := fibptest.Start(t, fibptest.Options{Handler: srv.handle})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := c.Consume(testCtx(t), "orders", ConsumeOptions{MaxUnacked: 4})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range srv.total {
		d := next(t, cons)
		wg.Go(func() {
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
			if err := d.Ack(testCtx(t)); err != nil {
				t.Errorf("Ack: %v", err)
			}
		})
	}
	wg.Wait()
	cons.Close()
	deadline := time.Now().Add(fibptest.Timeout)
	for {
		srv.mu.Lock()
		granted, cancelled, maxUnack := srv.granted, srv.cancelled, srv.maxUnack
		srv.mu.Unlock()
		if granted == uint32(srv.total) && cancelled {
			if maxUnack > 4 {
				t.Errorf("server had %d unacked deliveries outstanding; MaxUnacked is 4", maxUnack)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("granted %d credits for %d acks, cancelled=%v", granted, srv.total, cancelled)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Keep-alive extends every lease when half of it has passed — on the lease table's clock, which
// the test moves — and so always before it runs out: the test never moves the clock to an
// expiry, so a missing or late extension fails it (sc.Expect times out) whatever the load.
func TestLeaseKeepAlive(t *testing.T) {
	const lease = 200 * time.Millisecond
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	clock := newFakeClock()
	c.leases.clock = clock // before the first delivery; Consume's lock orders it before deliver
	cons, f := subscribe(t, c, sc, ConsumeOptions{})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{
		deliveryMsg(1, lease), deliveryMsg(2, lease),
	}})
	d1, d2 := next(t, cons), next(t, cons)
	for round := range 2 {
		clock.WaitSleeping(t)    // the deliveries (then the last answer) are taken into account
		clock.Advance(lease / 2) // since the delivery, then since the last extension was sent
		ext := sc.Expect(t, fibp.OpExtendLease)
		items := ext.Frame.(*fibp.ExtendLease).Items
		if len(items) != 2 {
			t.Fatalf("round %d: ExtendLease carries %d items, want both leases in one frame", round, len(items))
		}
		for _, it := range items {
			if it.ExtendByMs != uint64(lease.Milliseconds()) || it.Queue != "orders" {
				t.Errorf("item = %+v, want extension by the 200ms lease", it)
			}
		}
		sc.Reply(ext, &fibp.ExtendLeaseResult{Results: []fibp.ExtendLeaseResultItem{{LeaseExpiresAt: 1}, {LeaseExpiresAt: 1}}})
	}
	// Acked: d1 is no longer extended. MessageNotFound: d2 stops too, and its loss is reported.
	done := async(func() error { return d1.Ack(testCtx(t)) })
	ack := sc.Expect(t, fibp.OpAck)
	sc.Expect(t, fibp.OpCredit)
	sc.Reply(ack, &fibp.AckResult{Results: []fibp.AckResultItem{{}}})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	clock.WaitSleeping(t)
	clock.Advance(lease / 2)
	ext := sc.Expect(t, fibp.OpExtendLease)
	items := ext.Frame.(*fibp.ExtendLease).Items
	if len(items) != 1 || items[0].MessageID != d2.ID {
		t.Fatalf("after ack, ExtendLease items = %+v, want only d2", items)
	}
	sc.Reply(ext, &fibp.ExtendLeaseResult{Results: []fibp.ExtendLeaseResultItem{{ErrorCode: fibp.CodeMessageNotFound}}})
	select {
	case <-d2.LeaseLost():
	case <-time.After(fibptest.Timeout):
		t.Fatal("LeaseLost not closed after MessageNotFound")
	}
	sc.Expect(t, fibp.OpCredit) // the lost lease frees its credit
	clock.WaitSleeping(t)
	clock.Advance(time.Hour) // nothing is tracked any more: nothing to extend
	sc.ExpectQuiet(t, 100*time.Millisecond)
}

// TestMaxDeliveriesStopsCredit: a subscription that will take N messages never asks for more,
// even though each ack normally grants one more credit.
func TestMaxDeliveriesStopsCredit(t *testing.T) {
	for _, tc := range []struct {
		maxUnacked   uint32
		limit        uint64
		wantInitial  uint32
		wantCredited int // Credit frames sent while settling all limit deliveries
	}{
		{maxUnacked: 8, limit: 3, wantInitial: 3, wantCredited: 0},
		{maxUnacked: 2, limit: 5, wantInitial: 2, wantCredited: 3},
		{maxUnacked: 2, limit: 0, wantInitial: 2, wantCredited: 5}, // no limit: one per ack
	} {
		p := fibptest.Start(t, fibptest.Options{})
		c, sc := dialPeer(t, p, nil)
		cons, f := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: tc.maxUnacked, MaxDeliveries: tc.limit, DisableLeaseKeepAlive: true})
		if got := f.Frame.(*fibp.Consume).Credit; got != tc.wantInitial {
			t.Errorf("%+v: Consume credit %d, want %d", tc, got, tc.wantInitial)
		}
		credited, n := 0, 5
		if tc.limit > 0 {
			n = int(tc.limit)
		}
		for i := range n {
			sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(byte(i+1), time.Minute)}})
			d := next(t, cons)
			done := async(func() error { return d.Ack(testCtx(t)) })
			ack := sc.Expect(t, fibp.OpAck)
			sc.Reply(ack, &fibp.AckResult{Results: []fibp.AckResultItem{{}}})
			if err := wait(t, done); err != nil {
				t.Fatal(err)
			}
			if credited < tc.wantCredited {
				if cr := sc.Expect(t, fibp.OpCredit); cr.Frame.(*fibp.Credit).AdditionalCredit != 1 {
					t.Fatalf("Credit %+v", cr.Frame)
				}
				credited++
			}
		}
		sc.ExpectQuiet(t, 50*time.Millisecond) // no Credit beyond the limit
		if credited != tc.wantCredited {
			t.Errorf("%+v: %d Credit frames, want %d", tc, credited, tc.wantCredited)
		}
	}
}

func TestKeepAliveDisabled(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{DisableLeaseKeepAlive: true})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, 100*time.Millisecond)}})
	next(t, cons)
	sc.ExpectQuiet(t, 300*time.Millisecond)
}

func TestConsumerCloseSendsCancel(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{})
	cons.Close()
	cancel := sc.Expect(t, fibp.OpCancelConsume)
	if cancel.Header.RequestID != f.Header.RequestID {
		t.Errorf("CancelConsume request ID %d, want the Consume's %d", cancel.Header.RequestID, f.Header.RequestID)
	}
	if _, err := cons.Next(testCtx(t)); !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("Next after Close: %v", err)
	}
	cons.Close()
	sc.ExpectQuiet(t, 50*time.Millisecond)
}

func TestSubscriptionErrorEndsConsumer(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, time.Minute)}})
	sc.Send(f.Header.RequestID, &fibp.Error{ErrorCode: fibp.CodeCreditExhausted, Metadata: map[string]string{"server_credit": "0"}})
	sc.Expect(t, fibp.OpCancelConsume)
	if d := next(t, cons); d.ID != (MessageID{1}) {
		t.Errorf("buffered delivery = %v", d.ID)
	}
	if _, err := cons.Next(testCtx(t)); !errors.Is(err, ErrCreditExhausted) {
		t.Errorf("Next = %v, want CreditExhausted", err)
	}
}

func TestNextIsCancellationSafeAndC(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{DisableLeaseKeepAlive: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := cons.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %v", err)
	}
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, time.Minute), deliveryMsg(2, time.Minute)}})
	for want := byte(1); want <= 2; want++ {
		select {
		case d := <-cons.C():
			if d.ID[0] != want {
				t.Errorf("got %v, want message %d", d.ID, want)
			}
		case <-time.After(fibptest.Timeout):
			t.Fatal("no delivery on C()")
		}
	}
	cons.Close()
	select {
	case _, ok := <-cons.C():
		if ok {
			t.Error("C() delivered after Close")
		}
	case <-time.After(fibptest.Timeout):
		t.Fatal("C() not closed after Close")
	}
}

func TestBatchAckNackExtend(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	a, b := MessageID{1}, MessageID{2}
	var errs []error
	done := async(func() (err error) { errs, err = c.Ack(testCtx(t), AckItem{"q", a}, AckItem{"q", b}); return err })
	f := sc.Expect(t, fibp.OpAck)
	if len(f.Frame.(*fibp.Ack).Items) != 2 {
		t.Fatalf("one Ack frame expected with 2 items")
	}
	sc.Reply(f, &fibp.AckResult{Results: []fibp.AckResultItem{{}, {ErrorCode: fibp.CodeMessageNotFound}}})
	if err := wait(t, done); err != nil || errs[0] != nil || !errors.Is(errs[1], ErrMessageNotFound) {
		t.Fatalf("Ack = %v, %v", errs, err)
	}
	done = async(func() (err error) {
		errs, err = c.Nack(testCtx(t), NackItem{Queue: "q", ID: a, Error: "e"})
		return err
	})
	f = sc.Expect(t, fibp.OpNack)
	if f.Frame.(*fibp.Nack).Items[0].RetryAfterMs.Present {
		t.Error("retry_after_ms present without RetryAfter")
	}
	sc.Reply(f, &fibp.NackResult{}) // too few results
	if err := wait(t, done); err != nil || !errors.Is(errs[0], ErrInvalidFrame) {
		t.Fatalf("Nack = %v, %v", errs, err)
	}
	var res []ExtendLeaseResult
	done = async(func() (err error) {
		res, err = c.ExtendLease(testCtx(t), ExtendLeaseItem{"q", a, 1500 * time.Millisecond})
		return err
	})
	f = sc.Expect(t, fibp.OpExtendLease)
	if f.Frame.(*fibp.ExtendLease).Items[0].ExtendByMs != 1500 {
		t.Errorf("extend_by_ms = %d", f.Frame.(*fibp.ExtendLease).Items[0].ExtendByMs)
	}
	sc.Reply(f, &fibp.ExtendLeaseResult{Results: []fibp.ExtendLeaseResultItem{{LeaseExpiresAt: 1700000000000}}})
	if err := wait(t, done); err != nil || res[0].Err != nil || res[0].ExpiresAt.UnixMilli() != 1700000000000 {
		t.Fatalf("ExtendLease = %+v, %v", res, err)
	}
}

func TestConcurrentAcksCoalesce(t *testing.T) {
	srv := &creditServer{total: 200}
	p := fibptest.Start(t, fibptest.Options{Handler: srv.handle})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cons, err := c.Consume(testCtx(t), "orders", ConsumeOptions{MaxUnacked: 200})
	if err != nil {
		t.Fatal(err)
	}
	var ds []*Delivery
	for range srv.total {
		ds = append(ds, next(t, cons))
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() {
			if err := d.Ack(testCtx(t)); err != nil {
				t.Errorf("Ack: %v", err)
			}
		})
	}
	wg.Wait()
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.ackFrames >= srv.total/2 {
		t.Errorf("%d concurrent acks took %d Ack frames; want them coalesced", srv.total, srv.ackFrames)
	}
	t.Logf("%d acks in %d frames", srv.total, srv.ackFrames)
}

func TestExpiredLeaseWithoutKeepAliveFreesCredit(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, 50*time.Millisecond)}})
	d := next(t, cons)
	cr := sc.Expect(t, fibp.OpCredit) // after the lease plus its grace period
	if cr.Frame.(*fibp.Credit).AdditionalCredit != 1 {
		t.Errorf("credit = %+v", cr.Frame)
	}
	select {
	case <-d.LeaseLost():
	default:
		t.Error("LeaseLost not closed for an expired lease")
	}
}

func TestConsumeGivenUpIsCancelled(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() error { _, err := c.Consume(ctx, "orders", ConsumeOptions{}); return err })
	f := sc.Expect(t, fibp.OpConsume)
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Consume = %v", err)
	}
	cc := sc.Expect(t, fibp.OpCancelConsume)
	if cc.Header.RequestID != f.Header.RequestID {
		t.Errorf("CancelConsume for request %d, want %d", cc.Header.RequestID, f.Header.RequestID)
	}
}
