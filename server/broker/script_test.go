package broker

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/service"
	"github.com/filamq/fila/server/storage"
)

// The round and commit pipeline, driven step by step through the broker's API on the in-memory
// store, with a fake clock. Scripts in testdata/script/*.txt; rewrite their expected output with
// `go test ./server/broker -run TestScripts -rewrite`.
//
// Commands (message IDs print as m1, m2, … in the order the broker assigned them):
//
//	open [cache=BYTES]                       open a broker on the store (after crash: recover)
//	create NAME [visibility=MS] [attempts=N] [fast] [ordering=queue|grouped] [okey=KEY]
//	       [missing=unordered] [dedup=KEY] [window=MS]   KEY: parts "kind[:name]" joined by ","
//	update NAME [window=MS]
//	enqueue QUEUE PAYLOAD… [key=K] [delay=MS] [idem=KEY] [hdr=NAME:VALUE[;NAME:VALUE]]
//	enqueue-async QUEUE PAYLOAD…             the same without waiting for the answer
//	delay-appends DURATION                   every later log append takes this long
//	consume QUEUE CONSUMER [credit=N]        credit 0 (default): server-managed window
//	deliveries [n=N]                         wait for N deliveries (default: what has arrived), print them
//	ack|nack|extend QUEUE ID… [retry=MS] [by=MS]
//	redrive DLQ
//	advance DURATION                         move the clock; queue timers that are due fire
//	stats QUEUE                              (with groups= blocked= on an ordered queue)
//	metrics NAME…                            the samples of these series (without fila_), sorted
//	fail-commits N                           the next N log appends fail
//	crash                                    power failure: unsynced writes are lost, the broker stops
//	lose-body QUEUE ID                       the store forgets that message's body (damage)
type script struct {
	t       *testing.T
	timers  []*fakeTimer
	mem     *storage.Mem
	b       *Broker
	now     time.Time
	mu      sync.Mutex
	ids     map[wire.UUID]string
	names   map[string]wire.UUID
	sinks   []*scriptSink
	reloads int64 // reloads finished before the last fail-commits
	reg     *prometheus.Registry
}

// actors returns every queue group's actor.
func (s *script) actors() []*actor {
	var as []*actor
	for _, a := range s.b.actors() {
		as = append(as, a)
	}
	return as
}

func (s *script) reloadCount() int64 {
	var n int64
	for _, a := range s.actors() {
		n += a.reloads.Load()
	}
	return n
}

// waitReload waits for the reload after the failed append that fail-commits set up: it runs
// asynchronously, and requests sent before it ends may still be answered StorageError.
func (s *script) waitReload() {
	for deadline := time.Now().Add(5 * time.Second); s.reloadCount() <= s.reloads && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// settled waits until every actor has taken its fired timer and finished the round it woke
// (expiring leases): a call runs before that round's expiry, a second call after it.
func (s *script) settled() {
	for _, a := range s.actors() {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
			s.mu.Lock()
			pending := false
			for _, t := range s.timers {
				pending = pending || len(t.c) > 0
			}
			s.mu.Unlock()
			if !pending {
				break
			}
		}
		a.call(func(*actor) {})
		a.call(func(*actor) {})
	}
}

type scriptSink struct {
	s    *script
	mu   sync.Mutex
	got  []service.Delivery
	wake chan struct{}
}

func (k *scriptSink) Subscribed(string) {}
func (k *scriptSink) Ended(*Error)      {}

func (k *scriptSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	k.mu.Lock()
	for _, d := range ds {
		d.Payload = append([]byte(nil), d.Payload...)
		k.got = append(k.got, d)
	}
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
	if onWritten != nil {
		onWritten()
	}
	return true
}

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/script", func(t *testing.T, path string) {
		s := newScript(t)
		defer s.close()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(d)
		})
	})
}

func newScript(t *testing.T) *script {
	return &script{t: t, mem: storage.NewMem(), now: time.UnixMilli(1_000_000), ids: map[wire.UUID]string{}, names: map[string]wire.UUID{}}
}

func (s *script) close() {
	if s.b != nil {
		s.b.Close()
	}
}

// do runs one command written as in a script.
func (s *script) do(line string) string {
	f := strings.Fields(line)
	d := &datadriven.TestData{Cmd: f[0]}
	for _, a := range f[1:] {
		k, v, ok := strings.Cut(a, "=")
		arg := datadriven.CmdArg{Key: k}
		if ok {
			arg.Vals = []string{v}
		}
		d.CmdArgs = append(d.CmdArgs, arg)
	}
	return s.run(d)
}

func (s *script) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *script) label(id wire.UUID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.ids[id]; ok {
		return l
	}
	l := fmt.Sprintf("m%d", len(s.ids)+1)
	s.ids[id], s.names[l] = l, id
	return l
}

func (s *script) id(label string) wire.UUID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.names[label]; ok {
		return id
	}
	panic("unknown message " + label)
}

// args splits a command's arguments into words and key=value options.
func args(d *datadriven.TestData) (words []string, opts map[string]string) {
	opts = map[string]string{}
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 {
			opts[a.Key] = a.Vals[0]
		} else {
			words = append(words, a.Key)
		}
	}
	return words, opts
}

func num(opts map[string]string, key string) uint64 {
	v, _ := strconv.ParseUint(opts[key], 10, 64)
	return v
}

func (s *script) run(d *datadriven.TestData) string {
	words, opts := args(d)
	switch d.Cmd {
	case "open":
		s.reg = prometheus.NewRegistry()
		b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, BodyCacheBytes: int(num(opts, "cache")),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registry: s.reg})
		if err != nil {
			return "error: " + err.Error()
		}
		s.reg.MustRegister(NewCollector(b, CollectorOptions{TopKeys: int(num(opts, "top-keys"))}))
		s.b, s.sinks = b, nil
		return "ok"
	case "create":
		req := QueueSpec{Name: words[0], VisibilityTimeoutMs: num(opts, "visibility"), MaxAttempts: uint32(num(opts, "attempts")),
			OrderingKey: scriptKey(opts["okey"]), DedupKey: scriptKey(opts["dedup"]), DedupWindowMs: num(opts, "window")}
		if len(words) > 1 && words[1] == "fast" {
			req.DeliveryDurability = service.DeliveryDurabilityFast
		}
		switch opts["ordering"] {
		case "queue":
			req.Ordering = service.OrderingQueue
		case "grouped":
			req.Ordering = service.OrderingGrouped
		}
		if opts["missing"] == "unordered" {
			req.WhenOrderingKeyMissing = service.WhenOrderingKeyMissingUnordered
		}
		return result(s.b.CreateQueue(req))
	case "update":
		req := QueueUpdate{Queue: words[0]}
		if _, ok := opts["window"]; ok {
			v := num(opts, "window")
			req.DedupWindowMs = &v
		}
		return result(s.b.UpdateQueue(req))
	case "enqueue":
		return s.enqueue(words, opts, true)
	case "enqueue-async":
		s.enqueue(words, opts, false)
		return "sent"
	case "delay-appends":
		d, err := time.ParseDuration(words[0])
		if err != nil {
			return err.Error()
		}
		s.mem.DelayAppends(d)
		return "ok"
	case "consume":
		k := &scriptSink{s: s, wake: make(chan struct{}, 1)}
		s.sinks = append(s.sinks, k)
		_, e := s.b.Subscribe(SubscribeRequest{Queue: words[0], Credit: uint32(num(opts, "credit")), ConsumerID: words[1],
			ManagedCredit: opts["credit"] == ""}, k)
		return result(e)
	case "deliveries":
		return s.deliveries(int(num(opts, "n")))
	case "ack", "nack", "extend":
		return s.settle(d.Cmd, words, opts)
	case "metrics":
		return s.metrics(words)
	case "redrive":
		res, e := s.b.Redrive(words[0], 0, 0)
		n := res.Redriven
		return fmt.Sprintf("%s redriven=%d", result(e), n)
	case "advance":
		dur, err := time.ParseDuration(words[0])
		if err != nil {
			return err.Error()
		}
		s.advanceClock(dur)
		return "ok"
	case "stats":
		res, e := s.b.GetStats(words[0])
		if e != nil {
			return result(e)
		}
		out := fmt.Sprintf("depth=%d in_flight=%d delayed=%d", res.Depth, res.InFlight, res.Delayed)
		if res.OrderingGroups > 0 || res.BlockedGroups > 0 {
			out += fmt.Sprintf(" groups=%d blocked=%d", res.OrderingGroups, res.BlockedGroups)
		}
		return out
	case "fail-commits":
		s.reloads = s.reloadCount()
		s.mem.FailCommits(int(num(map[string]string{"n": words[0]}, "n")))
		return "ok"
	case "wait-reload":
		s.waitReload()
		return "ok"
	case "lose-body":
		s.mem.LoseBody(words[0], storage.ID(s.id(words[1])))
		return "ok"
	case "crash":
		s.mem.Crash()
		s.b.Close()
		s.b = nil
		s.mem.Restart()
		return "ok"
	}
	s.t.Fatalf("unknown command %s", d.Cmd)
	return ""
}

func result(e *Error) string {
	if e != nil {
		return "error: " + e.Code.String()
	}
	return CodeOk.String()
}

func (s *script) enqueue(words []string, opts map[string]string, wait bool) string {
	var msgs []Message
	for _, p := range words[1:] {
		m := Message{Queue: words[0], Payload: []byte(p), FairnessKey: opts["key"], DelayMs: num(opts, "delay")}
		if k := opts["idem"]; k != "" {
			m.IdempotencyKey, m.HasKey = k, true
		}
		if h := opts["hdr"]; h != "" {
			m.Headers = map[string]string{}
			for _, kv := range strings.Split(h, ";") {
				k, v, _ := strings.Cut(kv, ":")
				m.Headers[k] = v
			}
		}
		msgs = append(msgs, m)
	}
	ch := make(chan string, 1)
	s.b.Enqueue(msgs, func(res []EnqueueResult, e *Error) {
		if e != nil {
			ch <- result(e)
			return
		}
		var out []string
		for _, r := range res {
			switch {
			case r.Code != CodeOk:
				out = append(out, r.Code.String())
			case r.Duplicate:
				out = append(out, "duplicate of "+s.label(wire.UUID(r.ID)))
			default:
				out = append(out, s.label(wire.UUID(r.ID)))
			}
		}
		ch <- strings.Join(out, " ")
	})
	if !wait {
		return ""
	}
	return <-ch
}

// scriptKey parses a key written as parts "kind[:name]" joined by "," (kinds as keys.Kind
// prints them).
func scriptKey(text string) keys.Key {
	var k keys.Key
	for _, p := range strings.Split(text, ",") {
		if p == "" {
			continue
		}
		kind, name, _ := strings.Cut(p, ":")
		for i := keys.Header; i <= keys.HeadersHash; i++ {
			if i.String() == kind {
				k = append(k, keys.Part{Kind: i, Name: name})
			}
		}
	}
	return k
}

func (s *script) settle(cmd string, words []string, opts map[string]string) string {
	q := words[0]
	ch := make(chan string, 1)
	codes := func(cs []Code, e *Error) {
		if e != nil {
			ch <- result(e)
			return
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.String())
		}
		ch <- strings.Join(out, " ")
	}
	switch cmd {
	case "ack":
		var items []AckItem
		for _, l := range words[1:] {
			items = append(items, AckItem{Queue: q, ID: MessageID(s.id(l))})
		}
		s.b.Ack(items, codes)
	case "nack":
		var items []NackItem
		for _, l := range words[1:] {
			it := NackItem{Queue: q, ID: MessageID(s.id(l)), Error: "boom"}
			if _, ok := opts["retry"]; ok {
				it.RetryAfterMs, it.HasRetryAfter = num(opts, "retry"), true
			}
			items = append(items, it)
		}
		s.b.Nack(items, codes)
	default:
		var items []ExtendItem
		for _, l := range words[1:] {
			items = append(items, ExtendItem{Queue: q, ID: MessageID(s.id(l)), ExtendByMs: num(opts, "by")})
		}
		s.b.ExtendLease(items, func(rs []ExtendResult, e *Error) {
			var cs []Code
			for _, r := range rs {
				cs = append(cs, r.Code)
			}
			codes(cs, e)
		})
	}
	return <-ch
}

// fakeTimer fires when the script's clock passes its deadline.
type fakeTimer struct {
	s  *script
	c  chan time.Time
	at time.Time
	on bool
}

// advanceClock moves the clock by d, fires the timers due by then and waits until the broker
// has settled.
func (s *script) advanceClock(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	for _, t := range s.timers {
		t.fireBy(s.now)
	}
	s.mu.Unlock()
	s.settled()
}

func (s *script) newTimer(d time.Duration) Timer {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &fakeTimer{s: s, c: make(chan time.Time, 1), at: s.now.Add(d), on: true}
	s.timers = append(s.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	was := t.on
	t.at, t.on = t.s.now.Add(d), true
	t.fireBy(t.s.now)
	return was
}

func (t *fakeTimer) Stop() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	was := t.on
	t.on = false
	select {
	case <-t.c:
	default:
	}
	return was
}

// fireBy fires the timer if it is due at now; the caller holds s.mu.
func (t *fakeTimer) fireBy(now time.Time) {
	if t.on && !now.Before(t.at) {
		t.on = false
		select {
		case t.c <- now:
		default:
		}
	}
}

func (s *script) deliveries(n int) string {
	deadline := time.Now().Add(5 * time.Second)
	var got []service.Delivery
	for {
		got = got[:0]
		for _, k := range s.sinks {
			k.mu.Lock()
			got = append(got, k.got...)
			k.mu.Unlock()
		}
		if len(got) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, k := range s.sinks {
		k.mu.Lock()
		k.got = nil
		k.mu.Unlock()
	}
	lines := make([]string, len(got))
	for i, m := range got {
		lines[i] = fmt.Sprintf("%s %s %q attempt=%d key=%s", m.Queue, s.label(wire.UUID(m.ID)), m.Payload, m.Attempt, m.FairnessKey)
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "\n")
}

// metrics prints the samples of the named series: gauges and counters as name{labels} value,
// histograms as their count and sum.
func (s *script) metrics(names []string) string {
	families, err := s.reg.Gather()
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, f := range families {
		if !slices.Contains(names, strings.TrimPrefix(f.GetName(), "fila_")) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			line := strings.TrimPrefix(f.GetName(), "fila_") + "{" + strings.Join(labels, ",") + "} "
			switch {
			case m.Histogram != nil:
				line += fmt.Sprintf("count=%d sum=%g", m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum())
			case m.Counter != nil:
				line += fmt.Sprint(m.Counter.GetValue())
			default:
				line += fmt.Sprint(m.Gauge.GetValue())
			}
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
