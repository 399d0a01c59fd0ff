package e2e

import (
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// unknownID is a well-formed UUIDv7 that the broker never issued.
var unknownID = fila.MessageID(wire.UUID{0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x70, 0x00, 0x80, 0, 0, 0, 0, 0, 0, 0x01})

func TestAckErrors(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	ids := enqueue(t, c, payloads(q, "m", 2)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 2})
	d1, d2 := next(t, cons), next(t, cons)

	// One frame, per-item results: a lease, an ID never issued, a queued-but-not-leased message
	// of another queue, a missing queue.
	other := createQueue(t, c, fila.QueueConfig{})
	idle := enqueue(t, c, fila.Message{Queue: other, Payload: []byte("idle")})[0]
	errs, err := c.Ack(ctx,
		fila.AckItem{Queue: q, ID: d1.ID},
		fila.AckItem{Queue: q, ID: unknownID},
		fila.AckItem{Queue: other, ID: idle},
		fila.AckItem{Queue: queueName(t), ID: d2.ID},
	)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil {
		t.Errorf("ack of a leased message: %v", errs[0])
	}
	wantCode(t, "ack of an unknown ID", errs[1], fila.ErrMessageNotFound)
	wantCode(t, "ack of a message that is not leased", errs[2], fila.ErrMessageNotFound)
	wantCode(t, "ack naming a missing queue", errs[3], fila.ErrQueueNotFound)

	// Acked twice: the second is MessageNotFound; the other lease is unaffected.
	wantCode(t, "second ack", d1.Ack(ctx), fila.ErrMessageNotFound)
	ack(t, d2)
	if st := getStats(t, c, q); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("stats after acking both %+v", st)
	}
	if ids[0] != d1.ID || ids[1] != d2.ID {
		t.Errorf("deliveries %v %v, enqueued %v", d1.ID, d2.ID, ids)
	}
	errs, err = c.Nack(ctx, fila.NackItem{Queue: q, ID: unknownID, Error: "x"})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "nack of an unknown ID", errs[0], fila.ErrMessageNotFound)
	res, err := c.ExtendLease(ctx, fila.ExtendLeaseItem{Queue: q, ID: unknownID, By: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "extend of an unknown ID", res[0].Err, fila.ErrMessageNotFound)
	if !res[0].ExpiresAt.IsZero() {
		t.Errorf("failed extension reports expiry %v, want 0", res[0].ExpiresAt)
	}
}

func TestNackRetries(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fastQueue(30*time.Second, 5))
	headers := map[string]string{"trace": "abc", "tenant": "acme"}
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("retry me"), Headers: headers, FairnessKey: "acme", Weight: 2})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	for attempt := uint32(1); attempt <= 3; attempt++ {
		d := next(t, cons)
		if d.ID != id || d.AttemptCount != attempt || string(d.Payload) != "retry me" || d.Headers["trace"] != "abc" ||
			d.Headers["tenant"] != "acme" || d.FairnessKey != "acme" || d.Weight != 2 {
			t.Fatalf("delivery %d = %+v", attempt, d)
		}
		if attempt == 3 {
			ack(t, d)
			break
		}
		if err := d.Nack(ctx, "transient", nil); err != nil {
			t.Fatal(err)
		}
	}
	if st := getStats(t, c, q); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("stats after the ack %+v", st)
	}
	if st := getStats(t, c, q+".dlq"); st.Depth != 0 {
		t.Errorf("DLQ depth %d, want 0", st.Depth)
	}
}

func TestNackRetryAfter(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 5))
	const retryAfter = time.Second
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("later")})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d1 := next(t, cons)
	nacked := time.Now()
	if err := d1.Nack(testCtx(t), "rate limited", fila.Ptr(retryAfter)); err != nil {
		t.Fatal(err)
	}
	// Until the retry time, the message is counted as delayed (and in depth, not in flight).
	st := getStats(t, c, q)
	if time.Since(nacked) < retryAfter && (st.Delayed != 1 || st.Depth != 1 || st.InFlight != 0) {
		t.Errorf("stats during retry_after: %+v, want delayed 1, depth 1, in flight 0", st)
	}
	d2 := next(t, cons)
	if d2.ID != id || d2.AttemptCount != 2 {
		t.Errorf("retry = %v attempt %d, want %v attempt 2", d2.ID, d2.AttemptCount, id)
	}
	if gap := d2.LeasedAt.Sub(d1.LeasedAt); gap < retryAfter {
		t.Errorf("redelivered %v after the first lease, sooner than retry_after %v", gap, retryAfter)
	}
	ack(t, d2)
}

func TestMaxAttemptsDeadLetters(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fastQueue(30*time.Second, 2))
	headers := map[string]string{"order": "42"}
	ids := enqueue(t, c,
		fila.Message{Queue: q, Payload: []byte("poison"), Headers: headers, FairnessKey: "t1", Weight: 3},
		fila.Message{Queue: q, Payload: []byte("fine")},
	)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	for {
		d := next(t, cons)
		if d.ID == ids[1] {
			ack(t, d)
			continue
		}
		if err := d.Nack(ctx, "boom", nil); err != nil {
			t.Fatal(err)
		}
		if d.AttemptCount == 2 {
			break
		}
	}
	waitStats(t, c, q+".dlq", "the poison message", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	waitStats(t, c, q, "empty", func(s *fila.QueueStats) bool { return s.Depth == 0 && s.InFlight == 0 })

	// A DLQ is consumed like any queue: the message kept its ID, payload, headers, scheduling and
	// attempt count (2, so this delivery is the third); the broker adds the five headers that say
	// why it is there.
	dlq := consume(t, c, q+".dlq", fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, dlq)
	if d.ID != ids[0] || string(d.Payload) != "poison" || d.Headers["order"] != "42" || len(d.Headers) != 6 ||
		d.Headers[fila.HeaderDeadLetterReason] != "max_attempts" || d.Headers[fila.HeaderDeadLetterAttempts] != "2" ||
		d.FairnessKey != "t1" || d.Weight != 3 || d.Queue != q+".dlq" || d.AttemptCount != 3 {
		t.Errorf("dead-lettered message %+v", d)
	}
	ack(t, d)
}

func TestExtendLease(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	const visibility = time.Second
	q := createQueue(t, c, fastQueue(visibility, 5))
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("slow work")})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	d := next(t, cons)
	expires, err := d.Extend(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Extension is from receipt: at least leased_at + 10s, and beyond the delivered expiry.
	if expires.Before(d.LeasedAt.Add(10*time.Second)) || !expires.After(d.LeaseExpiresAt) {
		t.Errorf("new expiry %v; leased at %v, delivered expiry %v", expires, d.LeasedAt, d.LeaseExpiresAt)
	}
	// Extensions are capped at 12 hours from now.
	capped, err := d.Extend(ctx, 24*time.Hour)
	if err != nil || capped.Before(d.LeasedAt.Add(12*time.Hour)) || capped.After(time.Now().Add(12*time.Hour+time.Second)) {
		t.Errorf("Extend by 24h = %v, %v; want about 12h from now", capped, err)
	}
	if expires, err = d.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Past the original visibility timeout the lease still holds.
	time.Sleep(time.Until(d.LeaseExpiresAt.Add(visibility / 2)))
	if st := getStats(t, c, q); st.InFlight != 1 || st.Depth != 0 {
		t.Errorf("stats after the original expiry %+v, want the extended lease in flight", st)
	}
	// A shorter extension is allowed too: it is from now, not from the current expiry.
	shorter, err := d.Extend(ctx, visibility)
	if err != nil || !shorter.Before(expires) {
		t.Errorf("Extend by %v = %v, %v; want an expiry before %v", visibility, shorter, err, expires)
	}
	// Now the lease runs out: the message comes back with attempt 2, and the old lease is gone.
	d2 := next(t, cons)
	if d2.ID != id || d2.AttemptCount != 2 {
		t.Errorf("after expiry: %v attempt %d, want %v attempt 2", d2.ID, d2.AttemptCount, id)
	}
	res, err := c.ExtendLease(ctx, fila.ExtendLeaseItem{Queue: q, ID: id, By: time.Second},
		fila.ExtendLeaseItem{Queue: q, ID: unknownID, By: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].ExpiresAt.IsZero() {
		t.Errorf("extending the new lease: %+v", res[0])
	}
	wantCode(t, "extend of an unknown ID in a batch", res[1].Err, fila.ErrMessageNotFound)
	ack(t, d2)
	_, err = d2.Extend(ctx, time.Second)
	wantCode(t, "extend after the ack", err, fila.ErrMessageNotFound)
}

func TestLeaseKeepAlive(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	const visibility = time.Second
	q := createQueue(t, c, fastQueue(visibility, 5))
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("long job")})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 2}) // keep-alive is on by default
	d := next(t, cons)
	time.Sleep(3 * visibility) // several lease lengths: only the keep-alive holds it
	select {
	case <-d.LeaseLost():
		t.Fatal("the SDK lost the lease despite keep-alive")
	default:
	}
	if st := getStats(t, c, q); st.InFlight != 1 || st.Depth != 0 {
		t.Errorf("stats while kept alive %+v, want 1 in flight", st)
	}
	ack(t, d) // would be MessageNotFound had the lease expired
	if d.ID != id || d.AttemptCount != 1 {
		t.Errorf("delivery %v attempt %d", d.ID, d.AttemptCount)
	}
	if st := getStats(t, c, q); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("stats after the ack %+v", st)
	}
}

// TestLeaseExpiry: a lease that runs out makes the message deliverable again with attempt 2, and
// every settlement of the old lease answers MessageNotFound.
func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fastQueue(200*time.Millisecond, 5))
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("abandoned")})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	d := next(t, cons)
	cons.Close() // leases outlive the subscription
	waitStats(t, c, q, "the lease expired", func(s *fila.QueueStats) bool { return s.InFlight == 0 && s.Depth == 1 })

	wantCode(t, "ack of an expired lease", d.Ack(ctx), fila.ErrMessageNotFound)
	wantCode(t, "nack of an expired lease", d.Nack(ctx, "late", nil), fila.ErrMessageNotFound)
	_, err := d.Extend(ctx, time.Second)
	wantCode(t, "extend of an expired lease", err, fila.ErrMessageNotFound)

	again := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d2 := next(t, again)
	if d2.ID != id || d2.AttemptCount != 2 || string(d2.Payload) != "abandoned" {
		t.Errorf("redelivery %v attempt %d %q, want %v attempt 2", d2.ID, d2.AttemptCount, d2.Payload, id)
	}
	ack(t, d2)
}

// TestLeaseExpiryDeadLetters: expiry counts as a failed attempt, so a message whose consumer
// always dies ends in the DLQ.
func TestLeaseExpiryDeadLetters(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(200*time.Millisecond, 2))
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("kills its consumer")})[0]
	for attempt := uint32(1); attempt <= 2; attempt++ {
		cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
		if d := next(t, cons); d.ID != id || d.AttemptCount != attempt {
			t.Fatalf("delivery %v attempt %d, want %v attempt %d", d.ID, d.AttemptCount, id, attempt)
		}
		cons.Close()
	}
	waitStats(t, c, q+".dlq", "the message dead-lettered", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	dlq := consume(t, c, q+".dlq", fila.ConsumeOptions{MaxUnacked: 1})
	if d := next(t, dlq); d.ID != id {
		t.Errorf("DLQ holds %v, want %v", d.ID, id)
	}
}

// TestBackoff: without retry_after, the queue's backoff spaces the retries (exponential:
// initial × 2^(attempt−1), capped); a Nack's retry_after overrides it either way.
func TestBackoff(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxAttempts: 10,
		Backoff: fibp.BackoffExponential, BackoffInitial: 100 * time.Millisecond, BackoffMax: 250 * time.Millisecond})
	id := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("flaky")})[0]
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	prev := next(t, cons)
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond, 250 * time.Millisecond} {
		if err := prev.Nack(ctx, "flaky", nil); err != nil {
			t.Fatal(err)
		}
		d := next(t, cons)
		if d.ID != id || d.AttemptCount != prev.AttemptCount+1 {
			t.Fatalf("retry %v attempt %d after attempt %d", d.ID, d.AttemptCount, prev.AttemptCount)
		}
		if gap := d.LeasedAt.Sub(prev.LeasedAt); gap < want {
			t.Errorf("attempt %d came %v after attempt %d, want at least the backoff %v", d.AttemptCount, gap, prev.AttemptCount, want)
		}
		prev = d
	}
	ack(t, prev)

	// A fixed hour-long backoff: a plain Nack parks the message as delayed, retry_after 0 does not.
	slow := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second, MaxAttempts: 10,
		Backoff: fibp.BackoffFixed, BackoffInitial: time.Hour})
	ids := enqueue(t, c, fila.Message{Queue: slow, Payload: []byte("a")}, fila.Message{Queue: slow, Payload: []byte("b")})
	sc := consume(t, c, slow, fila.ConsumeOptions{MaxUnacked: 2})
	a, b := next(t, sc), next(t, sc)
	if err := a.Nack(ctx, "backoff applies", nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Nack(ctx, "retry now", fila.Ptr(time.Duration(0))); err != nil {
		t.Fatal(err)
	}
	if d := next(t, sc); d.ID != b.ID || d.AttemptCount != 2 {
		t.Errorf("immediate retry = %v attempt %d, want %v attempt 2", d.ID, d.AttemptCount, b.ID)
	}
	if st := getStats(t, c, slow); st.Delayed != 1 || st.Depth != 1 || st.InFlight != 1 {
		t.Errorf("stats %+v, want %v delayed by the backoff and %v in flight", st, ids[0], ids[1])
	}
}
