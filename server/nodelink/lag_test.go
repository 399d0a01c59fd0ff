package nodelink

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/filamq/fila/server/meta"
)

// lagOf is the lag the leader's link reports for replica of group q (-1 when none).
func lagOf(l *Link, replica meta.NodeID) int64 {
	for _, r := range l.ReplicaLag() {
		if r.Group == "q" && r.Replica == string(replica) {
			return int64(r.Entries)
		}
	}
	return -1
}

// A follower cut off from its leader falls behind by the entries committed without it, which
// its leader's link reports (fila_cluster_replica_lag_entries); healed, it catches up and its lag
// falls back to 0. Only the leader's node reports the group.
func TestReplicaLagIsReportedByTheLeader(t *testing.T) {
	tr := newTrio(t, nil)
	g := tr.startGroup("q", nil)
	g.apply(t, nil, 10, "before")
	g.waitApplied(t, 10, tr.ids...)
	lead := g.leader(t)
	behind := without(tr.ids, lead)[0]
	eventually(t, "both followers in step", func() bool {
		return lagOf(tr.links[lead], behind) == 0 && lagOf(tr.links[lead], without(tr.ids, lead)[1]) == 0
	})
	for _, id := range tr.ids {
		if id != lead && len(tr.links[id].ReplicaLag()) != 0 {
			t.Fatalf("node %s, a follower, reports lag: %v", id, tr.links[id].ReplicaLag())
		}
	}

	tr.links[lead].Partition(behind)
	tr.links[behind].Partition(lead)
	g.apply(t, []meta.NodeID{lead}, 50, "during")
	if got := lagOf(tr.links[lead], behind); got < 50 {
		t.Fatalf("the follower cut off while 50 entries committed lags %d entries", got)
	}
	if got := lagOf(tr.links[lead], without(without(tr.ids, lead), behind)[0]); got > 50 {
		t.Fatalf("the follower in step lags %d entries", got)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(tr.links[lead].Collector())
	if n, err := testutil.GatherAndCount(reg, "fila_cluster_replica_lag_entries"); err != nil || n != 2 {
		t.Fatalf("the leader's gauge has %d series (%v), want one per follower", n, err)
	}

	tr.links[lead].Heal(behind)
	tr.links[behind].Heal(lead)
	tr.waitConnected()
	eventually(t, "the healed follower's lag falls to 0", func() bool { return lagOf(tr.links[lead], behind) == 0 })
	g.waitApplied(t, 60, tr.ids...)
}
