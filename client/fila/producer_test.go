package fila

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

func TestEnqueueFieldsAndPerItemErrors(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	var results []EnqueueResult
	done := async(func() (err error) {
		results, err = c.Enqueue(testCtx(t),
			Message{Queue: "orders", Headers: map[string]string{"tenant": "a"}, Payload: []byte("x"),
				FairnessKey: "a", Weight: 3, Delay: 1500 * time.Millisecond, IdempotencyKey: "k1"},
			Message{Queue: "missing", Payload: []byte("y")},
			Message{Queue: "orders", Payload: []byte("z"), IdempotencyKey: "k1"},
		)
		return err
	})
	f := sc.Expect(t, fibp.OpEnqueue)
	msgs := f.Frame.(*fibp.Enqueue).Messages
	m0, m1 := msgs[0], msgs[1]
	if m0.Headers["tenant"] != "a" || m0.FairnessKey != wire.Some("a") || m0.Weight != wire.Some[uint32](3) ||
		m0.DelayMs != wire.Some[uint64](1500) || m0.IdempotencyKey != wire.Some("k1") {
		t.Errorf("message 0 = %+v", m0)
	}
	if m1.FairnessKey.Present || m1.Weight.Present || m1.DelayMs.Present || m1.IdempotencyKey.Present {
		t.Errorf("message 1 has optional fields present: %+v", m1)
	}
	id := MessageID{0x01, 0x90}
	sc.Reply(f, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{
		{MessageID: id},
		{ErrorCode: fibp.CodeQueueNotFound},
		{MessageID: id, Duplicate: true},
	}})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if results[0].ID != id || results[0].Err != nil || results[0].Duplicate {
		t.Errorf("result 0 = %+v", results[0])
	}
	if !errors.Is(results[1].Err, ErrQueueNotFound) || results[1].Err.Error() != `fila: queue "missing" not found (QueueNotFound)` {
		t.Errorf("result 1 err = %v", results[1].Err)
	}
	if !results[2].Duplicate || results[2].ID != id {
		t.Errorf("result 2 = %+v", results[2])
	}
}

func channelFull(ms string) *fibp.Error {
	return &fibp.Error{ErrorCode: fibp.CodeChannelFull, Message: "busy", Metadata: map[string]string{"retry_after_ms": ms}}
}

func TestEnqueueChannelFullRetries(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	start := time.Now()
	done := async(func() error { _, err := c.Enqueue(testCtx(t), Message{Queue: "q"}); return err })
	for range 2 {
		sc.Reply(sc.Expect(t, fibp.OpEnqueue), channelFull("30"))
	}
	f := sc.Expect(t, fibp.OpEnqueue)
	sc.Reply(f, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{{MessageID: MessageID{1}}}})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("two ChannelFull answers of 30ms retried after only %v", el)
	}
}

func TestEnqueueChannelFullGivesUp(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, &Options{ChannelFullRetries: 2, ChannelFullBackoff: time.Millisecond})
	done := async(func() error { _, err := c.Enqueue(testCtx(t), Message{Queue: "q"}); return err })
	for range 3 {
		sc.Reply(sc.Expect(t, fibp.OpEnqueue), channelFull("1"))
	}
	err := wait(t, done)
	if d, ok := RetryAfter(err); !errors.Is(err, ErrChannelFull) || !ok || d != time.Millisecond {
		t.Fatalf("err = %v (retry after %v %v), want ChannelFull after 2 retries", err, d, ok)
	}
	sc.ExpectQuiet(t, 50*time.Millisecond)
}

// indexPeer answers every Enqueue with IDs whose first 8 bytes repeat each payload's first 8
// bytes, failing messages for queue "bad", and counts frames and their sizes.
type indexPeer struct {
	frames atomic.Int32
	mu     sync.Mutex
	sizes  []int
	order  []uint64
}

func (ip *indexPeer) handle(c *fibptest.Conn, f fibptest.Frame) {
	req, ok := f.Frame.(*fibp.Enqueue)
	if !ok {
		return
	}
	ip.frames.Add(1)
	res := &fibp.EnqueueResult{}
	ip.mu.Lock()
	ip.sizes = append(ip.sizes, len(req.Messages))
	for _, m := range req.Messages {
		var item fibp.EnqueueResultItem
		if m.Queue == "bad" {
			item.ErrorCode = fibp.CodeQueueNotFound
		} else {
			copy(item.MessageID[:], m.Payload)
			ip.order = append(ip.order, binary.BigEndian.Uint64(m.Payload))
		}
		res.Results = append(res.Results, item)
	}
	ip.mu.Unlock()
	c.Reply(f, res)
}

func indexPayload(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

func TestProducerBatchesConcurrentSends(t *testing.T) {
	ip := &indexPeer{}
	p := fibptest.Start(t, fibptest.Options{Handler: ip.handle})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod := c.NewProducer(ProducerOptions{Linger: 20 * time.Millisecond})
	defer prod.Close()
	const n = 300
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			queue := "orders"
			if i%50 == 7 {
				queue = "bad"
			}
			id, err := prod.Send(testCtx(t), Message{Queue: queue, Payload: indexPayload(i)})
			switch {
			case queue == "bad" && !errors.Is(err, ErrQueueNotFound):
				errs <- fmt.Errorf("message %d to bad queue: err = %v", i, err)
			case queue != "bad" && err != nil:
				errs <- fmt.Errorf("message %d: %v", i, err)
			case queue != "bad" && binary.BigEndian.Uint64(id[:8]) != uint64(i):
				errs <- fmt.Errorf("message %d got the ID of message %d", i, binary.BigEndian.Uint64(id[:8]))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if f := ip.frames.Load(); f > 20 {
		t.Errorf("%d concurrent Sends took %d Enqueue frames; want few", n, f)
	}
	for _, s := range ip.sizes {
		if s > 256 {
			t.Errorf("batch of %d messages exceeds MaxBatch", s)
		}
	}
}

func TestProducerMaxBatchKeepsOrder(t *testing.T) {
	ip := &indexPeer{}
	p := fibptest.Start(t, fibptest.Options{Handler: ip.handle})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod := c.NewProducer(ProducerOptions{MaxBatch: 10, Linger: time.Hour})
	var pend []*Pending
	for i := range 95 {
		pend = append(pend, prod.SendAsync(Message{Queue: "q", Payload: indexPayload(i)}))
	}
	if err := prod.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i, pd := range pend {
		select {
		case <-pd.Done():
		default:
			t.Fatalf("message %d unresolved after Flush", i)
		}
		if id := pd.Result().ID; binary.BigEndian.Uint64(id[:8]) != uint64(i) {
			t.Errorf("message %d: wrong ID %v", i, id)
		}
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if fmt.Sprint(ip.sizes) != "[10 10 10 10 10 10 10 10 10 5]" {
		t.Errorf("batch sizes = %v", ip.sizes)
	}
	for i, v := range ip.order {
		if v != uint64(i) {
			t.Fatalf("server saw message %d at position %d", v, i)
		}
	}
	prod.Close()
	if _, err := prod.SendAsync(Message{Queue: "q"}).Wait(testCtx(t)); !errors.Is(err, ErrProducerClosed) {
		t.Errorf("send after Close: %v", err)
	}
}

func TestProducerMaxBatchBytes(t *testing.T) {
	ip := &indexPeer{}
	p := fibptest.Start(t, fibptest.Options{Handler: ip.handle})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod := c.NewProducer(ProducerOptions{MaxBatchBytes: 1000, Linger: time.Hour})
	body := make([]byte, 300)
	for i := range 10 {
		copy(body, indexPayload(i))
		prod.SendAsync(Message{Queue: "q", Payload: append([]byte(nil), body...)})
	}
	if err := prod.Close(); err != nil {
		t.Fatal(err)
	}
	ip.mu.Lock()
	defer ip.mu.Unlock()
	for _, s := range ip.sizes {
		if s > 3 {
			t.Errorf("batch of %d 300-byte messages exceeds 1000 bytes", s)
		}
	}
	if len(ip.order) != 10 {
		t.Errorf("server saw %d messages", len(ip.order))
	}
}

func TestProducerRejectsOversizedField(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, _ := dialPeer(t, p, nil)
	prod := c.NewProducer(ProducerOptions{})
	defer prod.Close()
	_, err := prod.Send(testCtx(t), Message{Queue: strings.Repeat("q", 70000)})
	if !errors.Is(err, wire.ErrLimit) {
		t.Errorf("err = %v, want wire.ErrLimit", err)
	}
}

// A negative Delay is refused before anything is sent, by Enqueue (the whole call) and by a
// Producer (that message): it went out as no delay, deliverable at once.
func TestNegativeDelayIsRefused(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	msgs := []Message{{Queue: "q"}, {Queue: "q", Delay: -5 * time.Second}}
	if _, err := c.Enqueue(testCtx(t), msgs...); !errors.Is(err, ErrNegativeDelay) || !strings.Contains(err.Error(), "message 1") {
		t.Errorf("Enqueue: err = %v, want ErrNegativeDelay naming message 1", err)
	}
	prod := c.NewProducer(ProducerOptions{Linger: -1})
	defer prod.Close()
	if _, err := prod.Send(testCtx(t), msgs[1]); !errors.Is(err, ErrNegativeDelay) {
		t.Errorf("Send: err = %v, want ErrNegativeDelay", err)
	}
	done := async(func() error { _, err := prod.Send(testCtx(t), msgs[0]); return err })
	f := sc.Expect(t, fibp.OpEnqueue)
	if n := len(f.Frame.(*fibp.Enqueue).Messages); n != 1 {
		t.Errorf("the first frame sent holds %d messages, want only the valid one", n)
	}
	sc.Reply(f, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{{}}})
	if err := wait(t, done); err != nil {
		t.Errorf("a valid message after the refused one: %v", err)
	}
}

func TestProducerWholeFrameError(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	prod := c.NewProducer(ProducerOptions{Linger: -1})
	defer prod.Close()
	done := async(func() error { _, err := prod.Send(testCtx(t), Message{Queue: "q"}); return err })
	sc.Reply(sc.Expect(t, fibp.OpEnqueue), &fibp.Error{ErrorCode: fibp.CodeForbidden, Message: `enqueue to "q" denied`})
	if err := wait(t, done); !errors.Is(err, ErrForbidden) {
		t.Errorf("err = %v, want Forbidden", err)
	}
}
