package broker

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/service"
)

// A deposed leader's proposals in flight are answered by their entries' fate (fate.go): three
// in-process nodes over memNetwork, whose transports can lose the responses to one node's
// requests (the requests themselves arrive): that node's entries reach the others, and it never
// learns they did.

// deafTransport is a node's transport that loses the responses to its requests while deaf is set.
type deafTransport struct {
	*raft.InmemTransport
	deaf *atomic.Bool
}

var errResponseLost = errors.New("test: the response was lost")

func (t *deafTransport) lost(err error) error {
	if err == nil && t.deaf.Load() {
		return errResponseLost
	}
	return err
}

func (t *deafTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported // each AppendEntries through AppendEntries below
}

func (t *deafTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	return t.lost(t.InmemTransport.AppendEntries(id, target, args, resp))
}

func (t *deafTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.lost(t.InmemTransport.RequestVote(id, target, args, resp))
}

func (t *deafTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.lost(t.InmemTransport.RequestPreVote(id, target, args, resp))
}

func (t *deafTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.lost(t.InmemTransport.TimeoutNow(id, target, args, resp))
}

// deafNode is memNode with a transport that can go deaf.
type deafNode struct {
	memNode
	deaf *atomic.Bool
}

func (m deafNode) Transport(group string) (raft.Transport, error) {
	t, err := m.memNode.Transport(group)
	if err != nil {
		return nil, err
	}
	return &deafTransport{InmemTransport: t.(*raft.InmemTransport), deaf: m.deaf}, nil
}

// startDeafCluster is startCluster with deafNode networks and heartbeat timeout hb, and queue q
// hosted by every node.
func startDeafCluster(t *testing.T, hb time.Duration) (*memCluster, map[meta.NodeID]*atomic.Bool) {
	t.Helper()
	deaf := map[meta.NodeID]*atomic.Bool{"n1": {}, "n2": {}, "n3": {}}
	c := startClusterWith(t, hb, func(c *memCluster, id meta.NodeID) Network {
		return deafNode{memNode: memNode{n: c.net, self: id}, deaf: deaf[id]}
	})
	if e := c.createQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	c.awaitReplicas("q")
	return c, deaf
}

// nodeOf is the ID of broker b in c.
func (c *memCluster) nodeOf(b *Broker) meta.NodeID {
	for id, x := range c.brokers {
		if x == b {
			return id
		}
	}
	c.t.Fatal("not a node of the cluster")
	return ""
}

// enqueueAsync enqueues one message with payload p on b, without waiting for the answer.
func enqueueAsync(b *Broker, p string) <-chan EnqueueResult {
	out := make(chan EnqueueResult, 1)
	b.enqueue([]Message{{Queue: "q", Payload: []byte(p)}}, func(res []EnqueueResult, e *Error) {
		if e != nil {
			out <- EnqueueResult{Code: e.Code}
			return
		}
		out <- res[0]
	}, nil)
	return out
}

// answer waits for an enqueue's answer; the test fails after a minute.
func answer(t *testing.T, ch <-chan EnqueueResult) EnqueueResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no answer within a minute")
	}
	return EnqueueResult{}
}

// storedOn counts the messages of q on b's replica (its leader's state, or its state machine's).
func storedOn(b *Broker) (n int) {
	b.lookup("q").a.call(func(a *actor) {
		st := a.st
		a.fsm.mu.Lock()
		defer a.fsm.mu.Unlock()
		if st == nil {
			st = a.fsm.state
		}
		n = st.Lane(0).Len()
	})
	return n
}

// appliedOn is the last index b's replica of q applied.
func appliedOn(b *Broker) uint64 {
	f := b.lookup("q").a.fsm
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// The leader's entry reaches both followers, the leader never hears that it did and steps down;
// the next leader commits the entry, and the deposed leader answers the enqueue Ok with the
// message's ID, not NotLeader (which a client would send again: two messages).
func TestADeposedLeadersCommittedEntryIsAnsweredOk(t *testing.T) {
	fateBoundSet.Store(int64(30 * time.Second)) // the fate is learned, never guessed, here
	t.Cleanup(func() { fateBoundSet.Store(0) })
	c, deaf := startDeafCluster(t, 500*time.Millisecond)
	old := c.awaitLeader("q")
	id := c.nodeOf(old)
	deaf[id].Store(true)
	res := enqueueAsync(old, "kept")
	c.eventually("another node leads q", func() bool { b := c.leader("q"); return b != nil && b != old })
	deaf[id].Store(false)
	r := answer(t, res)
	if r.Code != CodeOk {
		t.Fatalf("the deposed leader answered %v, its entry committed", r.Code)
	}
	tally := old.lookup("q").a.fsm.fateTally[fateCommitted].Load()
	if tally != 1 {
		t.Fatalf("%d rounds answered committed by their fate, want 1", tally)
	}
	now := c.awaitLeader("q")
	c.eventually("the new leader holds the message once", func() bool { return storedOn(now) == 1 })
	t.Logf("node %s deposed, node %s leads; the enqueue answered Ok, ID %v", id, c.nodeOf(now), r.ID)
}

// The leader's entry stays in its own log alone (cut off); the next leader writes another entry
// at its index, and the deposed leader, back, answers the enqueue NotLeader: it was not carried
// out, and may be sent again.
func TestADeposedLeadersOverwrittenEntryIsAnsweredNotLeader(t *testing.T) {
	fateBoundSet.Store(int64(30 * time.Second))
	t.Cleanup(func() { fateBoundSet.Store(0) })
	c, _ := startDeafCluster(t, 500*time.Millisecond)
	old := c.awaitLeader("q")
	id := c.nodeOf(old)
	c.net.isolate(id)
	res := enqueueAsync(old, "lost")
	c.eventually("another node leads q", func() bool { b := c.leader("q"); return b != nil && b != old })
	c.net.reconnect(id)
	r := answer(t, res)
	if r.Code != CodeNotLeader && r.Code != CodeNodeNotReady {
		t.Fatalf("the deposed leader answered %v, its entry was overwritten", r.Code)
	}
	if n := old.lookup("q").a.fsm.fateTally[fateDropped].Load(); n != 1 {
		t.Fatalf("%d rounds answered dropped by their fate, want 1 (was the enqueue refused before it was proposed?)", n)
	}
	now := c.awaitLeader("q")
	for _, b := range c.brokers {
		c.eventually("every node applied the new leader's entries", func() bool { return appliedOn(b) >= appliedOn(now) })
		if n := storedOn(b); n != 0 {
			t.Fatalf("node %s holds the message %d times", c.nodeOf(b), n)
		}
	}
	t.Logf("node %s deposed, node %s leads; the enqueue answered %v", id, c.nodeOf(now), r.Code)
}

// A deposed leader cut off for longer than the bound cannot learn its entry's fate: it answers
// StorageError (the outcome is unknown), not NotLeader.
func TestADeposedLeaderThatCannotLearnItsEntrysFateSaysSo(t *testing.T) {
	fateBoundSet.Store(int64(200 * time.Millisecond))
	t.Cleanup(func() { fateBoundSet.Store(0) })
	c, _ := startDeafCluster(t, 500*time.Millisecond)
	old := c.awaitLeader("q")
	id := c.nodeOf(old)
	c.net.isolate(id)
	r := answer(t, enqueueAsync(old, "unknown"))
	c.net.reconnect(id)
	if r.Code != CodeStorageError {
		t.Fatalf("the deposed leader answered %v, it could not know the entry's fate", r.Code)
	}
	if n := old.lookup("q").a.fsm.fateTally[fateUnknown].Load(); n != 1 {
		t.Fatalf("%d rounds answered unknown by their fate, want 1", n)
	}
}

// takeSink hands a subscription's deliveries to a channel.
type takeSink struct{ got chan MessageID }

func (s *takeSink) Subscribed(string) {}
func (s *takeSink) Ended(*Error)      {}
func (s *takeSink) Deliver(ds []service.Delivery, onWritten func()) bool {
	for _, d := range ds {
		s.got <- d.ID
	}
	if onWritten != nil {
		onWritten()
	}
	return true
}

// Settlements the same way: an Ack whose entry reaches the followers while its leader never
// hears so is answered Ok by the deposed leader, and the next leader no longer holds the message.
func TestADeposedLeadersCommittedAckIsAnsweredOk(t *testing.T) {
	fateBoundSet.Store(int64(30 * time.Second))
	t.Cleanup(func() { fateBoundSet.Store(0) })
	c, deaf := startDeafCluster(t, 500*time.Millisecond)
	old := c.awaitLeader("q")
	if r := answer(t, enqueueAsync(old, "m")); r.Code != CodeOk {
		t.Fatalf("enqueue: %v", r.Code)
	}
	sink := &takeSink{got: make(chan MessageID, 16)}
	if _, e := old.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c1"}, sink); e != nil {
		t.Fatal(e)
	}
	var id MessageID
	select {
	case id = <-sink.got:
	case <-time.After(time.Minute):
		t.Fatal("no delivery within a minute")
	}
	deaf[c.nodeOf(old)].Store(true)
	acked := make(chan Code, 1)
	old.Ack([]AckItem{{Queue: "q", ID: id}}, func(codes []Code, e *Error) {
		if e != nil {
			acked <- e.Code
			return
		}
		acked <- codes[0]
	})
	c.eventually("another node leads q", func() bool { b := c.leader("q"); return b != nil && b != old })
	deaf[c.nodeOf(old)].Store(false)
	var code Code
	select {
	case code = <-acked:
	case <-time.After(time.Minute):
		t.Fatal("no answer to the ack within a minute")
	}
	if code != CodeOk {
		t.Fatalf("the deposed leader answered the ack %v, its entry committed", code)
	}
	if n := old.lookup("q").a.fsm.fateTally[fateCommitted].Load(); n != 1 {
		t.Fatalf("%d rounds answered committed by their fate, want 1", n)
	}
	now := c.awaitLeader("q")
	c.eventually("the new leader no longer holds the acked message", func() bool { return storedOn(now) == 0 })
}

// The state machine's side alone: what awaitFate, decideFates and restoredFates decide.
func TestFatesAreDecidedByWhatApplies(t *testing.T) {
	const E = 7 << 32
	f := &queueFSM{}
	f.leading.Store(true) // the deposed leader's state machine before the demotion: its fence chain
	f.fence = queuelog.Fence{Epoch: E, Seq: 3}
	f.applied = 9
	outcome := func(x *fate) fateOutcome {
		select {
		case o := <-x.c:
			return o
		default:
			return fatePending
		}
	}
	await := func(index, seq uint64) *fate {
		t.Helper()
		o, x := f.awaitFate(index, queuelog.Fence{Epoch: E, Seq: seq})
		if o != fatePending {
			t.Fatalf("entry %d (seq %d) decided %v at once, with nothing applied at its index", index, seq, o)
		}
		return x
	}
	apply := func(index uint64, fence queuelog.Fence) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.applied, f.fence = index, fence
		f.decideFates(&raft.Log{Index: index, Type: raft.LogCommand})
	}

	if o, _ := f.awaitFate(8, queuelog.Fence{Epoch: E, Seq: 2}); o != fateCommitted {
		t.Fatalf("an entry of the chain applied already: %v, want committed", o)
	}
	if o, _ := f.awaitFate(9, queuelog.Fence{Epoch: E, Seq: 4}); o != fateDropped {
		t.Fatalf("an entry whose index applied another entry: %v, want dropped", o)
	}
	ours, theirs, skipped := await(10, 4), await(11, 5), await(12, 6)
	apply(10, queuelog.Fence{Epoch: E, Seq: 4})
	if o := outcome(ours); o != fateCommitted {
		t.Fatalf("its own entry applied at its index: %v, want committed", o)
	}
	apply(11, queuelog.Fence{Epoch: E, Seq: 4}) // the next leader's entry: the chain stays
	if o := outcome(theirs); o != fateDropped {
		t.Fatalf("another entry applied at its index: %v, want dropped", o)
	}
	apply(14, queuelog.Fence{Epoch: E, Seq: 4}) // 12 and 13 were no-ops: raft does not hand them over
	if o := outcome(skipped); o != fateDropped {
		t.Fatalf("a later index applied, its own not handed over: %v, want dropped", o)
	}

	covered, after := await(20, 9), await(30, 10)
	f.mu.Lock()
	f.restoredFates(25, true)
	f.mu.Unlock()
	if o := outcome(covered); o != fateUnknown {
		t.Fatalf("a snapshot restored past it: %v, want unknown", o)
	}
	if o := outcome(after); o != fatePending {
		t.Fatalf("a snapshot restored before it: %v, want still waiting", o)
	}
	if o, _ := f.awaitFate(22, queuelog.Fence{Epoch: E, Seq: 11}); o != fateUnknown {
		t.Fatalf("registered after a snapshot restored past it: %v, want unknown", o)
	}
	f.mu.Lock()
	f.restoredFates(0, false)
	f.mu.Unlock()
	if o := outcome(after); o != fateUnknown {
		t.Fatalf("a snapshot that does not say its index: %v, want unknown", o)
	}
	if late := await(40, 12); f.forgetFate(late) != fatePending || len(f.fates) != 0 {
		t.Fatalf("a fate given up on is still registered (%d waiting)", len(f.fates))
	}
}
