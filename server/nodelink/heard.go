package nodelink

import (
	"time"

	"github.com/hashicorp/raft"
)

// What a follower heard of its leader's commits. raft's leader tells each follower its commit
// index in every AppendEntries but heartbeats (at least one every CommitTimeout); a follower that
// has heard it since some moment and applied up to it holds every entry committed before that
// moment. The broker asks this before it answers that a queue does not exist: a queue created
// through another node may not have reached this node's meta state yet.

//
// Only a commit index that covers an entry of its sender's own term counts: a leader just elected
// sends, until its first entry commits, the commit index it knew as a follower, which may lack
// entries its predecessor committed (a follower that confirmed its meta state against it took
// over a queue made fast a moment before as committed, and redelivered what its predecessor had
// leased in memory). Once its commit index covers an entry of its term, every entry committed
// before is covered too.

// heardState is a Transport's record of the AppendEntries with a settled commit index it received.
type heardState struct {
	count  uint64        // such requests received
	commit uint64        // the highest commit index they carried
	next   chan struct{} // closed when the next one arrives; nil while nobody waits

	term      uint64 // the term of the last AppendEntries received
	termStart uint64 // the lowest index of an entry of that term seen (0: none yet)
}

// noteHeard records an AppendEntries from the group's leader; it counts when its commit index
// covers an entry of the leader's term.
func (t *Transport) noteHeard(a *raft.AppendEntriesRequest) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := &t.heard
	if a.Term != h.term {
		h.term, h.termStart = a.Term, 0
	}
	seen := func(i uint64) {
		if i > 0 && (h.termStart == 0 || i < h.termStart) {
			h.termStart = i
		}
	}
	if a.PrevLogTerm == a.Term {
		seen(a.PrevLogEntry)
	}
	for _, e := range a.Entries {
		if e.Term == a.Term {
			seen(e.Index)
			break // in index order: the first is the lowest
		}
	}
	if h.termStart == 0 || a.LeaderCommitIndex < h.termStart {
		return
	}
	h.count++
	h.commit = max(h.commit, a.LeaderCommitIndex)
	if t.heard.next != nil {
		close(t.heard.next)
		t.heard.next = nil
	}
}

// AwaitCommitHeard waits until this node's member of group has received n AppendEntries carrying
// the leader's commit index since the call, and returns the highest commit index heard; false when
// that did not happen within timeout (no leader reaches this node, or the group is not open here).
func (l *Link) AwaitCommitHeard(group string, n int, timeout time.Duration) (uint64, bool) {
	l.mu.Lock()
	t := l.groups[group]
	l.mu.Unlock()
	if t == nil {
		return 0, false
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	t.mu.Lock()
	want := t.heard.count + uint64(n)
	for t.heard.count < want {
		if t.heard.next == nil {
			t.heard.next = make(chan struct{})
		}
		next := t.heard.next
		t.mu.Unlock()
		select {
		case <-next:
		case <-timer.C:
			return 0, false
		case <-t.done:
			return 0, false
		}
		t.mu.Lock()
	}
	commit := t.heard.commit
	t.mu.Unlock()
	return commit, true
}
