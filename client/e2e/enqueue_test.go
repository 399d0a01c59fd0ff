package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

func TestEnqueueMultiQueuePartialSuccess(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q1 := createQueue(t, c, fila.QueueConfig{})
	q2 := createQueue(t, c, fila.QueueConfig{})
	missing := queueName(t)
	res, err := c.Enqueue(testCtx(t),
		fila.Message{Queue: q1, Payload: []byte("one"), Headers: map[string]string{"n": "1"}},
		fila.Message{Queue: missing, Payload: []byte("lost")},
		fila.Message{Queue: q2, Payload: []byte("two")},
		fila.Message{Queue: q1, Payload: []byte("three"), Headers: map[string]string{"n": "3"}, IdempotencyKey: "order-3"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 4 {
		t.Fatalf("%d results for 4 messages", len(res))
	}
	for _, i := range []int{0, 2, 3} {
		if res[i].Err != nil || res[i].ID.IsZero() || res[i].Duplicate {
			t.Errorf("result %d = %+v, want an ID", i, res[i])
		}
	}
	wantCode(t, "the message for a missing queue", res[1].Err, fila.ErrQueueNotFound)
	if !res[1].ID.IsZero() {
		t.Errorf("failed item has ID %v, want all-zero", res[1].ID)
	}

	if d1, d2 := getStats(t, c, q1).Depth, getStats(t, c, q2).Depth; d1 != 2 || d2 != 1 {
		t.Errorf("depths %d and %d, want 2 and 1", d1, d2)
	}
	cons := consume(t, c, q1, fila.ConsumeOptions{MaxUnacked: 2})
	for _, want := range []struct {
		i          int
		payload, n string
	}{{0, "one", "1"}, {3, "three", "3"}} {
		d := next(t, cons)
		if d.ID != res[want.i].ID || string(d.Payload) != want.payload || d.Headers["n"] != want.n || d.Queue != q1 {
			t.Errorf("delivery %v %q %v from %s, want %v %q", d.ID, d.Payload, d.Headers, d.Queue, res[want.i].ID, want.payload)
		}
		ack(t, d)
	}
	cons2 := consume(t, c, q2, fila.ConsumeOptions{MaxUnacked: 1})
	if d := next(t, cons2); d.ID != res[2].ID || string(d.Payload) != "two" {
		t.Errorf("delivery from %s = %v %q, want %v \"two\"", q2, d.ID, d.Payload, res[2].ID)
	}
}

// uuidv7Millis checks the layout of a UUIDv7 and returns its timestamp.
func uuidv7Millis(t *testing.T, id fila.MessageID) int64 {
	t.Helper()
	if id[6]>>4 != 7 {
		t.Errorf("ID %v has version %d, want 7", id, id[6]>>4)
	}
	if id[8]>>6 != 0b10 {
		t.Errorf("ID %v has variant bits %02b, want 10 (RFC 9562)", id, id[8]>>6)
	}
	var ms [8]byte
	copy(ms[2:], id[:6])
	return int64(binary.BigEndian.Uint64(ms[:]))
}

func TestEnqueueIDsAreIncreasingUUIDv7(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	var ids []fila.MessageID
	for batch := range 5 {
		ids = append(ids, enqueue(t, c, payloads(q, fmt.Sprint("b", batch), 40)...)...)
	}
	for i, id := range ids {
		uuidv7Millis(t, id)
		if i > 0 && bytes.Compare(ids[i-1][:], id[:]) >= 0 {
			t.Fatalf("ID %d (%v) is not above ID %d (%v)", i, id, i-1, ids[i-1])
		}
	}
	// The timestamp is the acceptance time the deliveries report as enqueued_at.
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	if d.ID != ids[0] {
		t.Fatalf("first delivery %v, want the first ID %v", d.ID, ids[0])
	}
	if ms := uuidv7Millis(t, d.ID); ms != d.EnqueuedAt.UnixMilli() {
		t.Errorf("ID timestamp %d ms, enqueued_at %d ms", ms, d.EnqueuedAt.UnixMilli())
	}
}

// TestWeightedFairness: with backlog in both keys, weights 1 and 2 share deliveries 1:2 in every
// window of whole DRR rounds (quantum 1), over the wire.
func TestWeightedFairness(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	var msgs []fila.Message
	for i := range 30 {
		msgs = append(msgs, fila.Message{Queue: q, Payload: fmt.Appendf(nil, "heavy-%d", i), FairnessKey: "heavy", Weight: 2})
		if i < 20 {
			msgs = append(msgs, fila.Message{Queue: q, Payload: fmt.Appendf(nil, "light-%d", i), FairnessKey: "light", Weight: 1})
		}
	}
	enqueue(t, c, msgs...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 30})
	count := map[string]int{}
	for i := 1; i <= 30; i++ {
		d := next(t, cons)
		count[d.FairnessKey]++
		if i%3 == 0 && (count["light"] != i/3 || count["heavy"] != 2*i/3) {
			t.Errorf("after %d deliveries: %v, want light %d heavy %d", i, count, i/3, 2*i/3)
		}
	}
	if count["light"] != 10 || count["heavy"] != 20 {
		t.Errorf("30 deliveries split %v, want light 10 heavy 20", count)
	}
	st := getStats(t, c, q)
	if st.InFlight != 30 || st.Depth != 20 {
		t.Errorf("stats %+v, want 30 in flight (the credit) and 20 waiting", st)
	}
	for _, k := range st.PerKeyStats {
		if want := map[string]uint64{"heavy": 10, "light": 10}[k.Key]; k.PendingCount != want {
			t.Errorf("key %q pending %d, want %d", k.Key, k.PendingCount, want)
		}
	}
}

func TestEnqueueDelay(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	const delay = 500 * time.Millisecond
	ids := enqueue(t, c,
		fila.Message{Queue: q, Payload: []byte("later"), Delay: delay},
		fila.Message{Queue: q, Payload: []byte("now")},
	)
	st := getStats(t, c, q)
	if st.Depth != 2 || st.Delayed > 1 {
		t.Errorf("stats right after enqueueing %+v, want depth 2 and (unless it already passed) delayed 1", st)
	}
	// One credit: the waiting message takes none, and does not hold back the one behind it.
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	first := next(t, cons)
	if first.ID != ids[1] {
		t.Errorf("first delivery %v (%q), want the undelayed %v", first.ID, first.Payload, ids[1])
	}
	ack(t, first)
	d := next(t, cons)
	if d.ID != ids[0] {
		t.Fatalf("second delivery %v, want the delayed %v", d.ID, ids[0])
	}
	if notBefore := d.EnqueuedAt.Add(delay); d.LeasedAt.Before(notBefore) {
		t.Errorf("delayed message leased at %v, before its not-before time %v", d.LeasedAt, notBefore)
	}
	if st := getStats(t, c, q); st.Delayed != 0 || st.InFlight != 1 || st.Depth != 0 {
		t.Errorf("stats after both deliveries %+v", st)
	}
}

func TestEnqueueDelayedCounts(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c,
		fila.Message{Queue: q, Payload: []byte("a"), Delay: time.Hour},
		fila.Message{Queue: q, Payload: []byte("b"), Delay: time.Hour},
		fila.Message{Queue: q, Payload: []byte("c")},
	)
	st := getStats(t, c, q)
	if st.Depth != 3 || st.Delayed != 2 || st.ActiveFairnessKeys != 1 {
		t.Errorf("stats %+v, want depth 3, delayed 2, one active key", st)
	}
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 3})
	ack(t, next(t, cons))
	// With credit to spare, the delayed messages are still held.
	if st := getStats(t, c, q); st.Depth != 2 || st.Delayed != 2 || st.InFlight != 0 {
		t.Errorf("stats after acking the ready message %+v, want depth 2, delayed 2", st)
	}
	cons.Close()

	// Once its time comes, a delayed message stops counting as delayed, consumer or not.
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("soon"), Delay: 200 * time.Millisecond})
	waitStats(t, c, q, "the short delay passed", func(s *fila.QueueStats) bool { return s.Delayed == 2 && s.Depth == 3 })
}

func TestProducerBatching(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q1 := createQueue(t, c, fila.QueueConfig{})
	q2 := createQueue(t, c, fila.QueueConfig{})
	p := c.NewProducer(fila.ProducerOptions{MaxBatch: 64})
	const n = 600
	var mu sync.Mutex
	sent := map[fila.MessageID]string{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := q1
			if i%3 == 0 {
				q = q2
			}
			payload := fmt.Sprintf("p-%d", i)
			id, err := p.Send(ctx, fila.Message{Queue: q, Payload: []byte(payload), FairnessKey: fmt.Sprint("k", i%4)})
			if err != nil {
				t.Errorf("Send %d: %v", i, err)
				return
			}
			mu.Lock()
			sent[id] = payload
			mu.Unlock()
		})
	}
	// Send to a missing queue fails that message only.
	pending := p.SendAsync(fila.Message{Queue: queueName(t), Payload: []byte("nowhere")})
	wg.Wait()
	if _, err := pending.Wait(ctx); err == nil {
		t.Error("SendAsync to a missing queue succeeded")
	} else {
		wantCode(t, "SendAsync to a missing queue", err, fila.ErrQueueNotFound)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Send(ctx, fila.Message{Queue: q1}); err != fila.ErrProducerClosed {
		t.Errorf("Send after Close = %v", err)
	}
	if len(sent) != n {
		t.Fatalf("%d distinct IDs for %d messages", len(sent), n)
	}
	if d1, d2 := getStats(t, c, q1).Depth, getStats(t, c, q2).Depth; d1 != n-n/3 || d2 != n/3 {
		t.Errorf("depths %d and %d, want %d and %d", d1, d2, n-n/3, n/3)
	}
	for _, q := range []string{q1, q2} {
		want := getStats(t, c, q).Depth
		cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 128})
		for range want {
			d := next(t, cons)
			if sent[d.ID] != string(d.Payload) {
				t.Fatalf("delivery %v has payload %q, sent as %q", d.ID, d.Payload, sent[d.ID])
			}
			delete(sent, d.ID)
			ack(t, d)
		}
	}
	if len(sent) != 0 {
		t.Errorf("%d sent messages never delivered", len(sent))
	}
}
