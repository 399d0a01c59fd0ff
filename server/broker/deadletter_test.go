package broker

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A peek of a dead-letter queue shows why each message is there, as deliveries do: here a
// message expired by the queue's retention (reason expired, the limit's error, the queue, the
// time), after its queue hibernated and woke again (the record rebuilt from the store) too; the
// message's own headers stay.
func TestPeekOfADeadLetterQueueSaysWhy(t *testing.T) {
	s, b := asleepWithOne(t) // q holds "a", enqueued at the clock's start
	if e := b.SetConfig("queue.q.retention_ms", "60000"); e != nil {
		t.Fatal(e)
	}
	s.settled()
	s.advanceClock(time.Minute)
	if out := s.do("stats q.dlq"); !strings.HasPrefix(out, "depth=1") {
		t.Fatalf("once the retention passed: q.dlq %s, want the message", out)
	}
	check := func(when string) {
		t.Helper()
		page, e := b.Peek("q.dlq", nil, 10)
		if e != nil || len(page.Messages) != 1 {
			t.Fatalf("%s: peek %+v %v", when, page, e)
		}
		m := page.Messages[0]
		h := m.Headers
		if h[HeaderDeadLetterReason] != ReasonExpired || !strings.HasPrefix(h[HeaderDeadLetterError], "expired: ") ||
			h[HeaderDeadLetterQueue] != "q" || h[HeaderDeadLetterAttempts] != "0" {
			t.Fatalf("%s: headers %v", when, h)
		}
		if at, err := strconv.ParseInt(h[HeaderDeadLetterAt], 10, 64); err != nil || at < m.EnqueuedAt+60_000 {
			t.Fatalf("%s: %s %q for a message enqueued at %d", when, HeaderDeadLetterAt, h[HeaderDeadLetterAt], m.EnqueuedAt)
		}
		got, e := b.Message("q.dlq", m.ID)
		if e != nil || got.Headers[HeaderDeadLetterReason] != ReasonExpired {
			t.Fatalf("%s: message get %v %v", when, got.Headers, e)
		}
	}
	check("awake")
	s.settled()
	s.idleUntilAsleep(t, b)
	check("after hibernating")
}
