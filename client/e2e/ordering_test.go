package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// byAccount is a queue ordered by the "account" header.
func byAccount(missing fibp.WhenOrderingKeyMissing) fila.QueueConfig {
	return fila.QueueConfig{Ordering: fibp.OrderingGrouped, OrderingKey: fila.Key{fila.HeaderPart("account")},
		WhenOrderingKeyMissing: missing, VisibilityTimeout: 2 * time.Second, Backoff: fibp.BackoffNone}
}

func accountMsg(q, account, payload string) fila.Message {
	m := fila.Message{Queue: q, Payload: []byte(payload)}
	if account != "" {
		m.Headers = map[string]string{"account": account}
	}
	return m
}

// TestOrderingGroups: one message in flight per group, a delayed head holds its group, groups
// never block each other, a message without the key is rejected, and a restart keeps the
// groups' order (the unacked head is redelivered before the message behind it).
func TestOrderingGroups(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	ctx := testCtx(t)
	q := createQueue(t, c, byAccount(fibp.WhenOrderingKeyMissingReject))
	dq := createQueue(t, c, fila.QueueConfig{DedupKey: fila.Key{fila.HeaderPart("order")}})
	orig := enqueue(t, c, fila.Message{Queue: dq, Payload: []byte("o"), Headers: map[string]string{"order": "7"}})[0]

	delayed := accountMsg(q, "b", "b1")
	delayed.Delay = time.Hour
	res, err := c.Enqueue(ctx, accountMsg(q, "a", "a1"), accountMsg(q, "a", "a2"), delayed, accountMsg(q, "b", "b2"),
		accountMsg(q, "c", "c1"), accountMsg(q, "", "no-account"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:5] {
		if r.Err != nil {
			t.Fatalf("item %d: %v", i, r.Err)
		}
	}
	wantCode(t, "a message without the ordering key", res[5].Err, fila.ErrOrderingKeyMissing)

	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10, DisableLeaseKeepAlive: true})
	first := []string{string(next(t, cons).Payload), string(next(t, cons).Payload)}
	slices.Sort(first)
	if !slices.Equal(first, []string{"a1", "c1"}) {
		t.Fatalf("first deliveries %v, want the heads a1 and c1", first)
	}
	st := getStats(t, c, q)
	if st.InFlight != 2 || st.Depth != 3 || st.Delayed != 1 || st.OrderingGroups != 3 || st.OrderingGroupsBlocked != 2 {
		t.Fatalf("stats %+v, want 2 in flight, 3 waiting of which 1 delayed, 3 groups of which 2 blocked", st)
	}
	if errs, err := c.Ack(ctx, fila.AckItem{Queue: q, ID: res[0].ID}, fila.AckItem{Queue: q, ID: res[4].ID}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("acking a1 and c1: %v %v", errs, err)
	}
	if d := next(t, cons); string(d.Payload) != "a2" {
		t.Fatalf("after acking a1 got %q, want a2", d.Payload)
	}
	cons.Close()
	enqueue(t, c, accountMsg(q, "a", "a3"))

	s.restart(t)
	c = dial(t, s.addr)
	if res, err := c.Enqueue(ctx, fila.Message{Queue: dq, Payload: []byte("again"), Headers: map[string]string{"order": "7"}}); err != nil ||
		res[0].Err != nil || !res[0].Duplicate || res[0].ID != orig {
		t.Errorf("dedup after the restart: %+v, %v; want a duplicate of %v", res, err, orig)
	}
	cons = consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10, DisableLeaseKeepAlive: true})
	d := next(t, cons) // a2's lease runs out; a3 must not come first
	if string(d.Payload) != "a2" || d.AttemptCount != 2 {
		t.Fatalf("after the restart got %q attempt %d, want a2 attempt 2", d.Payload, d.AttemptCount)
	}
	ack(t, d)
	if d := next(t, cons); string(d.Payload) != "a3" {
		t.Fatalf("after acking a2 got %q, want a3", d.Payload)
	}
}

// TestOrderingUnorderedFallback: on a queue that enqueues messages without the key unordered,
// those messages are in no group and are delivered side by side.
func TestOrderingUnorderedFallback(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, byAccount(fibp.WhenOrderingKeyMissingUnordered))
	enqueue(t, c, accountMsg(q, "", "x"), accountMsg(q, "", "y"), accountMsg(q, "a", "a1"), accountMsg(q, "a", "a2"))
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10})
	var got []string
	for range 3 {
		got = append(got, string(next(t, cons).Payload))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"a1", "x", "y"}) {
		t.Fatalf("deliveries %v, want x, y and a1 (a2 waits for a1)", got)
	}
}

// TestOrderingWholeQueue: ordering = queue makes the queue one group.
func TestOrderingWholeQueue(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{Ordering: fibp.OrderingQueue})
	enqueue(t, c, payloads(q, "m", 3)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10})
	for i := range 3 {
		d := next(t, cons)
		if want := fmt.Sprint("m-", i); string(d.Payload) != want {
			t.Fatalf("delivery %d is %q, want %q", i, d.Payload, want)
		}
		if st := getStats(t, c, q); st.InFlight != 1 {
			t.Fatalf("%d in flight on a queue that is one group", st.InFlight)
		}
		ack(t, d)
	}
}

// TestDedupKeys deduplicates by a queue-defined key of every kind, within one Enqueue frame too,
// and after the original was acked.
func TestDedupKeys(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	h := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		what string
		key  fila.Key
		msgs []fila.Message // all with the same identity, except where dup is false
		dup  []bool         // per message after the first: a duplicate of the first?
	}{
		{"header", fila.Key{fila.HeaderPart("order")}, []fila.Message{
			{Payload: []byte("a"), Headers: h("order", "1")}, {Payload: []byte("b"), Headers: h("order", "1")},
			{Payload: []byte("c"), Headers: h("order", "2")}, {Payload: []byte("d")}}, []bool{true, false, false}},
		{"fairness key", fila.Key{fila.FairnessKeyPart()}, []fila.Message{
			{Payload: []byte("a"), FairnessKey: "t1"}, {Payload: []byte("b"), FairnessKey: "t1"}, {Payload: []byte("c"), FairnessKey: "t2"}},
			[]bool{true, false}},
		{"idempotency key", fila.Key{fila.IdempotencyKeyPart()}, []fila.Message{
			{Payload: []byte("a"), IdempotencyKey: "k"}, {Payload: []byte("b"), IdempotencyKey: "k"}, {Payload: []byte("c")}},
			[]bool{true, false}},
		{"payload hash", fila.Key{fila.PayloadHashPart()}, []fila.Message{
			{Payload: []byte("same")}, {Payload: []byte("same"), Headers: h("x", "1")}, {Payload: []byte("other")}},
			[]bool{true, false}},
		{"headers hash", fila.Key{fila.HeadersHashPart()}, []fila.Message{
			{Payload: []byte("a"), Headers: h("x", "1", "y", "2")}, {Payload: []byte("b"), Headers: h("y", "2", "x", "1")},
			{Payload: []byte("c"), Headers: h("x", "12")}}, []bool{true, false}},
		{"attribute (no on_enqueue hook: missing)", fila.Key{fila.AttributePart("job")}, []fila.Message{
			{Payload: []byte("a")}, {Payload: []byte("a")}}, []bool{false}},
	} {
		q := createQueue(t, c, fila.QueueConfig{DedupKey: tc.key})
		for i := range tc.msgs {
			tc.msgs[i].Queue = q
		}
		res, err := c.Enqueue(ctx, tc.msgs...) // one frame: duplicates inside it count
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res[1:] {
			if r.Err != nil || r.Duplicate != tc.dup[i] || (r.Duplicate && r.ID != res[0].ID) || (!r.Duplicate && r.ID == res[0].ID) {
				t.Errorf("%s: item %d is %+v, want duplicate=%v of %v", tc.what, i+1, r, tc.dup[i], res[0].ID)
			}
		}
		if tc.what != "payload hash" {
			continue
		}
		// The original acked: still remembered.
		cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10})
		for range 2 {
			ack(t, next(t, cons))
		}
		again, err := c.Enqueue(ctx, fila.Message{Queue: q, Payload: []byte("same")})
		if err != nil || again[0].Err != nil || !again[0].Duplicate || again[0].ID != res[0].ID {
			t.Errorf("after the original was acked: %+v, %v; want a duplicate of %v", again, err, res[0].ID)
		}
	}
}

// TestOrderingStatsCLI: fila queue stats shows an ordered queue's groups and the blocked ones.
func TestOrderingStatsCLI(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{Ordering: fibp.OrderingQueue})
	enqueue(t, c, payloads(q, "m", 2)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 10})
	next(t, cons)
	out := cliOK(t, "", "queue", "stats", q)
	kv := statsTable(t, out)
	if kv["ordering groups"] != "1" || kv["groups blocked by an in-flight head"] != "1" {
		t.Errorf("queue stats of an ordered queue:\n%s", out)
	}
}
