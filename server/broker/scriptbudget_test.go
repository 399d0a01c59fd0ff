package broker

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/filamq/fila/server/service"
)

// spinHook loops for ever on a message with a spin header (each call then uses its whole
// lua.timeout_ms), and fails at once on the others.
const spinHook = `
function on_enqueue(msg)
  if msg.headers.spin then while true do end end
  error("not yet")
end`

// openForBudgets opens a broker on the script's fake clock that never hibernates, with the
// runtime config given.
func openForBudgets(t *testing.T, config map[string]string) *script {
	t.Helper()
	s := newScript(t)
	t.Cleanup(s.close)
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	for k, v := range config {
		if e := b.SetConfig(k, v); e != nil {
			t.Fatalf("SetConfig %s: %v", k, e)
		}
	}
	return s
}

func (s *script) create(spec QueueSpec) {
	s.t.Helper()
	if e := s.b.CreateQueue(spec); e != nil {
		s.t.Fatalf("CreateQueue %s: %v", spec.Name, e)
	}
}

// enqueueN enqueues n messages with headers to queue and returns the results.
func (s *script) enqueueN(queue string, n int, headers map[string]string) []EnqueueResult {
	s.t.Helper()
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Queue: queue, Headers: headers, Payload: []byte(strconv.Itoa(i))}
	}
	ch := make(chan []EnqueueResult, 1)
	s.b.Enqueue(msgs, func(res []EnqueueResult, e *Error) {
		if e != nil {
			res = make([]EnqueueResult, n)
			for i := range res {
				res[i].Code = e.Code
			}
		}
		ch <- res
	})
	return <-ch
}

func (s *script) stats(queue string) QueueStats {
	s.t.Helper()
	st, e := s.b.GetStats(queue)
	if e != nil {
		s.t.Fatalf("GetStats %s: %v", queue, e)
	}
	return st
}

// A reclassification pass spends at most lua.reclassify_budget_ms (plus one call): each try of
// the spinning hook uses its 10 ms, so a 30 ms pass tries a few of 40 parked messages (each
// dead-lettered at its first failed try), and the passes that follow, one budget apart, go on
// where the last one stopped until every message was tried. Before, one pass ran the script on
// every parked message (a backlog of thousands stalled its queue for tens of seconds).
func TestAReclassificationPassKeepsToItsBudget(t *testing.T) {
	s := openForBudgets(t, map[string]string{"lua.timeout_ms": "10", "lua.reclassify_budget_ms": "30",
		"lua.reclassify_interval_ms": "1000"})
	s.create(QueueSpec{Name: "p", OnEnqueueScript: spinHook, HasOnEnqueue: true, ScriptFailure: service.ScriptFailurePark,
		ParkDeadLetterAfter: 1})
	for _, r := range s.enqueueN("p", 40, map[string]string{"spin": "1"}) {
		if r.Code != CodeOk {
			t.Fatalf("a message of a parking queue was refused: %v", r.Code)
		}
	}
	if st := s.stats("p"); st.Unclassified != 40 {
		t.Fatalf("%d of 40 parked", st.Unclassified)
	}
	s.advanceClock(1000 * time.Millisecond)
	tried := s.stats("p.dlq").Depth
	if tried < 1 || tried > 8 {
		t.Fatalf("the first pass tried %d of 40 spinning messages, want 1 to 8 (30 ms at 10 ms a try)", tried)
	}
	passes := 1
	for ; passes < 200 && s.stats("p.dlq").Depth < 40; passes++ {
		s.advanceClock(30 * time.Millisecond)
	}
	if st := s.stats("p"); st.Unclassified != 0 || s.stats("p.dlq").Depth != 40 {
		t.Fatalf("after %d passes: %d still parked, %d dead-lettered", passes, st.Unclassified, s.stats("p.dlq").Depth)
	}
	if passes < 40/8 {
		t.Fatalf("40 messages were tried in %d passes", passes)
	}
}

// Parked messages are retried with exponential backoff (1 s, 2 s, 4 s, then every 4 s here) and,
// on a queue created with park_dead_letter_after 0, dead-lettered after
// defaults.park_dead_letter_after (10) failed tries: the tenth try comes 35 s after parking.
// Before, 0 meant never and every pass tried every parked message.
func TestParkedMessagesBackOffAndAreDeadLetteredByDefault(t *testing.T) {
	s := openForBudgets(t, map[string]string{"lua.reclassify_interval_ms": "1000", "lua.reclassify_max_interval_ms": "4000"})
	s.create(QueueSpec{Name: "p", OnEnqueueScript: spinHook, HasOnEnqueue: true, ScriptFailure: service.ScriptFailurePark})
	s.enqueueN("p", 1, nil)
	for at := 1; at <= 34; at++ {
		s.advanceClock(1000 * time.Millisecond)
		if st := s.stats("p"); st.Unclassified != 1 {
			t.Fatalf("%d s after parking: %d parked, want 1 (the tenth try is due at 35 s)", at, st.Unclassified)
		}
	}
	s.advanceClock(1000 * time.Millisecond)
	if st, dlq := s.stats("p"), s.stats("p.dlq"); st.Unclassified != 0 || dlq.Depth != 1 {
		t.Fatalf("at 35 s: %d parked, %d dead-lettered; want the message dead-lettered", st.Unclassified, dlq.Depth)
	}
}

// The default is runtime config; 0 there keeps parked messages for ever.
func TestParkDeadLetterAfterDefaultZeroIsNever(t *testing.T) {
	s := openForBudgets(t, map[string]string{"lua.reclassify_interval_ms": "1000", "lua.reclassify_max_interval_ms": "1000",
		"defaults.park_dead_letter_after": "0"})
	s.create(QueueSpec{Name: "p", OnEnqueueScript: spinHook, HasOnEnqueue: true, ScriptFailure: service.ScriptFailurePark})
	s.enqueueN("p", 1, nil)
	for range 30 {
		s.advanceClock(1000 * time.Millisecond)
	}
	if st := s.stats("p"); st.Unclassified != 1 {
		t.Fatalf("after 30 failed tries: %d parked, want 1", st.Unclassified)
	}
}

// The budget's cost per script call: what classifyAll adds to each on_enqueue (two reads of the
// wall clock and a comparison; the CPU clock only once the calls' sum reaches the limit).
func BenchmarkScriptBudgetPerCall(b *testing.B) {
	var s scriptBudget
	s.begin(time.Hour)
	defer s.end()
	for b.Loop() {
		if !s.left() {
			b.Fatal("budget spent")
		}
		start := time.Now()
		s.add(time.Since(start))
	}
}

// Every message the request budget left no time for is counted in
// fila_script_over_budget_total.
func TestOverBudgetMessagesAreCounted(t *testing.T) {
	s := newScript(t)
	t.Cleanup(s.close)
	reg := prometheus.NewRegistry()
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: -1, Registry: reg,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	for k, v := range map[string]string{"lua.timeout_ms": "10", "lua.request_budget_ms": "30"} {
		if e := b.SetConfig(k, v); e != nil {
			t.Fatal(e)
		}
	}
	s.create(QueueSpec{Name: "q", OnEnqueueScript: spinHook, HasOnEnqueue: true})
	refused := 0
	for _, r := range s.enqueueN("q", 50, map[string]string{"spin": "1"}) {
		if r.Code == CodeChannelFull {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("no message was refused for the budget")
	}
	if got := testutil.ToFloat64(b.metrics.overBudget.WithLabelValues("q")); got != float64(refused) {
		t.Fatalf("fila_script_over_budget_total{queue=q} = %v, want the %d refused", got, refused)
	}
}
