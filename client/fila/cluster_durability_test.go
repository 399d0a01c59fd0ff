package fila_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Delivery durability across failover, on three real fila-server processes (clustering.md,
// "Delivery durability"): a committed queue's new leader honours every lease the old one gave,
// and never ends one before the lease_expires_at the consumer was told; a fast queue's new leader
// delivers none of the messages that were pending when it took over until its reclaim grace has
// passed, and takes Ack, Nack and ExtendLease for them meanwhile. Every wait is a poll with a
// deadline; the only times asserted are lower bounds (nothing delivered before ...).

// seenDelivery is one delivery a recorder saw, with the local time it arrived.
type seenDelivery struct {
	who     string
	payload string
	at      time.Time
	attempt uint32
}

// recorder keeps every delivery of the subscriptions it follows, acking each one (so that credit
// keeps flowing and a redelivered message is delivered only once more).
type recorder struct {
	t    *testing.T
	mu   sync.Mutex
	seen []seenDelivery
	wg   sync.WaitGroup
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{t: t}
	t.Cleanup(r.wg.Wait)
	return r
}

// follow records s's deliveries until it is closed (the caller closes it, or its Cluster).
func (r *recorder) follow(who string, s *fila.ClusterConsumer) {
	r.wg.Go(func() {
		for d := range s.C() {
			r.mu.Lock()
			r.seen = append(r.seen, seenDelivery{who: who, payload: string(d.Payload), at: time.Now(), attempt: d.AttemptCount})
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), serverWait)
			_ = d.Ack(ctx) // MessageNotFound after a failover is documented; the assertions look at deliveries
			cancel()
		}
	})
}

// of returns the deliveries of payload so far.
func (r *recorder) of(payload string) []seenDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []seenDelivery
	for _, s := range r.seen {
		if s.payload == payload {
			out = append(out, s)
		}
	}
	return out
}

// order returns the payloads delivered to who, in the order they arrived.
func (r *recorder) order(who string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		if s.who == who {
			out = append(out, s.payload)
		}
	}
	return out
}

// waitFor polls until every payload was delivered at least once, for at most serverWait past
// until (a safety net: the deliveries are due at until at the latest).
func (r *recorder) waitFor(until time.Time, payloads ...string) {
	r.t.Helper()
	deadline := until.Add(serverWait)
	for {
		missing := ""
		for _, p := range payloads {
			if len(r.of(p)) == 0 {
				missing = p
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s not delivered by %v; deliveries: %q", missing, deadline.Format(time.TimeOnly), r.all())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// all describes every delivery so far, for failure messages and logs.
func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.seen {
		out = append(out, fmt.Sprintf("%s to %s at %s (attempt %d)", s.payload, s.who, s.at.Format("15:04:05.000"), s.attempt))
	}
	return out
}

// createQueueWith creates a queue through any node with cfg, then applies u when it is not nil
// (a live queue's durability changed by UpdateQueue).
func createQueueWith(t *testing.T, tc *testCluster, cfg fila.QueueConfig, u *fila.QueueUpdate) {
	t.Helper()
	admin := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	any, err := admin.Any(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := any.CreateQueue(ctx, cfg); err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	if u != nil {
		if err := any.UpdateQueue(ctx, cfg.Name, *u); err != nil {
			t.Fatalf("UpdateQueue: %v", err)
		}
	}
}

// waitDurability polls until the leader of queue (as c last heard it) runs it with durability
// want ("committed" or "fast"): UpdateQueue answers once the node that took it applied the
// change, and the queue's leader, elsewhere, takes it when its copy of the catalog catches up.
func waitDurability(t *testing.T, c *fila.Cluster, queue, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	for {
		var got string
		if addr, ok := c.Route(queue); ok {
			if n, err := c.Node(ctx, addr); err == nil {
				if st, err := n.GetStats(ctx, queue); err == nil {
					got = st.Settings["delivery_durability"]
				}
			}
		}
		if got == want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the leader of %s runs it with delivery_durability %q, not %q", queue, got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// enqueueAll enqueues one message per payload through c; every one must be answered Ok.
func enqueueAll(t *testing.T, c *fila.Cluster, queue string, payloads ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	msgs := make([]fila.Message, len(payloads))
	for i, p := range payloads {
		msgs[i] = fila.Message{Queue: queue, Payload: []byte(p), IdempotencyKey: p}
	}
	res, err := c.Enqueue(ctx, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue of %s: %v", payloads[i], r.Err)
		}
	}
}

// leaseAll subscribes to queue through c, without lease keep-alive, and takes n deliveries,
// returned by payload. The subscription stays open.
func leaseAll(t *testing.T, c *fila.Cluster, queue string, n int) (*fila.ClusterConsumer, map[string]*fila.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	sub, err := c.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: uint32(n), DisableLeaseKeepAlive: true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*fila.Delivery{}
	for len(got) < n {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d deliveries: %v", len(got), err)
		}
		got[string(d.Payload)] = d
	}
	return sub, got
}

// killLeader kills (SIGKILL) the node that delivered sub's messages and returns when it was
// killed. That is the node of sub's first subscription: one that moved already (the queue's
// leadership changed right after it was created) may have been sent them by another.
func killLeader(t *testing.T, tc *testCluster, sub *fila.ClusterConsumer) time.Time {
	t.Helper()
	if m := sub.Moves(); m > 0 {
		t.Fatalf("the subscription moved %d times before the kill: its deliveries may come from a node still up", m)
	}
	n := tc.byAddr(sub.Node())
	n.p.Kill()
	t.Logf("node %d, leading the queue, killed", n.id)
	return time.Now()
}

// waitUntil polls the clock until at has passed.
func waitUntil(at time.Time) {
	for time.Now().Before(at) {
		time.Sleep(20 * time.Millisecond)
	}
}

// A committed queue (made committed by UpdateQueue from fast) keeps its leases through a kill -9
// of its leader: the new leader delivers a leased message to nobody before the lease_expires_at
// its first consumer was told; that consumer's Ack, sent through the Cluster to the new leader,
// answers Ok and the message is not delivered again; its ExtendLease on the new leader answers
// Ok with an expiry no earlier than the first.
func TestClusterCommittedLeasesSurviveALeaderKill(t *testing.T) {
	const vis = 6 * time.Second
	tc := startTestCluster(t)
	committed := fila.DeliveryDurabilityCommitted
	createQueueWith(t, tc, fila.QueueConfig{Name: "leases", VisibilityTimeout: vis, DeliveryDurability: fila.DeliveryDurabilityFast},
		&fila.QueueUpdate{DeliveryDurability: &committed})
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "leases", "unsettled", "acked", "extended")
	waitDurability(t, prod, "leases", "committed")
	a := dialTestCluster(t, tc.seeds(), nil)
	subA, held := leaseAll(t, a, "leases", 3)
	defer subA.Close()
	rec := newRecorder(t)
	rec.follow("A", subA) // after the failover A subscribes on the new leader, and may be sent them again
	killLeader(t, tc, subA)

	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	if err := held["acked"].Ack(ctx); err != nil {
		t.Fatalf("Ack on the new leader: %v", err)
	}
	ext := held["extended"]
	expires, err := ext.Extend(ctx, vis)
	if err != nil {
		t.Fatalf("ExtendLease on the new leader: %v", err)
	}
	if expires.Before(ext.LeaseExpiresAt) {
		t.Fatalf("ExtendLease on the new leader: expiry %v, before the first lease's %v", expires, ext.LeaseExpiresAt)
	}
	if err := ext.Ack(ctx); err != nil {
		t.Fatalf("Ack of the extended message on the new leader: %v", err)
	}
	b := dialTestCluster(t, tc.seeds(), nil)
	subB, err := b.Consume(ctx, "leases", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	subscribed := time.Now()
	rec.follow("B", subB)
	enqueueAll(t, prod, "leases", "after")

	// The unsettled message comes back to someone, once its lease has ended, never before.
	first := held["unsettled"].LeaseExpiresAt
	rec.waitFor(first, "unsettled", "after")
	for _, s := range rec.of("unsettled") {
		if s.at.Before(first) {
			t.Fatalf("the leased message was delivered again to %s at %v, before its lease_expires_at %v", s.who, s.at, first)
		}
	}

	// The settled ones never come back: a marker enqueued once every lease the new leader may
	// have restarted at its full duration has ended arrives after anything they would have been.
	waitUntil(subscribed.Add(vis + time.Second))
	enqueueAll(t, prod, "leases", "marker")
	rec.waitFor(time.Now(), "marker")
	for _, p := range []string{"acked", "extended"} {
		if s := rec.of(p); len(s) > 0 {
			t.Fatalf("%s delivered again after the failover (%d times); deliveries: %q", p, len(s), rec.all())
		}
	}
	t.Logf("deliveries after the kill: %q", rec.all())
}

// A fast queue (made fast by UpdateQueue from committed, with reclaim_grace_ms 3000) loses its
// leases with its leader: the new leader delivers none of the messages that were pending when it
// took over (leased or not) until the grace has passed, takes Ack, Nack and ExtendLease for them
// meanwhile (the extended one stays leased to the consumer that extended it), delivers a message
// enqueued after the takeover at once, and releases the unreclaimed ones when the grace ends.
func TestClusterFastLeasesAreHeldForTheReclaimGrace(t *testing.T) {
	const grace = 3 * time.Second
	tc := startTestCluster(t)
	fast, g := fila.DeliveryDurabilityFast, grace
	createQueueWith(t, tc, fila.QueueConfig{Name: "quick", VisibilityTimeout: time.Minute},
		&fila.QueueUpdate{DeliveryDurability: &fast, ReclaimGrace: &g})
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "quick", "acked", "nacked", "extended", "unreclaimed", "never-leased")
	waitDurability(t, prod, "quick", "fast")
	a := dialTestCluster(t, tc.seeds(), nil)
	subA, held := leaseAll(t, a, "quick", 4)
	defer subA.Close()
	rec := newRecorder(t)
	rec.follow("A", subA)
	killed := killLeader(t, tc, subA)

	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	for subA.Moves() == 0 { // A subscribes on the new leader: the extension re-establishes the lease for it
		if ctx.Err() != nil {
			t.Fatal("A's subscription did not move to the new leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := held["acked"].Ack(ctx); err != nil {
		t.Fatalf("Ack during the grace: %v", err)
	}
	retryNow := time.Duration(0)
	if err := held["nacked"].Nack(ctx, "failed", &retryNow); err != nil {
		t.Fatalf("Nack during the grace: %v", err)
	}
	if _, err := held["extended"].Extend(ctx, time.Minute); err != nil {
		t.Fatalf("ExtendLease during the grace: %v", err)
	}
	enqueueAll(t, prod, "quick", "after")
	enqueued := time.Now()

	rec.waitFor(killed.Add(grace), "nacked", "after", "unreclaimed", "never-leased")
	graceEnd := killed.Add(grace) // a lower bound: the new leader took over after the kill
	for _, p := range []string{"unreclaimed", "never-leased"} {
		for _, s := range rec.of(p) {
			if s.at.Before(graceEnd) {
				t.Fatalf("%s, pending at the takeover, delivered at %v, before the reclaim grace ended (after %v)", p, s.at, graceEnd)
			}
		}
	}
	order := rec.order("A")
	if enqueued.Before(graceEnd) && (len(order) == 0 || order[0] == "unreclaimed" || order[0] == "never-leased") {
		t.Fatalf("the message enqueued during the grace was not delivered before the held ones: %v", order)
	}
	// The held messages are released in enqueue order: the extended one would have come before
	// the unreclaimed one.
	for _, p := range []string{"acked", "extended"} {
		if s := rec.of(p); len(s) > 0 {
			t.Fatalf("%s delivered again after the failover (%d times); deliveries: %q", p, len(s), rec.all())
		}
	}
	if err := held["extended"].Ack(ctx); err != nil {
		t.Fatalf("Ack of the reclaimed message after the grace: %v", err)
	}
	t.Logf("A's deliveries after the kill, in order: %v", order)
}

// Killed all at once (kill -9) and started again, the nodes of a committed queue keep its lease:
// the leased message is delivered to nobody before the lease_expires_at its consumer was told.
func TestClusterCommittedLeaseSurvivesAWholeRestart(t *testing.T) {
	const vis = 8 * time.Second
	tc := startTestCluster(t)
	createQueueWith(t, tc, fila.QueueConfig{Name: "kept", VisibilityTimeout: vis}, nil)
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "kept", "leased")
	a := dialTestCluster(t, tc.seeds(), nil)
	subA, held := leaseAll(t, a, "kept", 1)
	subA.Close()
	a.Close()
	prod.Close()
	restartAll(t, tc)
	b := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	subB, err := b.Consume(ctx, "kept", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	expiry := held["leased"].LeaseExpiresAt
	t.Logf("subscribed after the restart %v before the lease's expiry", time.Until(expiry).Round(time.Millisecond))
	rec := newRecorder(t)
	rec.follow("B", subB)
	rec.waitFor(expiry, "leased")
	if s := rec.of("leased")[0]; s.at.Before(expiry) || s.attempt != 2 {
		t.Fatalf("after the restart the leased message was delivered at %v (attempt %d); its lease_expires_at was %v", s.at, s.attempt, expiry)
	}
}

// A queue created through a node can be updated through it at once: CreateQueue answers once the
// node's meta state machine (not only raft) applied the queue, so the UpdateQueue that follows
// finds it. Before, it answered QueueNotFound now and then on a node that follows the meta group.
func TestClusterUpdateRightAfterCreate(t *testing.T) {
	tc := startTestCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	c := dialTestCluster(t, tc.seeds(), nil)
	fast := fila.DeliveryDurabilityFast
	for round := range 5 {
		for _, n := range tc.nodes {
			cl, err := c.Node(ctx, n.addr)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("q%d-%d", round, n.id)
			if _, err := cl.CreateQueue(ctx, fila.QueueConfig{Name: name}); err != nil {
				t.Fatalf("CreateQueue %s on node %d: %v", name, n.id, err)
			}
			if err := cl.UpdateQueue(ctx, name, fila.QueueUpdate{DeliveryDurability: &fast}); err != nil {
				t.Fatalf("UpdateQueue %s on node %d right after its CreateQueue: %v", name, n.id, err)
			}
		}
	}
}

// restartAll kills every node at once (kill -9, as a power cut) and starts them again, and returns
// when it started them.
func restartAll(t *testing.T, tc *testCluster) time.Time {
	t.Helper()
	for _, n := range tc.nodes {
		n.p.Kill()
	}
	start := time.Now()
	errs := make([]error, len(tc.nodes))
	var wg sync.WaitGroup
	for i, n := range tc.nodes {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return start
}

// Killed all at once and started again, the nodes of a fast queue hold its pending messages, the
// one that was leased among them, for the reclaim grace from their start: nobody is sent them
// before it ends, and then they are delivered with no attempt counted.
func TestClusterFastLeasesAreHeldAfterAWholeRestart(t *testing.T) {
	const grace = 3 * time.Second
	tc := startTestCluster(t)
	createQueueWith(t, tc, fila.QueueConfig{Name: "held", VisibilityTimeout: time.Minute,
		DeliveryDurability: fila.DeliveryDurabilityFast, ReclaimGrace: grace}, nil)
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "held", "leased", "pending")
	waitDurability(t, prod, "held", "fast")
	a := dialTestCluster(t, tc.seeds(), nil)
	subA, _ := leaseAll(t, a, "held", 1)
	subA.Close()
	a.Close()
	prod.Close()
	started := restartAll(t, tc)
	b := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	subB, err := b.Consume(ctx, "held", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	t.Logf("subscribed %v after the restart began", time.Since(started).Round(time.Millisecond))
	rec := newRecorder(t)
	rec.follow("B", subB)
	graceEnd := started.Add(grace) // a lower bound: each node started after this
	rec.waitFor(graceEnd, "leased", "pending")
	for _, p := range []string{"leased", "pending"} {
		if s := rec.of(p)[0]; s.at.Before(graceEnd) || s.attempt != 1 {
			t.Fatalf("after the restart %s was delivered at %v (attempt %d), before the grace ended (after %v)", p, s.at, s.attempt, graceEnd)
		}
	}
}

// The SDK's lease keep-alive outlives a kill -9 of the queue's leader: once the node that
// delivered the message is gone, the extensions go to the new leader through the Cluster, so the
// lease of a committed queue never runs out while the consumer works — nobody else is sent the
// message long after its first lease_expires_at, its LeaseLost stays open, and its Ack works.
func TestClusterLeaseKeepAliveFollowsTheNewLeader(t *testing.T) {
	// Longer than a failover takes here (about 1-2.5 s): a lease that runs out before a new
	// leader is elected is over on the new leader too.
	const vis = 6 * time.Second
	tc := startTestCluster(t)
	createQueueWith(t, tc, fila.QueueConfig{Name: "kept-alive", VisibilityTimeout: vis}, nil)
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "kept-alive", "working")
	a := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	subA, err := a.Consume(ctx, "kept-alive", fila.ConsumeOptions{MaxUnacked: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	d, err := subA.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killLeader(t, tc, subA)
	b := dialTestCluster(t, tc.seeds(), nil)
	subB, err := b.Consume(ctx, "kept-alive", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	rec := newRecorder(t)
	rec.follow("B", subB)
	// Two lease durations past the first expiry: without keep-alive the lease would have run
	// out, and B been sent the message, well before.
	until := d.LeaseExpiresAt.Add(2 * vis)
	for time.Now().Before(until) {
		select {
		case <-d.LeaseLost():
			t.Fatalf("the lease was lost after the failover; deliveries: %q", rec.all())
		case <-time.After(20 * time.Millisecond):
		}
		if s := rec.of("working"); len(s) > 0 {
			t.Fatalf("the message kept alive was delivered again after the failover: %q", rec.all())
		}
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack after the failover: %v", err)
	}
}

// On a fast queue the SDK's keep-alive takes a lease back during the new leader's reclaim grace:
// once the node that delivered it is gone, the SDK extends it through the Cluster at once, so the
// message is not delivered again when the grace ends (a message nobody held is, and shows that
// the grace has ended), and its Ack works.
func TestClusterLeaseKeepAliveReclaimsAFastLease(t *testing.T) {
	const grace = 3 * time.Second
	tc := startTestCluster(t)
	createQueueWith(t, tc, fila.QueueConfig{Name: "reclaimed", VisibilityTimeout: time.Minute,
		DeliveryDurability: fila.DeliveryDurabilityFast, ReclaimGrace: grace}, nil)
	prod := dialTestCluster(t, tc.seeds(), nil)
	enqueueAll(t, prod, "reclaimed", "working", "waiting")
	waitDurability(t, prod, "reclaimed", "fast")
	a := dialTestCluster(t, tc.seeds(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	subA, err := a.Consume(ctx, "reclaimed", fila.ConsumeOptions{MaxUnacked: 1, MaxDeliveries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer subA.Close()
	d, err := subA.Next(ctx)
	if err != nil || string(d.Payload) != "working" {
		t.Fatalf("first delivery: %v %v", d, err)
	}
	rec := newRecorder(t)
	rec.follow("A", subA) // after the failover A subscribes on the new leader too
	killed := killLeader(t, tc, subA)
	b := dialTestCluster(t, tc.seeds(), nil)
	subB, err := b.Consume(ctx, "reclaimed", fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer subB.Close()
	rec.follow("B", subB)
	rec.waitFor(killed.Add(grace), "waiting") // held until the grace ended, then released in enqueue order
	if s := rec.of("working"); len(s) > 0 {
		t.Fatalf("the message kept alive was delivered again when the grace ended: %q", rec.all())
	}
	select {
	case <-d.LeaseLost():
		t.Fatal("the lease was lost after the failover")
	default:
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack after the grace: %v", err)
	}
}
