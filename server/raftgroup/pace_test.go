package raftgroup

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// threeGroups opens one group on each of three in-memory transports connected to each other,
// with heartbeat timeout hb.
func threeGroups(t *testing.T, hb time.Duration) []*Group {
	t.Helper()
	var trans []*raft.InmemTransport
	var peers []raft.Server
	for i := range 3 {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprint(i + 1)))
		trans = append(trans, tr)
		peers = append(peers, raft.Server{ID: raft.ServerID(addr), Address: addr})
	}
	for _, a := range trans {
		for _, b := range trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	var groups []*Group
	for i, tr := range trans {
		g, err := Open(Config{Store: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(), LocalID: peers[i].ID,
			Transport: tr, Peers: peers, HeartbeatTimeout: hb, Logger: hclog.NewNullLogger()}, &countFSM{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Shutdown() })
		groups = append(groups, g)
	}
	return groups
}

// paced waits until one group leads with leaderPace×hb and the others follow it with hb, and
// returns the leader's index.
func paced(t *testing.T, groups []*Group, hb time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a safety net: elections on a loaded machine
	for {
		leader, ok := -1, true
		for i, g := range groups {
			want := hb
			if g.Leader() {
				leader, want = i, leaderPace*hb
			} else if g.LeaderID() == "" {
				ok = false // an election: the roles are not settled
			}
			if g.HeartbeatTimeout() != want {
				ok = false
			}
		}
		if ok && leader >= 0 {
			return leader
		}
		if time.Now().After(deadline) {
			for i, g := range groups {
				t.Logf("group %d: leader %v, heartbeat timeout %v", i, g.Leader(), g.HeartbeatTimeout())
			}
			t.Fatal("the groups' heartbeat timeouts do not follow their roles")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A leader sends heartbeats at half the pace its followers' timeout alone would set (it holds
// twice their timeout), and a node's timeout follows its role when the leadership moves.
func TestHeartbeatsArePacedByRole(t *testing.T) {
	const hb = 200 * time.Millisecond
	groups := threeGroups(t, hb)
	leader := paced(t, groups, hb)
	next := (leader + 1) % len(groups)
	if err := groups[leader].TransferLeadership(raft.ServerID(fmt.Sprint(next+1)), raft.ServerAddress(fmt.Sprint(next+1))); err != nil {
		t.Fatal(err)
	}
	if now := paced(t, groups, hb); now == leader {
		t.Fatalf("group %d still leads after the transfer to %d", leader, next)
	}
}

// A group of this node alone keeps its configured timeout, as before groups had peers.
func TestAGroupWithoutPeersIsNotPaced(t *testing.T) {
	g, err := Open(Config{Store: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore(), HeartbeatTimeout: time.Second}, &countFSM{})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Shutdown()
	if err := g.Lead(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := g.HeartbeatTimeout(); got != time.Second {
		t.Fatalf("heartbeat timeout %v, want the configured 1s", got)
	}
}
