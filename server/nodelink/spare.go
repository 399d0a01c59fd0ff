package nodelink

import (
	"time"

	"github.com/hashicorp/raft"
)

// Heartbeats a busy group does not need. raft's leader sends each follower a heartbeat every
// tenth to fifth of its heartbeat timeout whatever else it sends; the follower's timer and the
// leader's record of the follower's last contact are both set by any AppendEntries that succeeds.
// A group that replicates entries without pause thus sends heartbeats that tell neither side
// anything: with 1,000 busy queues on three nodes they were about 5 % of a node's CPU, each a
// frame, a decode and a raft RPC on the follower.
//
// So a heartbeat to a follower is answered here, without being sent, when an AppendEntries with
// entries or a commit index that was sent to that follower after the previous heartbeat (sent or
// spared) succeeded in the same term: the follower has heard from this leader since the last
// heartbeat, as the heartbeat would have told it. Its contacts stay at most two heartbeat
// intervals apart (two fifths of the leader's timeout, below the follower's), as without. Once
// the entries stop, the next heartbeat goes out. raft reads only Success from a heartbeat's
// answer (its lastContact, and VerifyLeader's count, which nothing here calls: it would count a
// spared heartbeat as a contact made before it was asked).

// contact is what the transport knows of one follower's last success.
type contact struct {
	term  uint64    // the term of the last AppendEntries it accepted
	sent  time.Time // when that AppendEntries was sent
	beat  time.Time // when the last heartbeat to it was sent or spared
	valid bool
}

// noteContact records that follower id accepted an AppendEntries (not a heartbeat) sent at sent.
func (t *Transport) noteContact(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse, sent time.Time) {
	if !resp.Success || resp.Term != args.Term || isHeartbeat(args) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.contactOf(id)
	if !c.valid || args.Term != c.term || sent.After(c.sent) {
		c.term, c.sent, c.valid = args.Term, sent, true
	}
}

// spareHeartbeat reports whether the heartbeat args to id can be answered without sending it
// (and answers it in resp), recording the heartbeat's time either way.
func (t *Transport) spareHeartbeat(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.contactOf(id)
	spare := c.valid && c.term == args.Term && c.sent.After(c.beat)
	c.beat = now
	if spare {
		*resp = raft.AppendEntriesResponse{Term: args.Term, Success: true}
	}
	return spare
}

// contactOf is follower id's record, made on first use; the caller holds t.mu.
func (t *Transport) contactOf(id raft.ServerID) *contact {
	if t.contacts == nil {
		t.contacts = map[raft.ServerID]*contact{}
	}
	c := t.contacts[id]
	if c == nil {
		c = &contact{}
		t.contacts[id] = c
	}
	return c
}
