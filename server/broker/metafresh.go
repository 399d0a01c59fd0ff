package broker

import (
	"time"

	"github.com/filamq/fila/server/raftgroup"
)

// A queue that this node's meta state does not hold may still exist: a CreateQueue answered by
// another node reaches this one when the meta leader tells it the entry committed, a few
// milliseconds later. A client that creates a queue through one node and uses it through another
// at once must not be told QueueNotFound meanwhile. So a node that follows the meta group answers
// QueueNotFound only once its state holds every entry committed before the question: it waits
// until it has heard the meta leader's commit index twice since then (raft's leader sends it to
// each follower at least every CommitTimeout, 50 ms; twice, so that an AppendEntries already on
// its way when the question came does not count) and has applied up to it. When it cannot within
// absentConfirmBound — no leader reaches it — it cannot tell, and answers NodeNotReady.

// absentConfirmBound bounds that wait.
const absentConfirmBound = time.Second

// commitHearer is the part of the node link that tells what a follower heard of its leader's
// commits (nodelink.Link).
type commitHearer interface {
	AwaitCommitHeard(group string, n int, timeout time.Duration) (uint64, bool)
}

// confirmAbsent answers a request for queue, which this node's meta state (g, followed, current
// as far as it knows) does not hold, once the state is confirmed current: NotLeader when the
// queue turned out to exist, QueueNotFound when it does not, NodeNotReady when the state could
// not be confirmed.
func (b *Broker) confirmAbsent(g *raftgroup.Group, queue string) Code {
	if _, ok := b.opts.Cluster.Network.(commitHearer); !ok || b.metaIndex == nil {
		return CodeQueueNotFound // a network that cannot tell (tests' fakes): as before
	}
	if !b.confirmMeta(g, absentConfirmBound) {
		return CodeNodeNotReady
	}
	if _, ok := b.catalog().Assignment(queue); ok {
		return CodeNotLeader
	}
	return CodeQueueNotFound
}

// absentMemo is absentCode for the length of one request: once the meta state was confirmed
// current for one queue it stays so for every other the request names (the wait is for entries
// committed before the request), and a queue named again keeps its answer, so a request naming
// many missing queues waits for the meta state once. The zero value is ready.
type absentMemo struct {
	codes     map[string]Code
	confirmed bool // the meta state was confirmed current during this request
}

func (m *absentMemo) code(b *Broker, queue string) Code {
	if c, ok := m.codes[queue]; ok {
		return c
	}
	if m.codes == nil {
		m.codes = map[string]Code{}
	}
	var c Code
	if m.confirmed {
		c = CodeQueueNotFound
		if _, ok := b.catalog().Assignment(queue); ok {
			c = CodeNotLeader
		}
	} else {
		c = b.absentCode(queue)
		// absentCode answers QueueNotFound only once the state is current (or on a node that
		// needs no wait): later queues of the request need no wait either.
		m.confirmed = c == CodeQueueNotFound && b.clustered()
	}
	m.codes[queue] = c
	return c
}

// metaConfirmed reports, waiting at most timeout, whether this node's meta state holds every
// entry the meta group had committed when it was asked: on the meta leader once a barrier is
// applied, at once on a network that cannot tell (tests' fakes), else as confirmAbsent confirms
// it.
func (b *Broker) metaConfirmed(timeout time.Duration) bool {
	g := b.metaGroupNow()
	if g == nil {
		return false
	}
	if _, ok := b.opts.Cluster.Network.(commitHearer); !ok || b.metaIndex == nil {
		return true
	}
	if g.Leader() { // a leader just elected applies what it inherited after its first entry
		return g.Barrier(timeout) == nil
	}
	return b.confirmMeta(g, timeout)
}

// confirmMeta waits, at most timeout, until this node, following the meta group g, has heard
// its leader's commit index twice and applied up to it.
func (b *Broker) confirmMeta(g *raftgroup.Group, timeout time.Duration) bool {
	h := b.opts.Cluster.Network.(commitHearer)
	deadline := time.Now().Add(timeout)
	commit, ok := h.AwaitCommitHeard(MetaGroup, 2, timeout)
	if !ok || g.AwaitApplied(commit, time.Until(deadline)) != nil {
		return false
	}
	for target := lastCommandUpTo(g, commit); b.metaIndex.Load() < target; {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond) // raft hands applied entries to the state machine on its own goroutine
	}
	return true
}
