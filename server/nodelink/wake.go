package nodelink

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// Sleeping groups. A Raft group that hibernates on this node (the broker stops it while its queue
// is idle: server/broker's hibernate.go) has no open transport. A Raft request for it is not
// refused: when the link's handler is a Waker, the request waits in a transport of the group that
// nobody has claimed yet, and the Waker is asked about it first. A request that changes nothing
// (a heartbeat, or an empty AppendEntries of the term the group slept in that finds its log as
// it is) is answered for the sleeping group, which stays asleep; any other wakes the group, and
// waits until the group reopens and claims the transport (Link.Transport), at most the link's
// Timeout. A group that is not this node's is answered UnknownGroup, as before.
//
// The link also tells the group's leader which commit index each follower has heard of
// (CommitKnown): a leader that falls asleep waits until its followers have learnt that the entry
// that put the group to sleep committed, so that they apply it and sleep too.

// Waker is a Handler that wakes the groups it put to sleep.
type Waker interface {
	// WakeGroup is asked about a Raft request (*raft.AppendEntriesRequest, *raft.RequestVoteRequest,
	// ...) for group, which has no open transport on this node. answered: the group sleeps here
	// and stays asleep, resp (an *raft.AppendEntriesResponse) is raft's answer. Otherwise here
	// says whether the group is this node's, and is opening now (the request waits for its
	// transport); when it is not, the request is answered UnknownGroup. It must not block long:
	// the group's requests behind this one wait for it.
	WakeGroup(group string, req any) (resp any, answered, here bool)
}

// WakesGroups reports whether the link's handler wakes sleeping groups (a Waker): only then may
// a replicated group sleep.
func (l *Link) WakesGroups() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.handler.(Waker)
	return ok
}

// CommitKnown is the highest commit index this node's member of group (its leader) has told node
// in an AppendEntries that node accepted; 0 when none, or the group has no open transport.
func (l *Link) CommitKnown(group string, node meta.NodeID) uint64 {
	t := l.group(group)
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.unclaimed {
		return 0
	}
	return t.known[raft.ServerID(node)]
}

// noteAccepted records the commit index an accepted AppendEntries told its follower.
func (t *Transport) noteAccepted(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if !resp.Success || args.LeaderCommitIndex == 0 {
		return
	}
	t.mu.Lock()
	if t.known == nil {
		t.known = map[raft.ServerID]uint64{}
	}
	if args.LeaderCommitIndex > t.known[id] {
		t.known[id] = args.LeaderCommitIndex
	}
	t.mu.Unlock()
}

// waiting is the transport of group that a request for it finds: the open one, else, when the
// handler is a Waker, one made for the request to wait in (unclaimed until the group opens); nil
// when there is neither.
func (l *Link) waiting(group string) *Transport {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t := l.groups[group]; t != nil {
		return t
	}
	w, ok := l.handler.(Waker)
	if !ok || l.closed {
		return nil
	}
	t := &Transport{l: l, group: group, consume: make(chan raft.RPC), done: make(chan struct{}), unclaimed: true, waker: w}
	l.groups[group] = t
	// A group that does not open within the timeout never will for these requests: they are
	// refused (raft sends them again).
	time.AfterFunc(l.cfg.Timeout, func() { t.closeUnclaimed() })
	return t
}

// claim hands an unclaimed transport to the group that opens (Link.Transport): the requests
// waiting in it go to the group's raft. The caller holds l.mu.
func (t *Transport) claim() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.unclaimed || t.closed {
		return false
	}
	t.unclaimed = false
	return true
}

// askWaker has the Waker answer in for a group with no open transport; it reports whether the
// request is done with (answered, or refused because the group is not here).
func (t *Transport) askWaker(in inbound) bool {
	t.mu.Lock()
	unclaimed, w := t.unclaimed, t.waker
	t.mu.Unlock()
	if !unclaimed || w == nil {
		return false
	}
	resp, answered, here := w.WakeGroup(t.group, in.rpc.Command)
	if answered {
		if fr := responseFrame(resp); fr != nil {
			_ = in.c.send(0, in.id, fr)
			return true
		}
	}
	if here {
		return false
	}
	if !t.closeUnclaimed() {
		return false // the group opened meanwhile and claimed the transport: its raft answers
	}
	t.refuse(in) // no member here: this request and those behind it are refused
	return true
}

// closeUnclaimed closes the transport unless its group has claimed it (Link.Transport, which
// claims under l.mu): false when it has. Checking and closing at once matters: a group that
// opens while the Waker is asked about a request for it (the broker's registry publishes a
// replica only once it has opened, so the Waker does not find it yet) claims this transport,
// and closing it then would leave the group's raft with a closed transport, every request for
// it refused ("group closed") until the group stops — up to a minute of elections that cannot
// be won while a queue is created or a node restarts.
func (t *Transport) closeUnclaimed() bool {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.unclaimed {
		return false
	}
	if t.l.groups[t.group] == t {
		delete(t.l.groups, t.group)
	}
	if !t.closed {
		t.closed = true
		close(t.done)
	}
	return true
}

// isUnclaimed reports whether the transport waits for its group to open.
func (t *Transport) isUnclaimed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unclaimed
}
