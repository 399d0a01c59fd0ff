package broker

import (
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/filamq/fila/server/membudget"
)

// keyed enqueues one message per key to queue and returns the result codes in order.
func (s *script) keyed(queue string, keys ...string) []EnqueueResult {
	s.t.Helper()
	msgs := make([]Message, len(keys))
	for i, k := range keys {
		msgs[i] = Message{Queue: queue, Payload: []byte(k), IdempotencyKey: k, HasKey: true}
	}
	ch := make(chan []EnqueueResult, 1)
	s.b.Enqueue(msgs, func(res []EnqueueResult, e *Error) {
		if e != nil {
			res = make([]EnqueueResult, len(keys))
			for i := range res {
				res[i].Code = e.Code
			}
		}
		ch <- res
	})
	return <-ch
}

func keysFrom(prefix string, n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = prefix + strconv.Itoa(i)
	}
	return ks
}

func codes(res []EnqueueResult) map[Code]int {
	m := map[Code]int{}
	for _, r := range res {
		m[r.Code]++
	}
	return m
}

// The identities a queue remembers are bounded per queue and per node and counted in the memory
// budget at identityBytes each: a message with a new identity past a bound is refused
// ChannelFull (duplicates are still answered, messages without one still stored), and the room
// comes back as the windows end. Before, every identity was kept for its whole window, without a
// bound and outside the budget.
func TestDedupMemoryIsBoundedAndCounted(t *testing.T) {
	s := newScript(t)
	t.Cleanup(s.close)
	budget := membudget.New(1 << 30)
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: -1, MemoryBudget: budget,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	for k, v := range map[string]string{"dedup.max_identities_per_queue": "5", "dedup.max_identities": "8"} {
		if e := b.SetConfig(k, v); e != nil {
			t.Fatal(e)
		}
	}
	s.create(QueueSpec{Name: "a", DedupWindowMs: 1000})
	s.create(QueueSpec{Name: "b", DedupWindowMs: 1000})

	res := s.keyed("a", keysFrom("a", 7)...)
	if c := codes(res); c[CodeOk] != 5 || c[CodeChannelFull] != 2 || res[5].Code != CodeChannelFull {
		t.Fatalf("7 new identities on a queue bounded at 5: %v", c)
	}
	if dup := s.keyed("a", "a0")[0]; dup.Code != CodeOk || !dup.Duplicate || dup.ID != res[0].ID {
		t.Fatalf("a duplicate at the bound: %+v", dup)
	}
	if got := s.enqueueN("a", 1, nil)[0]; got.Code != CodeOk {
		t.Fatalf("a message without an identity at the bound: %v", got.Code)
	}
	if c := codes(s.keyed("b", keysFrom("b", 5)...)); c[CodeOk] != 3 || c[CodeChannelFull] != 2 {
		t.Fatalf("5 new identities with 3 left on the node: %v", c)
	}
	if n, used := b.RememberedIdentities(), budget.Used(); n != 8 || used != 8*identityBytes {
		t.Fatalf("8 identities remembered: counted %d, %d bytes of the memory budget", n, used)
	}

	s.advanceClock(1000 * time.Millisecond) // every window ends
	if n, used := b.RememberedIdentities(), budget.Used(); n != 0 || used != 0 {
		t.Fatalf("after the windows: counted %d, %d bytes", n, used)
	}
	if c := codes(s.keyed("a", keysFrom("a", 5)...)); c[CodeOk] != 5 {
		t.Fatalf("after the windows: %v", c)
	}
	if e := b.DeleteQueue("a"); e != nil {
		t.Fatal(e)
	}
	if n, used := b.RememberedIdentities(), budget.Used(); n != 0 || used != 0 {
		t.Fatalf("after the queue was deleted: counted %d, %d bytes", n, used)
	}
}

// The identities take at most half the memory budget: past it new ones are refused, and the
// connections still have the other half (a budget the identities had filled would cut the next
// connection to read a frame).
func TestDedupTakesAtMostHalfTheMemoryBudget(t *testing.T) {
	s := newScript(t)
	t.Cleanup(s.close)
	budget := membudget.New(6 * identityBytes)
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: -1, MemoryBudget: budget,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	s.create(QueueSpec{Name: "a"})
	if c := codes(s.keyed("a", keysFrom("k", 5)...)); c[CodeOk] != 3 || c[CodeChannelFull] != 2 {
		t.Fatalf("5 identities in half a budget of 6: %v", c)
	}
	cut := false
	conn := budget.Open(1<<20, func() { cut = true })
	if err := conn.Reserve(3 * identityBytes); err != nil || cut {
		t.Fatalf("a connection's reservation of the other half: %v (cut %v)", err, cut)
	}
}

// Windows have a maximum of 7 days: a longer one is refused InvalidConfigValue by CreateQueue,
// UpdateQueue and defaults.dedup_window_ms. Before, a window of 2^63 ms was accepted.
func TestDedupWindowsHaveAMaximum(t *testing.T) {
	s := openForBudgets(t, nil)
	for _, w := range []uint64{MaxDedupWindowMs + 1, 1 << 63} {
		if e := s.b.CreateQueue(QueueSpec{Name: "q", DedupWindowMs: w}); e == nil || e.Code != CodeInvalidConfigValue {
			t.Fatalf("CreateQueue with a window of %d ms: %v", w, e)
		}
	}
	s.create(QueueSpec{Name: "q", DedupWindowMs: MaxDedupWindowMs})
	long := uint64(MaxDedupWindowMs + 1)
	if e := s.b.UpdateQueue(QueueUpdate{Queue: "q", DedupWindowMs: &long}); e == nil || e.Code != CodeInvalidConfigValue {
		t.Fatalf("UpdateQueue to a window of %d ms: %v", long, e)
	}
	if e := s.b.SetConfig("defaults.dedup_window_ms", strconv.FormatUint(long, 10)); e == nil || e.Code != CodeInvalidConfigValue {
		t.Fatalf("defaults.dedup_window_ms of %d: %v", long, e)
	}
}
