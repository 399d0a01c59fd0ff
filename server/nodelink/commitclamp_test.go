package nodelink

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// A follower whose log ends with entries a leader of an older term appended and nobody else has
// (a deposed leader, stopped and continued) must not commit them when the new leader's
// AppendEntries ends before them: only entries up to the request's last one (or its previous
// entry, when it carries none) are checked against the leader's log. hashicorp/raft commits up to
// min(leader's commit, its own last index); the node link hands it the request's commit index cut
// to the request's last entry (convert.go), so the stale entry is neither committed nor applied
// until the leader's own entry at its index replaces it.
func TestAFollowerCommitsNoEntryTheRequestDidNotCheck(t *testing.T) {
	tr := newTrio(t, nil)
	const name = "g"
	var servers []raft.Server
	for _, id := range tr.ids {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: tr.links[id].Address(id, name)})
	}
	// n2 follows with entries 2..10 of term 1; entry 10 is the old leader's, which the new
	// leader (term 2) does not have.
	conf := raft.DefaultConfig()
	conf.LocalID = "n2"
	conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Minute, time.Minute, time.Second
	conf.Logger = hclog.NewNullLogger()
	trans, err := tr.links["n2"].Transport(name)
	if err != nil {
		t.Fatal(err)
	}
	store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(2); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: fmt.Appendf(nil, "e%d", i)})
	}
	if err := store.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	fsm := &counter{}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })

	// The new leader, n1, in term 2: its entry 9 is the follower's, its commit index 10 (its own
	// entry 10, of term 2). An AppendEntries that carries nothing past 9.
	leader, err := tr.links["n1"].Transport(name)
	if err != nil {
		t.Fatal(err)
	}
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("n1"), Addr: []byte(tr.links["n1"].Address("n1", name))},
		Term: 2, PrevLogEntry: 9, PrevLogTerm: 1, LeaderCommitIndex: 10}
	var resp raft.AppendEntriesResponse
	if err := leader.AppendEntries("n2", tr.links["n1"].Address("n2", name), req, &resp); err != nil {
		t.Fatal(err)
	}
	if !resp.Success {
		t.Fatalf("the follower refused an AppendEntries whose previous entry it has: %+v", resp)
	}
	if got := r.AppliedIndex(); got != 9 {
		t.Fatalf("the follower applied up to %d, want 9: entry 10, which the request never checked, is its own stale one", got)
	}
	eventually(t, "the follower's state machine applies entries 2..9", func() bool { return fsm.len() == 8 })
	time.Sleep(50 * time.Millisecond)
	if n := fsm.len(); n != 8 {
		t.Fatalf("the state machine applied %d entries, want 8 (2..9)", n)
	}

	// The leader's entry 10 replaces the stale one, and then commits.
	req = &raft.AppendEntriesRequest{RPCHeader: req.RPCHeader, Term: 2, PrevLogEntry: 9, PrevLogTerm: 1, LeaderCommitIndex: 10,
		Entries: []*raft.Log{{Index: 10, Term: 2, Type: raft.LogCommand, Data: []byte("leader's 10")}}}
	if err := leader.AppendEntries("n2", tr.links["n1"].Address("n2", name), req, &resp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the follower applies the leader's entry 10", func() bool { return fsm.len() == 9 })
	fsm.mu.Lock()
	last := string(fsm.entries[8])
	fsm.mu.Unlock()
	if last != "leader's 10" {
		t.Fatalf("entry 10 applied as %q, want the leader's", last)
	}
}
