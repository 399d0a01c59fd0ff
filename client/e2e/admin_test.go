package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/generated/fibp"
)

// leaseOf is the lease duration of a delivery, measured between the server's own timestamps.
func leaseOf(d *fila.Delivery) time.Duration { return d.LeaseExpiresAt.Sub(d.LeasedAt) }

func TestCreateQueueEveryField(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{
		VisibilityTimeout:   time.Second,
		DedupWindow:         time.Minute,
		ScriptFailure:       fibp.ScriptFailurePark,
		ParkDeadLetterAfter: 3,
		MaxAttempts:         2,
		Backoff:             fibp.BackoffFixed,
		BackoffInitial:      150 * time.Millisecond,
		BackoffMax:          time.Second,
		DeliveryDurability:  fibp.DeliveryDurabilityFast,
		ReclaimGrace:        2 * time.Second,
	})

	// The dead-letter queue came with it.
	if st := getStats(t, c, q+".dlq"); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("new DLQ stats %+v", st)
	}
	l, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(l.Queues))
	for i, qi := range l.Queues {
		names[i] = qi.Name
	}
	if !slices.Contains(names, q) || !slices.Contains(names, q+".dlq") {
		t.Errorf("ListQueues %v lacks %q or its DLQ", names, q)
	}

	// The settings apply: a 1 s lease, a fixed 150 ms backoff, two attempts then the DLQ.
	ids := enqueue(t, c, fila.Message{Queue: q, Payload: []byte("every-field")})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	d1 := next(t, cons)
	if leaseOf(d1) != time.Second || d1.AttemptCount != 1 {
		t.Errorf("first delivery: lease %v attempt %d, want 1s and 1", leaseOf(d1), d1.AttemptCount)
	}
	if err := d1.Nack(ctx, "first failure", nil); err != nil {
		t.Fatal(err)
	}
	d2 := next(t, cons)
	if d2.ID != ids[0] || d2.AttemptCount != 2 {
		t.Errorf("retry = %v attempt %d, want %v attempt 2", d2.ID, d2.AttemptCount, ids[0])
	}
	if gap := d2.LeasedAt.Sub(d1.LeasedAt); gap < 150*time.Millisecond {
		t.Errorf("retried %v after the first lease; the fixed backoff is 150ms", gap)
	}
	if err := d2.Nack(ctx, "second failure", nil); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, q+".dlq", "depth 1 (max_attempts 2 exhausted)", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	if st := getStats(t, c, q); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("after dead-lettering, the queue's stats are %+v", st)
	}
}

func TestCreateQueueZerosAreDefaults(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("x")})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	if leaseOf(d) != 30*time.Second {
		t.Errorf("lease of a queue created with zeros = %v, want the 30s default", leaseOf(d))
	}
	if d.FairnessKey != "default" || d.Weight != 1 || d.AttemptCount != 1 || d.RedriveCount != 0 {
		t.Errorf("delivery %+v: want fairness key \"default\", weight 1, attempt 1, redrive 0", d)
	}
	if d.EnqueuedAt.IsZero() || d.LeasedAt.Before(d.EnqueuedAt) {
		t.Errorf("enqueued_at %v, leased_at %v", d.EnqueuedAt, d.LeasedAt)
	}
	ack(t, d)
}

func TestCreateQueueErrors(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{})

	_, err := c.CreateQueue(ctx, fila.QueueConfig{Name: q})
	wantCode(t, "CreateQueue of an existing name", err, fila.ErrQueueAlreadyExists)
	_, err = c.CreateQueue(ctx, fila.QueueConfig{Name: q + ".dlq"})
	wantCode(t, "CreateQueue of an existing DLQ's name", err, fila.ErrReservedQueueName)
	fresh := queueName(t)
	_, err = c.CreateQueue(ctx, fila.QueueConfig{Name: fresh + ".dlq"})
	wantCode(t, "CreateQueue of a name ending in .dlq", err, fila.ErrReservedQueueName)

	for _, tc := range []struct {
		name string
		cfg  fila.QueueConfig
		want *fila.Error
	}{
		{"empty name", fila.QueueConfig{Name: "-"}, fila.ErrInvalidConfigValue}, // Name replaced below
		{"name with a space", fila.QueueConfig{Name: "-"}, fila.ErrInvalidConfigValue},
		{"name of 256 bytes", fila.QueueConfig{Name: "-"}, fila.ErrInvalidConfigValue},
		{"backoff 9", fila.QueueConfig{Backoff: 9}, fila.ErrInvalidConfigValue},
		{"delivery_durability 5", fila.QueueConfig{DeliveryDurability: 5}, fila.ErrInvalidConfigValue},
		{"script_failure 7", fila.QueueConfig{ScriptFailure: 7}, fila.ErrInvalidConfigValue},
		{"when_ordering_key_missing 4", fila.QueueConfig{WhenOrderingKeyMissing: 4}, fila.ErrInvalidConfigValue},
		{"visibility over 12h", fila.QueueConfig{VisibilityTimeout: 13 * time.Hour}, fila.ErrInvalidConfigValue},
		{"exponential max below initial", fila.QueueConfig{Backoff: fibp.BackoffExponential,
			BackoffInitial: 2 * time.Second, BackoffMax: time.Second}, fila.ErrInvalidConfigValue},
		{"on_enqueue script that does not compile", fila.QueueConfig{OnEnqueueScript: "function on_enqueue(msg) return { end"}, fila.ErrLuaCompilation},
		{"on_failure script without on_failure", fila.QueueConfig{OnFailureScript: "function on_enqueue(msg) return {action = \"dlq\"} end"}, fila.ErrLuaCompilation},
	} {
		cfg := tc.cfg
		cfg.Name = queueName(t)
		switch tc.name {
		case "empty name":
			cfg.Name = ""
		case "name with a space":
			cfg.Name += " x"
		case "name of 256 bytes":
			cfg.Name += strings.Repeat("n", 256-len(cfg.Name))
		}
		_, err := c.CreateQueue(ctx, cfg)
		wantCode(t, "CreateQueue with "+tc.name, err, tc.want)
		if cfg.Name != "" {
			// Nothing was created, not even the DLQ.
			_, err = c.GetStats(ctx, cfg.Name)
			wantCode(t, "GetStats after a refused CreateQueue ("+tc.name+")", err, fila.ErrQueueNotFound)
			_, err = c.GetStats(ctx, cfg.Name+".dlq")
			wantCode(t, "GetStats of the DLQ after a refused CreateQueue ("+tc.name+")", err, fila.ErrQueueNotFound)
		}
	}
	// A script is refused with the compiler's message, line included, not just a code.
	_, err = c.CreateQueue(ctx, fila.QueueConfig{Name: queueName(t), OnEnqueueScript: "function on_enqueue(msg)\n  return nil +\nend"})
	if fe, ok := err.(*fila.Error); !ok || !strings.Contains(fe.Message, "line:3") {
		t.Errorf("LuaCompilationError without a message: %#v", err)
	}
}

func TestUpdateQueue(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 20 * time.Second, MaxAttempts: 3, Backoff: fibp.BackoffNone})
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("before")})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	before := next(t, cons)
	if leaseOf(before) != 20*time.Second {
		t.Fatalf("lease before the update = %v, want 20s", leaseOf(before))
	}

	// Only the visibility timeout changes; later leases use it.
	if err := c.UpdateQueue(ctx, q, fila.QueueUpdate{VisibilityTimeout: fila.Ptr(1500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	ack(t, before)
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("after")})
	d := next(t, cons)
	if leaseOf(d) != 1500*time.Millisecond {
		t.Errorf("lease after the update = %v, want 1.5s", leaseOf(d))
	}
	// max_attempts (3) and backoff (none) are unchanged: two immediate retries, then the DLQ.
	for attempt := uint32(1); attempt <= 3; attempt++ {
		if d.AttemptCount != attempt {
			t.Fatalf("attempt_count = %d, want %d", d.AttemptCount, attempt)
		}
		if err := d.Nack(ctx, "fail", nil); err != nil {
			t.Fatal(err)
		}
		if attempt < 3 {
			d = next(t, cons)
		}
	}
	waitStats(t, c, q+".dlq", "depth 1 after three attempts", func(s *fila.QueueStats) bool { return s.Depth == 1 })

	// Several fields at once, then an update of max_attempts alone keeps the others.
	if err := c.UpdateQueue(ctx, q, fila.QueueUpdate{MaxAttempts: fila.Ptr[uint32](1), DedupWindow: fila.Ptr(time.Minute),
		ReclaimGrace: fila.Ptr(time.Second), ParkDeadLetterAfter: fila.Ptr[uint32](2),
		DeliveryDurability: fila.Ptr(fibp.DeliveryDurabilityFast), RemoveOnEnqueue: true, RemoveOnFailure: true}); err != nil {
		t.Errorf("UpdateQueue of several fields: %v", err)
	}
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("one attempt")})
	d = next(t, cons)
	if leaseOf(d) != 1500*time.Millisecond {
		t.Errorf("lease after an update that left visibility_timeout absent = %v, want 1.5s", leaseOf(d))
	}
	if err := d.Nack(ctx, "fail", nil); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, q+".dlq", "depth 2 (max_attempts 1)", func(s *fila.QueueStats) bool { return s.Depth == 2 })

	err := c.UpdateQueue(ctx, queueName(t), fila.QueueUpdate{MaxAttempts: fila.Ptr[uint32](2)})
	wantCode(t, "UpdateQueue of a missing queue", err, fila.ErrQueueNotFound)
	err = c.UpdateQueue(ctx, q, fila.QueueUpdate{OnEnqueueScript: fila.Ptr("function on_enqueue(m) return nil")})
	wantCode(t, "UpdateQueue setting a script that does not compile", err, fila.ErrLuaCompilation)
	err = c.UpdateQueue(ctx, q, fila.QueueUpdate{Backoff: fila.Ptr[fibp.Backoff](9)})
	wantCode(t, "UpdateQueue with backoff 9", err, fila.ErrInvalidConfigValue)
	err = c.UpdateQueue(ctx, q, fila.QueueUpdate{DeliveryDurability: fila.Ptr[fibp.DeliveryDurability](4)})
	wantCode(t, "UpdateQueue with delivery_durability 4", err, fila.ErrInvalidConfigValue)
}

func TestDeleteQueue(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fastQueue(time.Second, 1))
	enqueue(t, c, payloads(q, "doomed", 3)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	d := next(t, cons)
	if err := d.Nack(ctx, "to the DLQ", nil); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, q+".dlq", "depth 1", func(s *fila.QueueStats) bool { return s.Depth == 1 })
	cons.Close()

	if err := c.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{q, q + ".dlq"} {
		_, err := c.GetStats(ctx, name)
		wantCode(t, "GetStats of "+name+" after deleting "+q, err, fila.ErrQueueNotFound)
	}
	l, err := c.ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, qi := range l.Queues {
		if strings.HasPrefix(qi.Name, q) {
			t.Errorf("ListQueues still lists %q", qi.Name)
		}
	}
	wantCode(t, "DeleteQueue of a deleted queue", c.DeleteQueue(ctx, q), fila.ErrQueueNotFound)
	wantCode(t, "DeleteQueue of a missing queue", c.DeleteQueue(ctx, queueName(t)), fila.ErrQueueNotFound)

	// The name is free again, and the new queue and DLQ start empty.
	createQueue(t, c, fila.QueueConfig{Name: q})
	for _, name := range []string{q, q + ".dlq"} {
		if st := getStats(t, c, name); st.Depth != 0 || st.InFlight != 0 {
			t.Errorf("re-created %s holds %+v", name, st)
		}
	}
}

func TestGetStatsEveryField(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})

	_, err := c.GetStats(ctx, queueName(t))
	wantCode(t, "GetStats of a missing queue", err, fila.ErrQueueNotFound)

	enqueue(t, c,
		fila.Message{Queue: q, Payload: []byte("b1"), FairnessKey: "b", Weight: 3},
		fila.Message{Queue: q, Payload: []byte("a1"), FairnessKey: "a", Weight: 1},
		fila.Message{Queue: q, Payload: []byte("b2"), FairnessKey: "b", Weight: 3},
		fila.Message{Queue: q, Payload: []byte("a2"), FairnessKey: "a", Weight: 4}, // a's weight is now 4
		fila.Message{Queue: q, Payload: []byte("later"), FairnessKey: "c", Delay: time.Hour},
	)
	st := getStats(t, c, q)
	want := fila.QueueStats{Depth: 5, Delayed: 1, ActiveFairnessKeys: 2, Quantum: 1}
	if st.Depth != want.Depth || st.InFlight != 0 || st.Delayed != want.Delayed || st.ActiveFairnessKeys != want.ActiveFairnessKeys ||
		st.ActiveConsumers != 0 || st.Quantum != want.Quantum || st.Unclassified != 0 || st.Throttled != 0 ||
		st.LeaderNodeID != 0 || st.ReplicationCount != 0 || len(st.ActiveThrottles) != 0 {
		t.Errorf("stats before consuming = %+v, want depth 5, delayed 1, 2 active keys, quantum 1, the rest 0", st)
	}
	wantKeys := []fila.FairnessKeyStat{
		{Key: "a", PendingCount: 2, Weight: 4},
		{Key: "b", PendingCount: 2, Weight: 3},
		{Key: "c", PendingCount: 0, Weight: 1},
	}
	if !slices.Equal(st.PerKeyStats, wantKeys) {
		t.Errorf("per-key stats = %+v, want %+v", st.PerKeyStats, wantKeys)
	}

	// One delivery: in flight 1, the consumer counted, and the key that had the turn spent one
	// unit of its weight × quantum deficit.
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	st = waitStats(t, c, q, "in_flight 1", func(s *fila.QueueStats) bool { return s.InFlight == 1 })
	if st.Depth != 4 || st.ActiveConsumers != 1 || st.Delayed != 1 {
		t.Errorf("stats with one delivery out = %+v, want depth 4, 1 consumer, delayed 1", st)
	}
	for _, k := range st.PerKeyStats {
		var wantPending uint64
		var wantDeficit int64
		switch k.Key {
		case d.FairnessKey:
			wantPending, wantDeficit = 1, int64(k.Weight)-1
		case "a", "b":
			wantPending = 2
		}
		if k.PendingCount != wantPending || k.CurrentDeficit != wantDeficit {
			t.Errorf("after delivering from %q, key %q has pending %d deficit %d, want %d and %d",
				d.FairnessKey, k.Key, k.PendingCount, k.CurrentDeficit, wantPending, wantDeficit)
		}
	}
	ack(t, d)
	cons.Close()
	waitStats(t, c, q, "no consumers after Close", func(s *fila.QueueStats) bool { return s.ActiveConsumers == 0 })
}

// TestDeficitResetsWhenKeyEmpties: a key with nothing deliverable leaves the DRR round and its
// deficit resets.
func TestDeficitResetsWhenKeyEmpties(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 30 * time.Second})
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("only"), FairnessKey: "solo", Weight: 5})
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	d := next(t, cons)
	st := waitStats(t, c, q, "in_flight 1", func(s *fila.QueueStats) bool { return s.InFlight == 1 })
	want := []fila.FairnessKeyStat{{Key: "solo", PendingCount: 0, CurrentDeficit: 0, Weight: 5}}
	if st.ActiveFairnessKeys != 0 || !slices.Equal(st.PerKeyStats, want) {
		t.Errorf("after delivering a key's only message: %d active keys, per-key %+v; want 0 and %+v", st.ActiveFairnessKeys, st.PerKeyStats, want)
	}
	ack(t, d)
	if st := getStats(t, c, q); len(st.PerKeyStats) != 0 || st.ActiveFairnessKeys != 0 {
		t.Errorf("after the ack the key is still listed: %+v", st.PerKeyStats)
	}
}

func TestListQueues(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c, payloads(q, "m", 3)...)
	cons := consume(t, c, q, fila.ConsumeOptions{MaxUnacked: 1})
	next(t, cons)
	waitStats(t, c, q, "in_flight 1", func(s *fila.QueueStats) bool { return s.InFlight == 1 })
	l, err := c.ListQueues(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if l.ClusterNodeCount != 0 {
		t.Errorf("cluster_node_count = %d, want 0 (single node)", l.ClusterNodeCount)
	}
	found := map[string]fila.QueueInfo{}
	for _, qi := range l.Queues {
		found[qi.Name] = qi
	}
	if got, want := found[q], (fila.QueueInfo{Name: q, Depth: 2, InFlight: 1, ActiveConsumers: 1}); got != want {
		t.Errorf("ListQueues entry %+v, want %+v", got, want)
	}
	if got, want := found[q+".dlq"], (fila.QueueInfo{Name: q + ".dlq"}); got != want {
		t.Errorf("ListQueues DLQ entry %+v, want %+v", got, want)
	}
}

func TestClusterStatusAndRoutes(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{})
	st, err := c.GetClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Nodes) != 1 || st.Nodes[0].State != fibp.NodeStateUp || st.Nodes[0].NodeID != c.NodeID() ||
		st.Nodes[0].Addr != sharedAddr || st.MetaLeaderNodeID != 0 || !st.RebalancingPauseEndsAt.IsZero() {
		t.Errorf("cluster status = %+v, want one node, up, at %s", st, sharedAddr)
	}

	routes, err := c.GetRoutes(ctx, q, q+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || routes[0].Queue != q || routes[1].Queue != q+".dlq" {
		t.Fatalf("GetRoutes(%s, its DLQ) = %+v", q, routes)
	}
	for _, r := range routes {
		if r.LeaderNodeID != 0 || r.LeaderAddr != sharedAddr || len(r.Shards) != 0 {
			t.Errorf("route %+v, want node 0 at %s, unsharded", r, sharedAddr)
		}
	}
	all, err := c.GetRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range all {
		names = append(names, r.Queue)
	}
	if !slices.Contains(names, q) || !slices.Contains(names, q+".dlq") {
		t.Errorf("GetRoutes() = %v, lacks %q and its DLQ", names, q)
	}
	_, err = c.GetRoutes(ctx, queueName(t))
	wantCode(t, "GetRoutes of a missing queue", err, fila.ErrQueueNotFound)
}

// TestClusterStatusCountsLeaderships: the single node leads every queue (GetRoutes says so), so
// its queue_leaderships is the number of queues. It runs on a private broker to know that number.
func TestClusterStatusCountsLeaderships(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	ctx := testCtx(t)
	createQueue(t, c, fila.QueueConfig{})
	createQueue(t, c, fila.QueueConfig{})
	routes, err := c.GetRoutes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	led := 0
	for _, r := range routes {
		if r.LeaderAddr == s.addr {
			led++
		}
	}
	st, err := c.GetClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 4 || led != 4 || len(st.Nodes) != 1 || st.Nodes[0].QueueLeaderships != uint32(led) {
		t.Errorf("GetRoutes: this node leads %d of %d queues; GetClusterStatus: %+v", led, len(routes), st.Nodes)
	}
}

// TestClusterAdminSingleNode: the cluster operations answer sensibly on one node.
func TestClusterAdminSingleNode(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	q := createQueue(t, c, fila.QueueConfig{})
	if err := c.DrainNode(ctx, 0, false); err != nil {
		t.Errorf("DrainNode(0, cancel): %v", err)
	}
	wantCode(t, "DrainNode of an unknown node", c.DrainNode(ctx, 7, true), fila.ErrNodeNotFound)
	if err := c.MoveQueueLeader(ctx, q, 0); err != nil {
		t.Errorf("MoveQueueLeader to the only node: %v", err)
	}
	wantCode(t, "MoveQueueLeader of a missing queue", c.MoveQueueLeader(ctx, queueName(t), 0), fila.ErrQueueNotFound)
	wantCode(t, "MoveQueueLeader to an unknown node", c.MoveQueueLeader(ctx, q, 7), fila.ErrNodeNotFound)
	wantCode(t, "SetRebalancing mode 9", c.SetRebalancing(ctx, 9, 0), fila.ErrInvalidConfigValue)
	_, err := c.GetThrottleStats(ctx, "nobody-declares-this", 5)
	wantCode(t, "GetThrottleStats of an undeclared throttle", err, fila.ErrThrottleNotFound)
	_, err = c.GetThrottleBucket(ctx, "nobody-declares-this", fibp.BucketKind(0), nil)
	wantCode(t, "GetThrottleBucket of an undeclared throttle", err, fila.ErrThrottleNotFound)
}

// TestSetRebalancingIsReported runs on a private broker: a pause that SetRebalancing accepted
// shows in GetClusterStatus with its end time, and enabling shows as enabled.
func TestSetRebalancingIsReported(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	ctx := testCtx(t)
	before := time.Now()
	if err := c.SetRebalancing(ctx, fibp.RebalancingPaused, time.Hour); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rebalancing != fibp.RebalancingPaused || st.RebalancingPauseEndsAt.Before(before.Add(time.Hour-time.Second)) {
		t.Errorf("after pausing rebalancing for an hour: %v until %v", st.Rebalancing, st.RebalancingPauseEndsAt)
	}
	if err := c.SetRebalancing(ctx, fibp.RebalancingEnabled, 0); err != nil {
		t.Fatal(err)
	}
	if st, err = c.GetClusterStatus(ctx); err != nil || st.Rebalancing != fibp.RebalancingEnabled || !st.RebalancingPauseEndsAt.IsZero() {
		t.Errorf("after enabling rebalancing: %+v, %v", st, err)
	}
}

// TestUnsupportedFeaturesRefused documents what this broker does not implement yet: each is
// refused with an error code and a message, nothing is created, and the connection stays usable.
// (Update the expectations here when a feature lands.)
func TestUnsupportedFeaturesRefused(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	ctx := testCtx(t)
	for _, tc := range []struct {
		what string
		cfg  fila.QueueConfig
		want *fila.Error
	}{
		{"grouped ordering without a key", fila.QueueConfig{Ordering: fibp.OrderingGrouped}, fila.ErrInvalidConfigValue},
		{"a payload hash in an ordering key", fila.QueueConfig{Ordering: fibp.OrderingGrouped, OrderingKey: fila.Key{fila.PayloadHashPart()}}, fila.ErrInvalidConfigValue},
		{"an ordering key without grouped ordering", fila.QueueConfig{Ordering: fibp.OrderingQueue, OrderingKey: fila.Key{fila.HeaderPart("customer")}}, fila.ErrInvalidConfigValue},
		{"an on_enqueue script without on_enqueue", fila.QueueConfig{OnEnqueueScript: "function classify(m) return nil end"}, fila.ErrLuaCompilation},
	} {
		tc.cfg.Name = queueName(t)
		_, err := c.CreateQueue(ctx, tc.cfg)
		wantCode(t, "CreateQueue with "+tc.what, err, tc.want)
		_, err = c.GetStats(ctx, tc.cfg.Name)
		wantCode(t, "GetStats after refusing "+tc.what, err, fila.ErrQueueNotFound)
	}
	q := createQueue(t, c, fila.QueueConfig{})
	_, err := c.Consume(ctx, q, fila.ConsumeOptions{Throttles: []fila.Throttle{{Name: "api"}}})
	wantCode(t, "Consume with a throttle without limits", err, fila.ErrInvalidThrottle)
	if st := getStats(t, c, q); st.ActiveConsumers != 0 {
		t.Errorf("a refused Consume left a subscription: %+v", st)
	}
	if _, err := c.Ping(ctx); err != nil {
		t.Errorf("Ping after the refusals: %v", err)
	}
}
