package transport

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// testIdle is how long a queue goes without requests before it hibernates in these tests.
const testIdle = 50 * time.Millisecond

// startIdle runs a server on dir whose queues hibernate after testIdle; stop shuts it down
// cleanly.
func startIdle(t *testing.T, dir string) (addr string, b *broker.Broker, stop func()) {
	t.Helper()
	return startIdleWith(t, dir, func(*broker.Options) {})
}

// startIdleWith is startIdle with changed broker options.
func startIdleWith(t *testing.T, dir string, set func(*broker.Options)) (addr string, b *broker.Broker, stop func()) {
	t.Helper()
	o := broker.DefaultOptions(dir)
	o.Sync = false
	o.IdleTimeout = testIdle
	set(&o)
	_, b, addr, stop = serveAt(t, o, Options{})
	return addr, b, stop
}

// eventually waits until cond holds (it polls; the deadline only guards against a hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after 30 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func asleep(t *testing.T, b *broker.Broker) {
	t.Helper()
	eventually(t, "every queue hibernates", func() bool { return b.AwakeQueues() == 0 })
}

// Idle queues cost no goroutine: 300 queues run ~6 goroutines each while awake and none once
// they hibernate; stats and listings answer without waking them.
func TestIdleQueuesCostNoGoroutine(t *testing.T) {
	const n = 300
	addr, b, stop := startIdle(t, t.TempDir())
	defer stop()
	c := dialRaw(t, addr)
	c.Handshake()
	base := runtime.NumGoroutine()
	for i := range n {
		newQueue(t, c, &fibp.CreateQueue{Name: fmt.Sprintf("q%d", i)})
	}
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q7", Payload: []byte("x")})
	asleep(t, b)
	eventually(t, "the goroutines of hibernated queues end", func() bool { return runtime.NumGoroutine() < base+20 })

	list := c.Call(1, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
	if len(list.Queues) != 2*n {
		t.Fatalf("%d queues listed, want %d", len(list.Queues), 2*n)
	}
	for _, q := range list.Queues {
		if want := uint64(0); q.Name == "q7" {
			if q.Depth != 1 {
				t.Fatalf("q7 lists depth %d while asleep, want 1", q.Depth)
			}
		} else if q.Depth != want {
			t.Fatalf("%s lists depth %d", q.Name, q.Depth)
		}
	}
	if s := stats(t, c, "q7"); s.Depth != 1 { // with the settings (the definition)
		t.Fatalf("stats of a sleeping queue: depth %d, want 1", s.Depth)
	}
	if got := b.AwakeQueues(); got != 0 {
		t.Fatalf("reads woke %d queues", got)
	}
}

// A hibernated queue wakes for an enqueue, a consumer, a delayed message coming due and a lease
// running out.
func TestHibernatedQueueWakes(t *testing.T) {
	addr, b, stop := startIdle(t, t.TempDir())
	defer stop()
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "w", VisibilityTimeoutMs: 400})
	asleep(t, b)

	t.Run("enqueue", func(t *testing.T) {
		enqueue(t, c, fibp.EnqueueMessage{Queue: "w", Payload: []byte("a")})
		if s := stats(t, c, "w"); s.Depth != 1 {
			t.Fatalf("depth %d after an enqueue to a sleeping queue", s.Depth)
		}
		asleep(t, b)
	})
	t.Run("consume, then the lease runs out asleep", func(t *testing.T) {
		consumer := dialRaw(t, addr)
		consumer.Handshake()
		consumer.Subscribe(3, "w", 1)
		if d := consumer.Deliveries(1)[0]; string(d.Payload) != "a" {
			t.Fatalf("delivered %q", d.Payload)
		}
		consumer.NC.Close() // the lease stays until it runs out
		asleep(t, b)
		// The sleeping queue answers from its summary: the lease is still out until the
		// queue wakes at its end.
		eventually(t, "the lease expires while the queue sleeps", func() bool {
			s := stats(t, c, "w")
			return s.InFlight == 0 && s.Depth == 1
		})
	})
	t.Run("a delayed message comes due", func(t *testing.T) {
		newQueue(t, c, &fibp.CreateQueue{Name: "d"})
		asleep(t, b)
		enqueue(t, c, fibp.EnqueueMessage{Queue: "d", Payload: []byte("later"), DelayMs: wire.Some[uint64](400)})
		asleep(t, b)
		if s := stats(t, c, "d"); s.Delayed != 1 {
			t.Fatalf("delayed %d asleep, want 1", s.Delayed)
		}
		eventually(t, "the delayed message is promoted by the queue's wake-up", func() bool {
			s := stats(t, c, "d")
			return s.Delayed == 0 && s.Depth == 1
		})
	})
}

// A restart opens only the groups that have something due: the others are registered asleep
// from their stored summaries and answer listings without opening; a due wake-up still comes.
func TestRestartWithManyQueuesIsLazy(t *testing.T) {
	const n = 200
	dir := t.TempDir()
	// The broker's clock moves only when the test says: q2's delayed message cannot come due
	// while a loaded machine restarts 200 queues (which would rightly open q2).
	clock := newFakeClock()
	withClock := func(o *broker.Options) { o.Clock = clock.Now }
	addr, b, stop := startIdleWith(t, dir, withClock)
	c := dialRaw(t, addr)
	c.Handshake()
	for i := range n {
		newQueue(t, c, &fibp.CreateQueue{Name: fmt.Sprintf("q%d", i)})
	}
	enqueue(t, c, fibp.EnqueueMessage{Queue: "q1", Payload: []byte("x")},
		fibp.EnqueueMessage{Queue: "q2", Payload: []byte("y"), DelayMs: wire.Some[uint64](1500)})
	clock.Advance(2 * testIdle)
	asleep(t, b)
	stop()

	addr, b, stop = startIdleWith(t, dir, withClock)
	defer stop()
	if got := b.AwakeQueues(); got != 0 {
		t.Fatalf("the restart opened %d queue groups, want none", got)
	}
	c = dialRaw(t, addr)
	c.Handshake()
	list := c.Call(1, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
	depth := map[string]uint64{}
	for _, q := range list.Queues {
		depth[q.Name] = q.Depth
	}
	if len(depth) != 2*n || depth["q1"] != 1 || depth["q2"] != 1 || depth["q3"] != 0 {
		t.Fatalf("after the restart: %d queues, q1 %d, q2 %d", len(depth), depth["q1"], depth["q2"])
	}
	if got := b.AwakeQueues(); got != 0 {
		t.Fatalf("listing woke %d queue groups", got)
	}
	clock.Advance(1500 * time.Millisecond)
	eventually(t, "q2's delayed message comes due after the restart", func() bool {
		return stats(t, c, "q2").Delayed == 0
	})
	c.Subscribe(5, "q1", 1)
	if d := c.Deliveries(1)[0]; string(d.Payload) != "x" {
		t.Fatalf("delivered %q after a lazy restart", d.Payload)
	}
}

// A broker closed cleanly stores the summary of every queue that could sleep, even one that
// never hibernates: the next start opens none of them.
func TestCleanCloseStoresSummaries(t *testing.T) {
	dir := t.TempDir()
	o := broker.DefaultOptions(dir)
	o.IdleTimeout = -1 // never hibernates: no summary is written while it runs
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if e := b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	if b.AwakeQueues() != 1 {
		t.Fatalf("awake %d", b.AwakeQueues())
	}
	b.Close()
	o.IdleTimeout = testIdle
	b, err = broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// Closed cleanly with nothing out, it stored a summary at close: asleep at start.
	if b.AwakeQueues() != 0 {
		t.Fatalf("awake %d after a clean close", b.AwakeQueues())
	}
}
