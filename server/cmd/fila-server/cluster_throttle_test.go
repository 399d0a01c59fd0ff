package main

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Throttles across nodes (throttling.md, "Cluster"): three real fila-server processes, three
// queues each led by another node, a subscriber on each leader sharing one throttle of N per W,
// every queue with far more ready messages than the throttle lets through. The throttle's owner
// (node 1, whose subscriber delivered first and so claimed it) is killed with SIGKILL in the
// middle; the other nodes claim it and go on after the new owner's conservative start.
//
// The checker reads the broker's own delivery times, each Delivery's leased_at (the time the
// delivery was counted, on the one clock every process of this machine reads), and proves that
// no window of W ever held more than N deliveries, across the three nodes and the kill.
func TestAThrottleHoldsAcrossNodesAndAnOwnerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	const n, windowMs, backlog = 20, 1000, 600
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin, "--auth-max-staleness-ms", "1000")
	throttle := fibp.ThrottleDeclaration{Name: "shared", Limits: []fibp.ThrottleLimit{{MaxDeliveries: n, WindowMs: windowMs}}}

	queues := []string{"t1", "t2", "t3"}
	for i, q := range queues {
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q, VisibilityTimeoutMs: 600_000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		enqueueOnLeader(t, nodes, q, "first")
		leadOn(t, nodes, q, nodes[i])
		req := &fibp.Enqueue{}
		for range backlog {
			req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: q, Payload: []byte("m")})
		}
		if r := admin(t, nodes[i], req).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeOk {
			t.Fatalf("Enqueue on %s: %v", q, r.Results[0].ErrorCode)
		}
	}

	rec := &deliveryLog{}
	rec.consume(t, nodes[0], queues[0], throttle)
	waitFor(t, "node 1 delivers under the throttle (and so owns it)", func() bool { return rec.count(0) > 0 })
	rec.consume(t, nodes[1], queues[1], throttle)
	rec.consume(t, nodes[2], queues[2], throttle)
	waitFor(t, "every node delivers, for ten windows", func() bool {
		return rec.count(1) > 0 && rec.count(2) > 0 && rec.span() >= 10*windowMs
	})

	// Every node reports what the owner counts (the whole cluster's deliveries, within N), and
	// every node's subscription, queue and waiting messages.
	for _, node := range nodes {
		if c := counted(t, node, "shared"); c == 0 || c > n {
			t.Fatalf("node %d reports %d counted in the saturated bucket, want 1 to %d", node.id, c, n)
		}
		st := admin(t, node, &fibp.GetThrottleStats{Name: "shared", TopBuckets: 1}).(*fibp.GetThrottleStatsResult)
		var qs []string
		for _, q := range st.Queues {
			qs = append(qs, q.Queue)
		}
		if st.ErrorCode != fibp.CodeOk || st.Summary.DeclaringSubscribers != 3 || !slices.Equal(qs, queues) || st.Waiting == 0 ||
			len(st.Buckets) != 1 || st.Buckets[0].Counted[0] > n || st.Summary.Limits[0].MaxDeliveries != n {
			t.Fatalf("GetThrottleStats on node %d: %v, %d subscribers, queues %v, %d waiting, buckets %+v", node.id, st.ErrorCode,
				st.Summary.DeclaringSubscribers, qs, st.Waiting, st.Buckets)
		}
	}

	killAt := time.Now().UnixMilli()
	kill(nodes[0])
	waitFor(t, "nodes 2 and 3 deliver for three windows after the owner's kill", func() bool {
		return rec.after(killAt) >= 3*n
	})
	for _, node := range nodes[1:] {
		if c := counted(t, node, "shared"); c == 0 || c > n {
			t.Fatalf("after the kill node %d reports %d counted in the saturated bucket, want 1 to %d", node.id, c, n)
		}
	}
	rec.stop()

	times := rec.all()
	if err := checkWindows(times, n, windowMs); err != nil {
		t.Fatal(err)
	}
	before := rate(times, times[0]+windowMs, killAt, windowMs) // after the first window's burst
	resumed := firstAfter(times, killAt)
	t.Logf("%d deliveries (node 1 %d, node 2 %d, node 3 %d); no window of %d ms held more than %d", len(times), rec.count(0), rec.count(1), rec.count(2), windowMs, n)
	t.Logf("saturated, subscribers on 3 nodes: %.1f%% of N/W; after the owner's kill, deliveries resumed %d ms later; then %.1f%% of N/W",
		100*before/n, resumed-killAt, 100*rate(times, resumed+windowMs, times[len(times)-1]+1, windowMs)/n)
}

// counted is what node reports counted in the one bucket of an unkeyed throttle
// (GetThrottleBucket), retried while the owner cannot answer (NodeNotReady).
func counted(t *testing.T, node *clusterProc, name string) uint64 {
	t.Helper()
	var c uint64
	waitFor(t, fmt.Sprintf("node %d reports the bucket's counts", node.id), func() bool {
		r := admin(t, node, &fibp.GetThrottleBucket{Name: name, BucketKind: fibp.BucketKindKeyed, Values: []string{}})
		b, ok := r.(*fibp.GetThrottleBucketResult)
		if !ok || b.ErrorCode != fibp.CodeOk || len(b.Bucket.Counted) != 1 {
			return false
		}
		c = b.Bucket.Counted[0]
		return true
	})
	return c
}

// leadOn moves queue's leadership to node target and waits until every node names it.
func leadOn(t *testing.T, nodes []*clusterProc, queue string, target *clusterProc) {
	t.Helper()
	waitFor(t, fmt.Sprintf("node %d leads %s", target.id, queue), func() bool {
		if routedLeader(t, nodes, queue) == target {
			return true
		}
		move(t, nodes[0], queue, target.id)
		return false
	})
}

// deliveryLog records the leased_at of every delivery of the subscriptions it runs, per node.
type deliveryLog struct {
	mu    sync.Mutex
	times [3][]int64
	conns []*fibptest.Client
	wg    sync.WaitGroup
}

// consume subscribes to queue on node with the throttle and records its deliveries until stop
// (or until the node dies).
func (l *deliveryLog) consume(t *testing.T, node *clusterProc, queue string, th fibp.ThrottleDeclaration) {
	t.Helper()
	c := fibptest.Dial(t, node.addrs.FIBP)
	c.Handshake()
	c.Send(1, &fibp.Consume{Queue: queue, Credit: 1 << 20, Throttles: []fibp.ThrottleDeclaration{th}})
	if _, f := c.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume %s on node %d answered %#v", queue, node.id, f)
	}
	l.conns = append(l.conns, c)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			body, err := c.FR.Next()
			if err != nil {
				return // stopped, or the node was killed
			}
			h, rest, err := fibp.ParseHeader(body)
			if err != nil {
				return
			}
			f, err := fibp.Decode(h.Opcode, rest)
			if err != nil {
				return
			}
			switch x := f.(type) {
			case *fibp.Ping:
				_, _ = c.NC.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Pong{}))
			case *fibp.Delivery:
				l.mu.Lock()
				for _, m := range x.Messages {
					l.times[node.id-1] = append(l.times[node.id-1], int64(m.LeasedAt))
				}
				l.mu.Unlock()
			}
		}
	}()
}

func (l *deliveryLog) stop() {
	for _, c := range l.conns {
		c.NC.Close()
	}
	l.wg.Wait()
}

func (l *deliveryLog) count(node int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.times[node])
}

// span is how long the deliveries so far cover, in ms.
func (l *deliveryLog) span() int64 {
	ts := l.all()
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1] - ts[0]
}

// after counts the deliveries leased after at.
func (l *deliveryLog) after(at int64) int {
	n := 0
	for _, ts := range l.all() {
		if ts > at {
			n++
		}
	}
	return n
}

// all is every delivery time, sorted.
func (l *deliveryLog) all() []int64 {
	l.mu.Lock()
	var ts []int64
	for _, node := range l.times {
		ts = append(ts, node...)
	}
	l.mu.Unlock()
	slices.Sort(ts)
	return ts
}

// checkWindows proves no window of windowMs holds more than n of the sorted times.
func checkWindows(times []int64, n int, windowMs int64) error {
	lo := 0
	for hi := range times {
		for times[lo] <= times[hi]-windowMs {
			lo++
		}
		if hi-lo+1 > n {
			return fmt.Errorf("%d deliveries in the window (%d, %d], at most %d allowed: %v", hi-lo+1, times[hi]-windowMs, times[hi], n, times[lo:hi+1])
		}
	}
	return nil
}

// rate is the deliveries per window in the whole windows of windowMs from `from` before to.
func rate(times []int64, from, to, windowMs int64) float64 {
	windows := (to - from) / windowMs
	if windows <= 0 {
		return 0
	}
	k := 0
	for _, ts := range times {
		if ts >= from && ts < from+windows*windowMs {
			k++
		}
	}
	return float64(k) / float64(windows)
}

func firstAfter(times []int64, at int64) int64 {
	for _, ts := range times {
		if ts > at {
			return ts
		}
	}
	return at
}

// A throttle's limits are those of every live declaration: a node whose subscription declares a
// stricter limit but has nothing to deliver (its queue is empty) still binds the deliveries of the
// other nodes. Node 1 delivers under "strict" 10 per second; node 2's subscription to an empty
// queue declares 3 per second. Once the owner (node 1) reports 3 per second as the throttle's
// limit, every window that starts a lease (200 ms) later holds at most 3 deliveries: tokens
// admitted before the owner knew the limit are spent by then.
func TestAThrottleHoldsTheLimitsOfANodeThatDeliversNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	const strict, loose, windowMs = 3, 10, 1000
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	for i, q := range []string{"busy", "empty"} {
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q, VisibilityTimeoutMs: 600_000}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		enqueueOnLeader(t, nodes, q, "first")
		leadOn(t, nodes, q, nodes[i])
	}
	req := &fibp.Enqueue{}
	for range 200 {
		req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "busy", Payload: []byte("m")})
	}
	if r := admin(t, nodes[0], req).(*fibp.EnqueueResult); r.Results[0].ErrorCode != fibp.CodeOk {
		t.Fatalf("Enqueue: %v", r.Results[0].ErrorCode)
	}
	declare := func(max uint64) fibp.ThrottleDeclaration {
		return fibp.ThrottleDeclaration{Name: "strict", Limits: []fibp.ThrottleLimit{{MaxDeliveries: max, WindowMs: windowMs}}}
	}
	// "empty" was delivered its first message by enqueueOnLeader's check: drain it first.
	empty := fibptest.Dial(t, nodes[1].addrs.FIBP)
	empty.Handshake()
	empty.Subscribe(1, "empty", 10)
	empty.Deliveries(1)
	empty.Send(2, &fibp.Consume{Queue: "empty", Credit: 10, Throttles: []fibp.ThrottleDeclaration{declare(strict)}})
	if _, f := empty.Next(); f.Opcode() != fibp.OpConsumeOk {
		t.Fatalf("Consume on node 2 answered %#v", f)
	}

	rec := &deliveryLog{}
	rec.consume(t, nodes[0], "busy", declare(loose))
	var known int64
	waitFor(t, "the owner enforces node 2's limit", func() bool {
		st, ok := admin(t, nodes[0], &fibp.GetThrottleStats{Name: "strict"}).(*fibp.GetThrottleStatsResult)
		if ok && st.ErrorCode == fibp.CodeOk && len(st.Summary.Limits) == 1 && st.Summary.Limits[0].MaxDeliveries == strict {
			known = time.Now().UnixMilli()
			return true
		}
		return false
	})
	waitFor(t, "five windows of deliveries after that", func() bool { return rec.after(known) >= 5*strict })
	rec.stop()
	var after []int64
	for _, ts := range rec.all() {
		if ts > known+200 {
			after = append(after, ts)
		}
	}
	if err := checkWindows(after, strict, windowMs); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d deliveries after the owner knew the limit, no window of %d ms with more than %d", len(after), windowMs, strict)
}
