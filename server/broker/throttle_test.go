package broker

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/throttle"
)

// throttleSink records one subscription's deliveries.
type throttleSink struct {
	mu  sync.Mutex
	got []service.Delivery
}

func (k *throttleSink) Subscribed(string) {}
func (k *throttleSink) Ended(*Error)      {}

func (k *throttleSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	k.mu.Lock()
	k.got = append(k.got, ds...)
	k.mu.Unlock()
	if onWritten != nil {
		onWritten()
	}
	return true
}

// throttleWorld is a broker on the in-memory store with the script tests' fake clock, two
// queues, and the throttles a property run declares.
type throttleWorld struct {
	s     *script
	decls map[string]ThrottleDeclaration // each name's one declaration (key, policy, limits)
	subs  map[string]*liveSub
	ended []*liveSub
	next  int
}

type liveSub struct {
	id, queue string
	throttles []string
	decls     map[string]ThrottleDeclaration // this subscription's declarations (limits may differ)
	since     int64                          // when it subscribed (Unix ms of the fake clock)
	until     int64                          // when it was ended (0 while live)
	sink      *throttleSink
}

// declOf is ls's declaration of throttle name (the world's, unless ls declared its own limits).
func (w *throttleWorld) declOf(ls *liveSub, name string) ThrottleDeclaration {
	if d, ok := ls.decls[name]; ok {
		return d
	}
	return w.decls[name]
}

var throttleQueues = []string{"qa", "qb"}

func newThrottleWorld(t *testing.T, decls map[string]ThrottleDeclaration) *throttleWorld {
	s := newScript(t)
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	for _, q := range throttleQueues {
		if e := b.CreateQueue(QueueSpec{Name: q, VisibilityTimeoutMs: 3_600_000}); e != nil {
			t.Fatal(e)
		}
	}
	return &throttleWorld{s: s, decls: decls, subs: map[string]*liveSub{}}
}

func (w *throttleWorld) advance(d time.Duration) {
	w.s.mu.Lock()
	w.s.now = w.s.now.Add(d)
	for _, t := range w.s.timers {
		t.fireBy(w.s.now)
	}
	w.s.mu.Unlock()
	w.s.settled()
}

// deliveries waits until every round has handed its deliveries over and returns them per
// subscription, ended ones included.
func (w *throttleWorld) deliveries() []*liveSub {
	w.s.settled()
	for _, a := range w.s.actors() {
		a.drain()
	}
	all := slices.Clone(w.ended)
	for _, ls := range w.subs {
		all = append(all, ls)
	}
	return all
}

// checkWindows asserts the exactness of every throttle: for every delivery to a subscription and
// every limit that subscription declared (so effective, or implied by an effective one, while it
// lived), the deliveries of the same bucket — to any subscription declaring the throttle, on any
// queue — in the window of that limit ending at the delivery, from the subscription's start on,
// are at most its N. (Deliveries in the millisecond it ended may follow other deliveries made
// after its limits left, so those are not checked. Deliveries before a limit was declared count towards it when the bucket
// still remembers them — see throttle.TestALimitDeclaredLaterCountsThePast — but an idle bucket
// is forgotten after the longest window declared so far, so a window reaching back before the
// limit's declaration is not checked here.)
func (w *throttleWorld) checkWindows(t *rapid.T) {
	type bucketRef struct {
		name string
		b    throttle.BucketKey
	}
	subs := w.deliveries()
	got := map[*liveSub][]service.Delivery{}
	times := map[bucketRef][]int64{}
	for _, ls := range subs {
		ls.sink.mu.Lock()
		got[ls] = slices.Clone(ls.sink.got)
		ls.sink.mu.Unlock()
		for _, name := range ls.throttles {
			for _, m := range got[ls] {
				if b, throttled := bucketOf(w.declOf(ls, name), subject(m)); throttled {
					ref := bucketRef{name, b}
					times[ref] = append(times[ref], m.LeasedAt)
				}
			}
		}
	}
	for _, ts := range times {
		slices.Sort(ts)
	}
	for _, ls := range subs {
		for _, name := range ls.throttles {
			d := w.declOf(ls, name)
			for _, m := range got[ls] {
				b, throttled := bucketOf(d, subject(m))
				if !throttled || ls.until != 0 && m.LeasedAt >= ls.until {
					continue
				}
				ts := times[bucketRef{name, b}]
				for _, l := range d.Limits {
					from, _ := slices.BinarySearch(ts, max(m.LeasedAt-int64(l.WindowMs)+1, ls.since))
					to, _ := slices.BinarySearch(ts, m.LeasedAt+1)
					if uint64(to-from) > l.Max {
						t.Fatalf("throttle %s bucket %q: %d deliveries in the %d ms up to %d, %s declared %v",
							name, b.Group, to-from, l.WindowMs, m.LeasedAt, ls.id, l)
					}
				}
			}
		}
	}
}

func subject(m service.Delivery) *keys.Subject {
	return &keys.Subject{Headers: m.Headers, FairnessKey: m.FairnessKey}
}

func bucketOf(d ThrottleDeclaration, s *keys.Subject) (throttle.BucketKey, bool) {
	if len(d.Key) == 0 {
		return throttle.BucketKey{}, true
	}
	if g, ok := d.Key.Group(s); ok {
		return throttle.BucketKey{Group: g}, true
	}
	return throttle.BucketKey{Missing: true}, d.WhenKeyMissing == throttle.SharedBucket
}

// TestThrottlePropertyAcrossQueues drives random subscriptions (declaring random sets of three
// throttles, on two queues, some with limits of their own), enqueues, acks and time through the
// broker with a fake clock, and checks that no bucket of any throttle ever holds more than N
// deliveries in a window of W for a limit in force (see checkWindows).
func TestThrottlePropertyAcrossQueues(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limits := func(label string) []ThrottleLimit {
			l := ThrottleLimit{Max: rapid.Uint64Range(1, 6).Draw(rt, label+" max"), WindowMs: rapid.Uint64Range(1, 1500).Draw(rt, label+" window")}
			if !rapid.Bool().Draw(rt, label+" two limits") {
				return []ThrottleLimit{l}
			}
			return []ThrottleLimit{l, {Max: l.Max*2 + 1, WindowMs: l.WindowMs * 3}}
		}
		decls := map[string]ThrottleDeclaration{
			"global":   {Name: "global", Limits: limits("global")},
			"merchant": {Name: "merchant", Limits: limits("merchant"), Key: keys.Key{{Kind: keys.Header, Name: "m"}}, WhenKeyMissing: throttle.Policy(rapid.IntRange(0, 1).Draw(rt, "policy"))},
			"tenant":   {Name: "tenant", Limits: limits("tenant"), Key: keys.Key{{Kind: keys.FairnessKey}}},
		}
		w := newThrottleWorld(t, decls)
		defer w.s.close()
		rt.Repeat(map[string]func(*rapid.T){
			"subscribe": func(rt *rapid.T) {
				w.next++
				ls := &liveSub{id: fmt.Sprintf("c%d", w.next), queue: rapid.SampledFrom(throttleQueues).Draw(rt, "queue"),
					sink: &throttleSink{}, decls: map[string]ThrottleDeclaration{}, since: w.s.clock().UnixMilli()}
				var ds []ThrottleDeclaration
				for _, name := range []string{"global", "merchant", "tenant"} {
					if !rapid.Bool().Draw(rt, "declares "+name) {
						continue
					}
					d := decls[name]
					if rapid.Bool().Draw(rt, "own limits") { // same key and policy, other limits
						d.Limits = limits(name + " own")
					}
					ds = append(ds, d)
					ls.decls[name] = d
					ls.throttles = append(ls.throttles, name)
				}
				if _, e := w.s.b.Subscribe(SubscribeRequest{Queue: ls.queue, ConsumerID: ls.id, Throttles: ds}, ls.sink); e != nil {
					rt.Fatal(e)
				}
				w.subs[ls.id] = ls
				w.s.settled()
			},
			"unsubscribe": func(rt *rapid.T) {
				if len(w.subs) == 0 {
					return
				}
				ids := make([]string, 0, len(w.subs))
				for id := range w.subs {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				ls := w.subs[rapid.SampledFrom(ids).Draw(rt, "victim")]
				// Its limits leave with it, and deliveries may follow at once, in the same
				// millisecond as its own last ones: checkWindows checks its deliveries before
				// until only.
				w.advance(time.Millisecond)
				ls.until = w.s.clock().UnixMilli()
				w.s.b.Unsubscribe(ls.queue, ls.id)
				delete(w.subs, ls.id)
				w.ended = append(w.ended, ls)
				w.s.settled()
			},
			"enqueue": func(rt *rapid.T) {
				var msgs []Message
				for range rapid.IntRange(1, 8).Draw(rt, "n") {
					m := Message{Queue: rapid.SampledFrom(throttleQueues).Draw(rt, "queue"), Payload: []byte("x"),
						FairnessKey: rapid.SampledFrom([]string{"t1", "t2"}).Draw(rt, "tenant")}
					if h := rapid.SampledFrom([]string{"", "m1", "m2"}).Draw(rt, "merchant"); h != "" {
						m.Headers = map[string]string{"m": h}
					}
					msgs = append(msgs, m)
				}
				done := make(chan struct{})
				w.s.b.Enqueue(msgs, func([]EnqueueResult, *Error) { close(done) })
				<-done
				w.s.settled()
			},
			"ack": func(rt *rapid.T) {
				for _, ls := range w.subs {
					ls.sink.mu.Lock()
					var items []AckItem
					for _, d := range ls.sink.got {
						items = append(items, AckItem{Queue: d.Queue, ID: d.ID})
					}
					ls.sink.mu.Unlock()
					done := make(chan struct{})
					w.s.b.Ack(items, func([]Code, *Error) { close(done) })
					<-done
				}
				w.s.settled()
			},
			"advance": func(rt *rapid.T) {
				w.advance(time.Duration(rapid.Int64Range(0, 700).Draw(rt, "ms")) * time.Millisecond)
			},
		})
		w.checkWindows(rt)
	})
}

// A saturated throttle on a backlog delivers exactly N per window, window after window, with the
// fake clock: the achieved rate is N/W.
func TestThrottleSaturatedBacklogAchievesTheLimit(t *testing.T) {
	w := newThrottleWorld(t, nil)
	defer w.s.close()
	msgs := make([]Message, 200)
	for i := range msgs {
		msgs[i] = Message{Queue: "qa", Payload: []byte("x")}
	}
	done := make(chan struct{})
	w.s.b.Enqueue(msgs, func([]EnqueueResult, *Error) { close(done) })
	<-done
	sink := &throttleSink{}
	d := ThrottleDeclaration{Name: "api", Limits: []ThrottleLimit{{Max: 10, WindowMs: 1000}}}
	if _, e := w.s.b.Subscribe(SubscribeRequest{Queue: "qa", ConsumerID: "c", Throttles: []ThrottleDeclaration{d}}, sink); e != nil {
		t.Fatal(e)
	}
	w.s.settled() // the first window opens now, not at the first advance
	for range 100 {
		w.advance(100 * time.Millisecond)
	}
	w.deliveries()
	sink.mu.Lock()
	n := len(sink.got)
	sink.mu.Unlock()
	// 10 s of fake time after the first window opened: 10 windows of 10, and the 10 at the start.
	if n != 110 {
		t.Fatalf("%d deliveries in 10 s at 10/s (plus the first window), want 110", n)
	}
	st, e := w.s.b.GetStats("qa")
	if e != nil || st.Throttled != 90 {
		t.Fatalf("throttled %d (%v), want 90", st.Throttled, e)
	}
}

// Per-merchant 5/s under a global 100/s, 30 merchants with backlogs, fake clock: each second
// delivers exactly 100 (the global limit binds: 30 × 5 > 100), no merchant more than 5 in any
// second, and the throttled messages wait (in the last window 20 merchants were served, 5 each).
func TestThrottlePerMerchantUnderGlobal(t *testing.T) {
	global := ThrottleDeclaration{Name: "stripe", Limits: []ThrottleLimit{{Max: 100, WindowMs: 1000}}}
	merchant := ThrottleDeclaration{Name: "stripe-merchant", Limits: []ThrottleLimit{{Max: 5, WindowMs: 1000}},
		Key: keys.Key{{Kind: keys.Header, Name: "m"}}}
	w := newThrottleWorld(t, map[string]ThrottleDeclaration{"stripe": global, "stripe-merchant": merchant})
	defer w.s.close()
	var msgs []Message
	for i := range 3000 {
		msgs = append(msgs, Message{Queue: "qa", Payload: []byte("x"), Headers: map[string]string{"m": fmt.Sprint("m", i%30)}})
	}
	done := make(chan struct{})
	w.s.b.Enqueue(msgs, func([]EnqueueResult, *Error) { close(done) })
	<-done
	ls := &liveSub{id: "c", queue: "qa", throttles: []string{"stripe", "stripe-merchant"}, sink: &throttleSink{}}
	if _, e := w.s.b.Subscribe(SubscribeRequest{Queue: "qa", ConsumerID: "c", Throttles: []ThrottleDeclaration{global, merchant}}, ls.sink); e != nil {
		t.Fatal(e)
	}
	w.subs["c"] = ls
	start := w.s.clock().UnixMilli()
	for range 50 {
		w.advance(100 * time.Millisecond)
	}
	w.deliveries()
	perSecond := map[int64]int{}
	perMerchantSecond := map[string]int{}
	for _, d := range ls.sink.got {
		s := (d.LeasedAt - start) / 1000
		perSecond[s]++
		perMerchantSecond[fmt.Sprint(d.Headers["m"], "@", s)]++
	}
	for s := range int64(5) {
		if perSecond[s] != 100 {
			t.Errorf("second %d: %d deliveries, want 100", s, perSecond[s])
		}
	}
	for k, n := range perMerchantSecond {
		if n > 5 {
			t.Errorf("%s: %d deliveries in one second", k, n)
		}
	}
	st, _ := w.s.b.GetStats("qa")
	if want := uint64(3000 - len(ls.sink.got)); st.Throttled != want {
		t.Errorf("throttled %d, want %d", st.Throttled, want)
	}
	g, e := w.s.b.GetThrottleStats("stripe-merchant", 3)
	if e != nil || g.Summary.ActiveBuckets != 20 || g.Summary.BucketsAtLimit != 20 || len(g.Buckets) != 3 || g.Waiting != st.Throttled {
		t.Errorf("merchant stats %+v (%v)", g, e)
	}
}
