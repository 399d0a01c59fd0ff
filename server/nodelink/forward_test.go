package nodelink_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// answerWait bounds how long a test waits for a request's answer: a forwarded request must be
// answered, never left hanging (the link's forward timeout is 5 s).
const answerWait = 30 * time.Second

// enqueueWithin is an Enqueue whose answer must come within answerWait.
func enqueueWithin(t *testing.T, b *broker.Broker, msgs []broker.Message) ([]broker.EnqueueResult, *broker.Error) {
	t.Helper()
	type answer struct {
		rs []broker.EnqueueResult
		e  *broker.Error
	}
	ch := make(chan answer, 1)
	b.Enqueue(msgs, func(rs []broker.EnqueueResult, e *broker.Error) {
		ch <- answer{append([]broker.EnqueueResult(nil), rs...), e}
	})
	select {
	case a := <-ch:
		return a.rs, a.e
	case <-time.After(answerWait):
		t.Fatalf("an enqueue of %d messages was not answered within %v", len(msgs), answerWait)
		return nil, nil
	}
}

// settleWithin runs a settlement (Ack, Nack) and returns its codes, answered within answerWait.
func settleWithin(t *testing.T, call func(done func([]broker.Code, *broker.Error))) []broker.Code {
	t.Helper()
	ch := make(chan []broker.Code, 1)
	call(func(cs []broker.Code, e *broker.Error) {
		if e != nil {
			t.Errorf("settlement failed: %v", e)
		}
		ch <- append([]broker.Code(nil), cs...)
	})
	select {
	case cs := <-ch:
		return cs
	case <-time.After(answerWait):
		t.Fatalf("a settlement was not answered within %v", answerWait)
		return nil
	}
}

// followerOf is a node that replicates queue and does not lead it.
func followerOf(nodes map[meta.NodeID]*node, queue string) meta.NodeID {
	lead := leaderOf(nodes, queue)
	for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
		if id != lead && nodes[id].b != nil {
			return id
		}
	}
	return ""
}

// A follower forwards Enqueue messages, Acks, Nacks and ExtendLeases for a queue to its leader
// over the link: each is answered as the leader answered it, an enqueue's result carries the
// route hint naming the leader, and what was enqueued is the leader's to deliver.
func TestAFollowerForwardsEnqueuesAndSettlements(t *testing.T) {
	nodes := startBrokers(t)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	var lead, fol meta.NodeID
	eventually(t, "q has a leader", func() bool { lead = leaderOf(nodes, "q"); return lead != "" })
	fol = followerOf(nodes, "q")
	L, F := nodes[lead].b, nodes[fol].b
	// Two batches through the follower: the first finds the leader when its replica refuses it,
	// the second goes to the leader at once.
	for batch := range 2 {
		var msgs []broker.Message
		for i := range 5 {
			msgs = append(msgs, broker.Message{Queue: "q", Payload: fmt.Appendf(nil, "m%d", batch*5+i)})
		}
		var rs []broker.EnqueueResult
		eventually(t, "the follower's enqueue is answered Ok", func() bool {
			var e *broker.Error
			rs, e = enqueueWithin(t, F, msgs)
			return e == nil && rs[0].Code == broker.CodeOk
		})
		for i, r := range rs {
			if r.Code != broker.CodeOk || r.ID == (service.MessageID{}) || r.Leader == nil || r.Leader.Queue != "q" {
				t.Fatalf("batch %d, message %d through the follower: %+v (leader %+v), want Ok with an ID and a route hint", batch, i, r, r.Leader)
			}
		}
	}
	if items, failed := F.Forwarded(); items < 10 || failed != 0 {
		t.Fatalf("the follower forwarded %d items (%d failed), want at least 10, none failed", items, failed)
	}

	s := &sink{ch: make(chan service.Delivery, 100)}
	if _, e := L.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c1", Session: "s1", Credit: 100}, s); e != nil {
		t.Fatal(e)
	}
	got := map[string]service.Delivery{}
	timeout := time.After(time.Minute)
	for len(got) < 10 {
		select {
		case d := <-s.ch:
			got[string(d.Payload)] = d
		case <-timeout:
			t.Fatalf("the leader delivered %d of the 10 messages enqueued through the follower", len(got))
		}
	}
	id := func(i int) service.MessageID { return got[fmt.Sprint("m", i)].ID }

	// An ack from another connection (session) while the subscription lives is refused, as on
	// one node; without a session it is taken.
	cs := settleWithin(t, func(done func([]broker.Code, *broker.Error)) {
		F.Ack([]broker.AckItem{{Queue: "q", ID: id(0), Session: "s1"}}, done)
	})
	if cs[0] != broker.CodeMessageNotFound {
		t.Fatalf("an ack through the follower from another node's session answered %v, want MessageNotFound", cs[0])
	}
	var acks []broker.AckItem
	for i := range 6 {
		acks = append(acks, broker.AckItem{Queue: "q", ID: id(i)})
	}
	acks = append(acks, broker.AckItem{Queue: "q", ID: service.MessageID{1}}) // no such message
	cs = settleWithin(t, func(done func([]broker.Code, *broker.Error)) { F.Ack(acks, done) })
	for i, c := range cs {
		want := broker.CodeOk
		if i == 6 {
			want = broker.CodeMessageNotFound
		}
		if c != want {
			t.Fatalf("ack %d through the follower answered %v, want %v", i, c, want)
		}
	}
	cs = settleWithin(t, func(done func([]broker.Code, *broker.Error)) {
		F.Nack([]broker.NackItem{{Queue: "q", ID: id(6), Error: "try again"}}, done)
	})
	if cs[0] != broker.CodeOk {
		t.Fatalf("a nack through the follower answered %v", cs[0])
	}
	ext := make(chan []broker.ExtendResult, 1)
	F.ExtendLease([]broker.ExtendItem{{Queue: "q", ID: id(7), ExtendByMs: 60_000}}, func(rs []broker.ExtendResult, e *broker.Error) {
		if e != nil {
			t.Errorf("extend: %v", e)
		}
		ext <- rs
	})
	select {
	case rs := <-ext:
		if rs[0].Code != broker.CodeOk || rs[0].ExpiresAt < time.Now().Add(50*time.Second).UnixMilli() {
			t.Fatalf("an extension through the follower answered %+v", rs[0])
		}
	case <-time.After(answerWait):
		t.Fatal("an extension through the follower was not answered")
	}
	// The nacked message comes again (attempt 2); the leader's state holds the settlements.
	select {
	case d := <-s.ch:
		if string(d.Payload) != "m6" || d.Attempt != 2 {
			t.Fatalf("after the nack the leader delivered %q attempt %d, want m6 attempt 2", d.Payload, d.Attempt)
		}
	case <-time.After(time.Minute):
		t.Fatal("the nacked message was not delivered again")
	}
	st, e := L.GetStats("q")
	if e != nil {
		t.Fatal(e)
	}
	if st.Depth != 0 || st.InFlight != 4 {
		t.Fatalf("the leader's queue after 6 acks: depth %d, in flight %d; want 0 and 4", st.Depth, st.InFlight)
	}
}

// An application that enqueues through one node while the queue's leadership moves (a
// transfer) and its leader's node goes down is answered every time, per message (Ok, NotLeader
// or NodeNotReady), never left waiting; every message answered Ok is delivered by the last
// leader.
func TestForwardingThroughLeaderChanges(t *testing.T) {
	nodes := startBrokers(t)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	var lead meta.NodeID
	eventually(t, "q has a leader", func() bool { lead = leaderOf(nodes, "q"); return lead != "" })
	via := followerOf(nodes, "q")
	V := nodes[via].b
	eventually(t, "the follower's meta state has q", func() bool { _, _, e := V.QueueRoutes([]string{"q"}); return e == nil })

	var mu sync.Mutex
	ok := map[string]bool{}
	codes := map[broker.Code]int{}
	oks := func() int { mu.Lock(); defer mu.Unlock(); return len(ok) }
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for batch := 0; ; batch++ {
			select {
			case <-stop:
				return
			default:
			}
			var msgs []broker.Message
			for i := range 10 {
				msgs = append(msgs, broker.Message{Queue: "q", Payload: fmt.Appendf(nil, "b%d-%d", batch, i)})
			}
			rs, e := enqueueWithin(t, V, msgs)
			mu.Lock()
			if e != nil {
				codes[e.Code]++
			}
			for i, r := range rs {
				codes[r.Code]++
				switch r.Code {
				case broker.CodeOk:
					ok[string(msgs[i].Payload)] = true
				case broker.CodeNotLeader, broker.CodeNodeNotReady:
				default:
					t.Errorf("message %q answered %v", msgs[i].Payload, r.Code)
				}
			}
			mu.Unlock()
			if e != nil || len(rs) > 0 && rs[0].Code != broker.CodeOk {
				time.Sleep(20 * time.Millisecond) // a client's back-off
			}
		}
	})
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	progress := func(what string) {
		n := oks()
		eventually(t, what, func() bool { return oks() >= n+50 })
	}
	progress("enqueues through the follower succeed")

	// A transfer to the third node, then that node goes down.
	var third meta.NodeID
	for _, id := range []meta.NodeID{"n1", "n2", "n3"} {
		if id != lead && id != via {
			third = id
		}
	}
	moveLeader(t, nodes, "q", third)
	progress("enqueues through the follower succeed after the transfer")
	nodes[third].stop()
	progress("enqueues through the follower succeed after the leader's node went down")
	close(stop)
	wg.Wait()
	mu.Lock()
	t.Logf("answers: %v", codes)
	mu.Unlock()

	var last meta.NodeID
	s := &sink{ch: make(chan service.Delivery, 10_000)}
	eventually(t, "a leader takes a subscription", func() bool {
		last = leaderOf(nodes, "q")
		if last == "" {
			return false
		}
		_, e := nodes[last].b.Subscribe(broker.SubscribeRequest{Queue: "q", ConsumerID: "c"}, s)
		return e == nil
	})
	seen := map[string]bool{}
	timeout := time.After(time.Minute)
	for missing := len(ok); missing > 0; {
		select {
		case d := <-s.ch:
			if ok[string(d.Payload)] && !seen[string(d.Payload)] {
				missing--
			}
			seen[string(d.Payload)] = true
			nodes[last].b.Ack([]broker.AckItem{{Queue: "q", ID: d.ID}}, func([]broker.Code, *broker.Error) {})
		case <-timeout:
			t.Fatalf("%d of the %d messages answered Ok were not delivered", missing, len(ok))
		}
	}
}

// moveLeader moves queue's leadership to node and waits until it leads.
func moveLeader(t *testing.T, nodes map[meta.NodeID]*node, queue string, to meta.NodeID) {
	t.Helper()
	eventually(t, string(to)+" leads "+queue, func() bool {
		if l := leaderOf(nodes, queue); l != "" && l != to {
			_ = nodes[l].b.TransferLeadership(queue, raft.ServerID(to), nodes[l].link.Address(to, queue))
		}
		return nodes[to].b.Leads(queue)
	})
}

// One Enqueue naming several queues is answered per message: those for a queue the node leads
// are served there, the others forwarded to each queue's leader (one request per leader), an
// unknown queue refused; only the forwarded queues get a route hint.
func TestAnEnqueueOfSeveralQueuesIsAnsweredPerMessage(t *testing.T) {
	nodes := startBrokers(t)
	for _, q := range []string{"qa", "qb", "qc"} {
		if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: q}); e != nil {
			t.Fatal(e)
		}
	}
	moveLeader(t, nodes, "qa", "n1")
	moveLeader(t, nodes, "qb", "n2")
	moveLeader(t, nodes, "qc", "n3")
	msgs := []broker.Message{{Queue: "qa", Payload: []byte("a1")}, {Queue: "qb", Payload: []byte("b1")},
		{Queue: "qc", Payload: []byte("c1")}, {Queue: "missing", Payload: []byte("x")}, {Queue: "qa", Payload: []byte("a2")},
		{Queue: "qb", Payload: []byte("b2")}}
	want := []broker.Code{broker.CodeOk, broker.CodeOk, broker.CodeOk, broker.CodeQueueNotFound, broker.CodeOk, broker.CodeOk}
	hinted := map[string]bool{"qa": true, "qb": true} // through n3, which leads qc
	var rs []broker.EnqueueResult
	eventually(t, "every message is answered as expected", func() bool {
		var e *broker.Error
		if rs, e = enqueueWithin(t, nodes["n3"].b, msgs); e != nil {
			return false
		}
		for i, r := range rs {
			if r.Code != want[i] {
				return false
			}
		}
		return true
	})
	for i, r := range rs {
		if hinted[msgs[i].Queue] != (r.Leader != nil) || r.Leader != nil && r.Leader.Queue != msgs[i].Queue {
			t.Errorf("message %d (%s): hint %+v, want one only for a forwarded queue", i, msgs[i].Queue, r.Leader)
		}
	}
	for q, n := range map[string]meta.NodeID{"qa": "n1", "qb": "n2", "qc": "n3"} {
		st, e := nodes[n].b.GetStats(q)
		wantDepth := uint64(2)
		if q == "qc" {
			wantDepth = 1
		}
		if e != nil || st.Depth != wantDepth {
			t.Errorf("%s on its leader %s: depth %d (%v), want %d", q, n, st.Depth, e, wantDepth)
		}
	}
}
