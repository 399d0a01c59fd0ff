package broker

import (
	"strings"
	"testing"
	"time"
)

// mustDo runs script lines, failing on an error answer.
func mustDo(t *testing.T, s *script, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if out := s.do(l); strings.Contains(out, "err") || strings.Contains(out, "Error") {
			t.Fatalf("%s: %s", l, out)
		}
	}
}

func explainOf(t *testing.T, b *Broker, queue string, id MessageID) Explanation {
	t.Helper()
	ex, e := b.Explain(queue, id)
	if e != nil {
		t.Fatalf("Explain %s: %v", queue, e)
	}
	return ex
}

// reasonsOf lists an explanation's reason names.
func reasonsOf(rs []ExplainReason) string {
	var names []string
	for _, r := range rs {
		names = append(names, r.Reason)
	}
	return strings.Join(names, ",")
}

// Explain, ExplainKey, FairnessKeys and QueueSummaries through the broker, on the fake clock: a
// queue without subscriber, then with a throttled one that took one message and holds the rest.
func TestExplainThroughTheBroker(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, -1)
	mustDo(t, s, "create q attempts=3", "enqueue q a b key=k1", "enqueue q c key=k1 delay=5000")
	now := s.clock().UnixMilli()
	id := func(label string) MessageID { return MessageID(s.id(label)) }

	ex := explainOf(t, b, "q", id("m1"))
	if ex.State != "ready" || ex.DeliverableNow || reasonsOf(ex.Reasons) != "no_subscriber" || ex.ID != id("m1").String() {
		t.Fatalf("m1 without subscriber: %+v", ex)
	}
	if ex := explainOf(t, b, "q", id("m2")); reasonsOf(ex.Reasons) != "key_backlog,no_subscriber" || ex.Reasons[0].Ahead != 1 {
		t.Fatalf("m2: %+v", ex)
	}
	ex = explainOf(t, b, "q", id("m3"))
	if ex.State != "delayed" || ex.Reasons[0].Reason != "delayed" || ex.Reasons[0].Until != now+5000 ||
		!strings.Contains(ex.Reasons[0].Text, "delayed until ") || !strings.Contains(ex.Reasons[0].Text, "(in 5s)") {
		t.Fatalf("m3: %+v", ex)
	}

	api := ThrottleDeclaration{Name: "api", Limits: []ThrottleLimit{{Max: 1, WindowMs: 10_000}}}
	if _, e := b.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c", Throttles: []ThrottleDeclaration{api}}, &throttleSink{}); e != nil {
		t.Fatal(e)
	}
	s.settled()
	ex = explainOf(t, b, "q", id("m1"))
	if l := ex.Reasons[0]; ex.State != "leased" || l.Reason != "leased" || l.Consumer != "c" || l.Attempt != 1 || l.MaxAttempts != 3 ||
		l.Until != now+30_000 {
		t.Fatalf("m1 leased: %+v", ex)
	}
	ex = explainOf(t, b, "q", id("m2"))
	if r := ex.Reasons[0]; ex.State != "throttled" || len(ex.Reasons) != 1 || r.Throttle != "api" || r.NextRoomAt <= now ||
		r.NextRoomAt > now+10_000 || !strings.Contains(r.Text, `throttle "api"`) {
		t.Fatalf("m2 throttled: %+v", ex)
	}

	kx, e := b.ExplainKey("q", "k1")
	if e != nil || kx.Backlog != 2 || kx.InFlight != 1 || kx.DeliveriesLastMinute != 1 || kx.WeightedShare != 1 ||
		reasonsOf(kx.Reasons) != "delayed,throttled" {
		t.Fatalf("ExplainKey k1: %+v, %v", kx, e)
	}
	if kx, e := b.ExplainKey("q", "nobody"); e != nil || reasonsOf(kx.Reasons) != "no_backlog" {
		t.Fatalf("ExplainKey of an unknown key: %+v, %v", kx, e)
	}
	page, e := b.FairnessKeys("q", KeyListOptions{})
	if e != nil || page.Total != 1 || len(page.Keys) != 1 || page.Next != "" || page.DeliveriesLastMinute != 1 {
		t.Fatalf("FairnessKeys: %+v, %v", page, e)
	}
	if k := page.Keys[0]; k != (KeyRow{Key: "k1", Backlog: 2, InFlight: 1, Weight: 1, DeliveriesLastMinute: 1, WeightedShare: 1}) {
		t.Fatalf("k1's row: %+v", k)
	}
	qs, e := b.QueueSummaries(QueueListOptions{})
	if e != nil || qs.Total != 1 || len(qs.Queues) != 1 {
		t.Fatalf("QueueSummaries: %+v, %v", qs, e)
	}
	if r := qs.Queues[0]; r.Name != "q" || r.Depth != 2 || r.InFlight != 1 || r.Delayed != 1 || r.Throttled != 1 || r.Ready != 0 ||
		r.FairnessKeys != 1 || r.Consumers != 1 || r.Asleep {
		t.Fatalf("q's row: %+v", r)
	}

	for _, c := range []struct {
		name string
		e    *Error
		want Code
	}{
		{"unknown queue", second(b.Explain("nope", id("m1"))), CodeQueueNotFound},
		{"unknown message", second(b.Explain("q", MessageID{1})), CodeMessageNotFound},
		{"key of an unknown queue", second(b.ExplainKey("nope", "k")), CodeQueueNotFound},
		{"keys of an unknown queue", second(b.FairnessKeys("nope", KeyListOptions{})), CodeQueueNotFound},
		{"keys sorted by depth", second(b.FairnessKeys("q", KeyListOptions{Sort: "depth"})), CodeInvalidConfigValue},
		{"1001 keys", second(b.FairnessKeys("q", KeyListOptions{Limit: 1001})), CodeInvalidConfigValue},
		{"queues sorted by key", second(b.QueueSummaries(QueueListOptions{Sort: "key"})), CodeInvalidConfigValue},
		{"501 queues", second(b.QueueSummaries(QueueListOptions{Limit: 501})), CodeInvalidConfigValue},
		{"row of an unknown queue", second(b.QueueSummary("nope")), CodeQueueNotFound},
	} {
		if c.e == nil || c.e.Code != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.e, c.want)
		}
	}
}

func second[T any](_ T, e *Error) *Error { return e }

// A message that died is explained from its queue as dead-lettered, with the reason; from the
// dead-letter queue as a message of that queue.
func TestExplainDeadLettered(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, -1)
	mustDo(t, s, "create d attempts=1 visibility=1000", "enqueue d x", "consume d c")
	s.deliveries(1)
	s.advanceClock(2 * time.Second)
	s.settled()
	ex := explainOf(t, b, "d", MessageID(s.id("m1")))
	if ex.State != "dead_lettered" || reasonsOf(ex.Reasons) != "dead_lettered" || ex.Reasons[0].DeadLetter == "" ||
		!strings.Contains(ex.Reasons[0].Text, "dead-lettered into d.dlq") {
		t.Fatalf("dead-lettered: %+v", ex)
	}
	if ex := explainOf(t, b, "d.dlq", MessageID(s.id("m1"))); ex.State != "ready" || ex.Queue != "d.dlq" {
		t.Fatalf("in the DLQ: %+v", ex)
	}
	qs, _ := b.QueueSummaries(QueueListOptions{})
	if len(qs.Queues) != 1 || qs.Queues[0].DLQDepth != 1 {
		t.Fatalf("rows: %+v", qs.Queues)
	}
}

// A sleeping queue's keys and row come from its summary without waking it; explaining one of its
// messages wakes it.
func TestExplainASleepingQueue(t *testing.T) {
	_, b := asleepWithOne(t)
	page, e := b.FairnessKeys("q", KeyListOptions{})
	if e != nil || !page.Asleep || len(page.Keys) != 1 || page.Keys[0].Backlog != 1 || page.Keys[0].WeightedShare != 1 {
		t.Fatalf("asleep keys: %+v, %v", page, e)
	}
	qs, e := b.QueueSummaries(QueueListOptions{Sort: "depth"})
	if e != nil || len(qs.Queues) != 1 || !qs.Queues[0].Asleep || qs.Queues[0].Depth != 1 || qs.Queues[0].Ready != 1 {
		t.Fatalf("asleep row: %+v, %v", qs, e)
	}
	if n := b.AwakeQueues(); n != 0 {
		t.Fatalf("%d queues woke for the key table and the list", n)
	}
	var first MessageID
	pp, _ := b.Peek("q", nil, 1) // wakes it too
	first = MessageID(pp.Messages[0].ID)
	if ex := explainOf(t, b, "q", first); ex.State != "ready" || reasonsOf(ex.Reasons) != "no_subscriber" {
		t.Fatalf("woken: %+v", ex)
	}
}

// Paging the queue list by name, depth and oldest visits every queue once.
func TestQueueSummariesPages(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, -1)
	for i, name := range []string{"a", "b", "c", "d", "e"} {
		mustDo(t, s, "create "+name)
		for range i % 3 {
			mustDo(t, s, "enqueue "+name+" x")
		}
		s.advanceClock(time.Second)
	}
	for _, sort := range []string{"", "name", "depth", "oldest"} {
		var got []string
		o := QueueListOptions{Sort: sort, Limit: 2}
		for {
			p, e := b.QueueSummaries(o)
			if e != nil || p.Total != 5 {
				t.Fatalf("sort %q: %+v, %v", sort, p, e)
			}
			for _, r := range p.Queues {
				got = append(got, r.Name)
			}
			if p.Next == "" {
				break
			}
			o.After = p.Next
		}
		// depth: c 2, b 1, e 1, a 0, d 0; oldest: b's message came first, then c's, then e's.
		want := map[string]string{"": "a,b,c,d,e", "name": "a,b,c,d,e", "depth": "c,b,e,a,d", "oldest": "b,c,e,a,d"}[sort]
		if strings.Join(got, ",") != want {
			t.Errorf("sort %q pages: %v, want %s", sort, got, want)
		}
	}
	if p, _ := b.QueueSummaries(QueueListOptions{Search: "c"}); p.Total != 1 || p.Queues[0].Name != "c" {
		t.Fatalf("search: %+v", p)
	}
}

// The queue list's rates are the counters' growth over the last minute of samples, taken as the
// list is read; counters that went back (a queue made again) start over.
func TestQueueRatesOverTheLastMinute(t *testing.T) {
	var rs rateSamples
	enq := func(at int64) float64 { // 10/s for a minute, then 20/s
		if at <= 60_000 {
			return float64(at) / 100
		}
		return 600 + float64(at-60_000)/50
	}
	if e, a := rs.rates("q", 0, 0, 0); e != 0 || a != 0 {
		t.Fatalf("first read: %v %v", e, a)
	}
	if e, a := rs.rates("q", 5_000, enq(5_000), 10); e != 10 || a != 2 {
		t.Fatalf("after 5 s: %v %v", e, a)
	}
	for at := int64(6_000); at < 120_000; at += 1_000 {
		rs.rates("q", at, enq(at), 10)
	}
	if e, _ := rs.rates("q", 120_000, enq(120_000), 10); e != 20 {
		t.Fatalf("the last minute at 20/s: %v", e)
	}
	if e, _ := rs.rates("q", 121_000, 5, 0); e != 0 {
		t.Fatalf("after the counters went back: %v", e)
	}
}
