package transport

import (
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// Queue limits over the wire: max_depth with its two policies, retention_ms and max_delay_ms,
// set as runtime config (defaults.* and queue.<name>.*).

func msg(queue, payload string) fibp.EnqueueMessage {
	return fibp.EnqueueMessage{Queue: queue, Payload: []byte(payload)}
}

// held is the messages a queue holds, in flight or not.
func held(t *testing.T, c *rawClient, queue string) uint64 {
	t.Helper()
	r, ok := c.Call(201, &fibp.GetStats{Queue: queue}).(*fibp.GetStatsResult)
	if !ok || r.ErrorCode != fibp.CodeOk {
		t.Fatalf("GetStats %s: %#v", queue, r)
	}
	return r.Depth + r.InFlight
}

// payloads consumes n messages of queue (leaving them leased) and returns their payloads, each
// followed by its fila-dead-letter-reason header when it has one ("b:max_depth").
func payloads(t *testing.T, c *rawClient, reqID uint32, queue string, n int) []string {
	t.Helper()
	c.Subscribe(reqID, queue, uint32(n))
	var out []string
	for _, d := range c.Deliveries(n) {
		p := string(d.Payload)
		if why := d.Headers["fila-dead-letter-reason"]; why != "" {
			p += ":" + why
		}
		out = append(out, p)
	}
	return out
}

// A queue at its max_depth (reject) refuses new messages: a whole Enqueue with an Error frame,
// ChannelFull, retry_after_ms and the key that set the limit; in a batch with another queue, its
// item alone. In-flight messages count; an Ack makes room; the limit survives a restart.
func TestMaxDepthRejects(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startAtWith(t, dir, func(o *broker.Options) { o.Sync = false })
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})
	setConfig(t, c, "queue.orders.max_depth", "3")
	enqueue(t, c, msg("orders", "1"), msg("orders", "2"), msg("orders", "3"))

	refused := func(reqID uint32) {
		t.Helper()
		e, ok := c.Call(reqID, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{msg("orders", "4")}}).(*fibp.Error)
		if !ok || e.ErrorCode != fibp.CodeChannelFull {
			t.Fatalf("an Enqueue to a full queue answered %#v", e)
		}
		if e.Metadata[fibp.MetaRetryAfterMs] == "" || !strings.Contains(e.Message, "queue.orders.max_depth") || !strings.Contains(e.Message, "full") {
			t.Fatalf("the refusal says %q with %v, want why, the key and retry_after_ms", e.Message, e.Metadata)
		}
	}
	refused(1)
	r := c.Call(2, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{msg("orders", "4"), msg("other", "x")}}).(*fibp.EnqueueResult)
	if r.Results[0].ErrorCode != fibp.CodeChannelFull || r.Results[1].ErrorCode != fibp.CodeOk {
		t.Fatalf("a batch across a full and a free queue answered %v, %v", r.Results[0].ErrorCode, r.Results[1].ErrorCode)
	}

	c.Subscribe(3, "orders", 1)
	d := c.Deliveries(1)[0]
	refused(4) // in flight still counts
	if r := c.Call(5, &fibp.Ack{Items: []fibp.AckItem{{Queue: "orders", MessageID: d.MessageID}}}).(*fibp.AckResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Ack: %v", r.Results[0].ErrorCode)
	}
	enqueue(t, c, msg("orders", "4"))
	stop()

	addr, stop = startAtWith(t, dir, func(o *broker.Options) { o.Sync = false })
	defer stop()
	c = dialRaw(t, addr)
	c.Handshake()
	refused(6)
	setConfig(t, c, "queue.orders.max_depth", "") // back to the default: no limit
	enqueue(t, c, msg("orders", "5"))
	setConfig(t, c, "defaults.max_depth", "1")
	if e, ok := c.Call(7, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{msg("other", "y")}}).(*fibp.Error); !ok ||
		e.ErrorCode != fibp.CodeChannelFull || !strings.Contains(e.Message, "defaults.max_depth") {
		t.Fatalf("a queue over defaults.max_depth answered %#v", e)
	}
}

// With depth_policy dead_letter_oldest a full queue takes the new message and moves its oldest
// messages not in flight to the dead-letter queue.
func TestMaxDepthDeadLettersTheOldest(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})
	setConfig(t, c, "queue.orders.max_depth", "2")
	setConfig(t, c, "queue.orders.depth_policy", "dead_letter_oldest")
	enqueue(t, c, msg("orders", "a"), msg("orders", "b"))
	c.Subscribe(1, "orders", 1)
	if p := string(c.Deliveries(1)[0].Payload); p != "a" {
		t.Fatalf("first delivery %q, want a", p)
	}
	enqueue(t, c, msg("orders", "c"), msg("orders", "d")) // a is in flight: b and c go
	if n, dead := held(t, c, "orders"), held(t, c, "orders.dlq"); n != 2 || dead != 2 {
		t.Fatalf("orders holds %d and its DLQ %d, want 2 and 2", n, dead)
	}
	if got := strings.Join(payloads(t, c, 2, "orders.dlq", 2), ","); got != "b:max_depth,c:max_depth" {
		t.Fatalf("dead-lettered %s, want b and c (the oldest not in flight) for max_depth", got)
	}
}

// On an ordered queue the dropped oldest message is its group's head: the next one becomes the
// head and is delivered; retention drops a waiting message behind a leased head alike, and the
// group goes on in order.
func TestLimitsKeepAnOrderedQueueMoving(t *testing.T) {
	clock := newFakeClock()
	o := broker.DefaultOptions(t.TempDir())
	o.Sync, o.Clock = false, clock.Now
	_, _, addr, stop := serveAt(t, o, Options{})
	defer stop()
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "fifo", Ordering: fibp.OrderingQueue})
	setConfig(t, c, "queue.fifo.max_depth", "2")
	setConfig(t, c, "queue.fifo.depth_policy", "dead_letter_oldest")
	enqueue(t, c, msg("fifo", "a"), msg("fifo", "b"), msg("fifo", "c"))
	c.Subscribe(1, "fifo", 1)
	d := c.Deliveries(1)[0]
	if string(d.Payload) != "b" {
		t.Fatalf("delivered %q, want b (a dropped, b the head now)", d.Payload)
	}
	setConfig(t, c, "queue.fifo.max_depth", "")
	setConfig(t, c, "queue.fifo.retention_ms", "1000")
	clock.Advance(time.Second)
	enqueue(t, c, msg("fifo", "d")) // b (leased) and c expire; d stays
	if n, dead := held(t, c, "fifo"), held(t, c, "fifo.dlq"); n != 1 || dead != 3 {
		t.Fatalf("fifo holds %d and its DLQ %d, want 1 and 3", n, dead)
	}
	if r := c.Call(2, &fibp.Ack{Items: []fibp.AckItem{{Queue: "fifo", MessageID: d.MessageID}}}).(*fibp.AckResult); r.Results[0].ErrorCode != fibp.CodeMessageNotFound {
		t.Fatalf("Ack of an expired leased message: %v, want MessageNotFound", r.Results[0].ErrorCode)
	}
	c.Subscribe(3, "fifo", 1) // the first subscription's credit went with b
	if got := c.Deliveries(1)[0]; string(got.Payload) != "d" {
		t.Fatalf("delivered %q, want d", got.Payload)
	}
}

// A message goes to the dead-letter queue once its queue's retention_ms has passed since it was
// accepted; younger ones stay. The broker's clock is a fake the test moves; a round of the queue (here an Enqueue)
// expires what is due.
func TestRetentionExpiresToTheDLQ(t *testing.T) {
	clock := newFakeClock()
	o := broker.DefaultOptions(t.TempDir())
	o.Sync, o.Clock = false, clock.Now
	_, _, addr, stop := serveAt(t, o, Options{})
	defer stop()
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})
	setConfig(t, c, "defaults.retention_ms", "60000")
	enqueue(t, c, msg("orders", "old"))
	clock.Advance(30 * time.Second)
	enqueue(t, c, msg("orders", "young"))
	clock.Advance(30*time.Second - time.Millisecond) // old is 1 ms short of 60 s: not yet
	enqueue(t, c, msg("orders", "new"))
	if n := held(t, c, "orders.dlq"); n != 0 {
		t.Fatalf("%d messages expired before the retention had passed, want 0", n)
	}
	clock.Advance(time.Millisecond)
	enqueue(t, c, msg("orders", "newer"))
	if n, dead := held(t, c, "orders"), held(t, c, "orders.dlq"); n != 3 || dead != 1 {
		t.Fatalf("orders holds %d and its DLQ %d, want 3 and 1", n, dead)
	}
	if got := payloads(t, c, 1, "orders.dlq", 1); got[0] != "old:expired" {
		t.Fatalf("dead-lettered %q, want old, expired", got[0])
	}
	setConfig(t, c, "queue.orders.retention_ms", "0") // this queue keeps its messages for ever
	clock.Advance(time.Hour)
	enqueue(t, c, msg("orders", "last"))
	if n := held(t, c, "orders"); n != 4 {
		t.Fatalf("orders holds %d with retention 0, want 4", n)
	}
}

// A delay longer than max_delay_ms (7 days unless set) is refused per message with
// InvalidConfigValue; the rest of the batch is taken.
func TestDelayOverTheMaximumIsRefused(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})
	newQueue(t, c, &fibp.CreateQueue{Name: "other"})
	delayed := func(queue string, ms uint64) fibp.EnqueueMessage {
		m := msg(queue, "d")
		m.DelayMs = wire.Some(ms)
		return m
	}
	codes := func(reqID uint32, msgs ...fibp.EnqueueMessage) []fibp.ErrorCode {
		t.Helper()
		r := c.Call(reqID, &fibp.Enqueue{Messages: msgs}).(*fibp.EnqueueResult)
		var out []fibp.ErrorCode
		for _, it := range r.Results {
			out = append(out, it.ErrorCode)
		}
		return out
	}
	want := func(got []fibp.ErrorCode, want ...fibp.ErrorCode) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("results %v, want %v", got, want)
			}
		}
	}
	const week = 7 * 24 * 60 * 60 * 1000
	want(codes(1, delayed("orders", week), delayed("orders", week+1), msg("orders", "now")),
		fibp.CodeOk, fibp.CodeInvalidConfigValue, fibp.CodeOk)
	setConfig(t, c, "queue.orders.max_delay_ms", "1000")
	want(codes(2, delayed("orders", 1001), delayed("other", 1001), delayed("orders", 1000)),
		fibp.CodeInvalidConfigValue, fibp.CodeOk, fibp.CodeOk)
	if n := held(t, c, "orders"); n != 3 {
		t.Fatalf("orders holds %d, want the 3 messages taken", n)
	}
}

// Bad limit values and keys are refused with InvalidConfigValue and a message that says why.
func TestBadLimitValuesAreRefused(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	for _, tc := range []struct{ key, value, why string }{
		{"defaults.max_depth", "-1", "want an integer from 0 to"},
		{"defaults.max_depth", "many", "want an integer from 0 to"},
		{"defaults.depth_policy", "drop", "want reject or dead_letter_oldest"},
		{"defaults.retention_ms", "1y", "want an integer from 0 to"},
		{"defaults.max_delay_ms", "0", "want an integer from 1 to"},
		{"defaults.max_delay_ms", "31536000001", "want an integer from 1 to 31536000000"},
		{"queue.orders.max_depth", "-5", "queue.orders.max_depth: want an integer"},
		{"queue.orders.depth_policy", "oldest", "want reject or dead_letter_oldest"},
		{"queue.orders.max_dept", "5", "setting one of max_depth, depth_policy, retention_ms, max_delay_ms"},
		{"queue.orders", "5", "queue.<queue>.<setting>"},
		{"queue.orders.dlq.max_depth", "5", "a dead-letter queue has no limits"},
	} {
		e, ok := c.Call(1, &fibp.SetConfig{Key: tc.key, Value: tc.value}).(*fibp.Error)
		if !ok || e.ErrorCode != fibp.CodeInvalidConfigValue || !strings.Contains(e.Message, tc.why) {
			t.Errorf("SetConfig %s=%q answered %#v, want InvalidConfigValue saying %q", tc.key, tc.value, e, tc.why)
		}
	}
	r := c.Call(2, &fibp.ListConfig{Prefix: "queue."}).(*fibp.ListConfigResult)
	if len(r.Entries) != 0 {
		t.Fatalf("refused keys were stored: %v", r.Entries)
	}
}
