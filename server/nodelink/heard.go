package nodelink

import "time"

// What a follower heard of its leader's commits. raft's leader tells each follower its commit
// index in every AppendEntries but heartbeats (at least one every CommitTimeout); a follower that
// has heard it since some moment and applied up to it holds every entry committed before that
// moment. The broker asks this before it answers that a queue does not exist: a queue created
// through another node may not have reached this node's meta state yet.

// heardState is a Transport's record of the AppendEntries with a commit index it received.
type heardState struct {
	count  uint64        // such requests received
	commit uint64        // the highest commit index they carried
	next   chan struct{} // closed when the next one arrives; nil while nobody waits
}

// noteHeard records an AppendEntries carrying the leader's commit index.
func (t *Transport) noteHeard(commit uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heard.count++
	t.heard.commit = max(t.heard.commit, commit)
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
