package nodelink

import (
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// The lag of a group's replicas, as its leader sees it. Only the transport of the leader's node
// sees both the entries the leader sends and what each follower answers: a follower's success
// says its log matches the leader's up to the request's last entry. The leader's last entry is
// the highest index it has sent to any follower (raft sends new entries to every reachable
// follower at once), so a replica's lag is the entries some replica holds and it does not yet:
// 0 when in step, growing while it is down or slow, falling as it catches up.

// progress is what a transport has seen of its group's replication while this node leads it.
type progress struct {
	mu       sync.Mutex
	sent     uint64                   // the highest entry index sent to any follower
	match    map[raft.ServerID]uint64 // the highest entry index each follower acknowledged
	lastSend time.Time                // when this node last sent an AppendEntries of the group
	term     uint64                   // the term of the last one: a new term starts afresh
}

// lagFresh is how recently a transport must have sent an AppendEntries for its group's lag to
// be reported: a leader sends heartbeats every tenth of its heartbeat timeout to every follower,
// reachable or not; a node that sends none leads no longer (or its group sleeps).
const lagFresh = 5 * time.Second

// noteSend records an AppendEntries this node sends (after fit cut its entries). Heartbeats
// carry no index; they only say this node still leads.
func (p *progress) noteSend(args *raft.AppendEntriesRequest) {
	p.mu.Lock()
	p.lastSend = time.Now()
	if args.Term > p.term { // leading anew: what followers acknowledged before may have been cut since
		p.term, p.sent, p.match = args.Term, 0, nil
	}
	if !isHeartbeat(args) {
		p.sent = max(p.sent, lastIndexOf(args))
	}
	p.mu.Unlock()
}

// noteAnswer records a follower's answer to an AppendEntries (not a heartbeat): on success its
// log matches up to the request's last entry.
func (p *progress) noteAnswer(id raft.ServerID, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if isHeartbeat(args) || !resp.Success {
		return
	}
	p.mu.Lock()
	if p.match == nil {
		p.match = map[raft.ServerID]uint64{}
	}
	if n := lastIndexOf(args); args.Term == p.term && n > p.match[id] {
		p.match[id] = n
	}
	p.mu.Unlock()
}

func lastIndexOf(args *raft.AppendEntriesRequest) uint64 {
	if n := len(args.Entries); n > 0 {
		return args.Entries[n-1].Index
	}
	return args.PrevLogEntry
}

// ReplicaLag is how far one replica of a group is behind the group's leader on this node.
type ReplicaLag struct {
	Group   string
	Replica string // the follower's node ID
	Entries uint64 // entries the leader sent some replica that this one has not acknowledged
}

// ReplicaLag lists the lag of every follower of the groups this node leads (those whose
// followers answered at least once since it leads them), by group then replica.
func (l *Link) ReplicaLag() []ReplicaLag {
	l.mu.Lock()
	ts := make([]*Transport, 0, len(l.groups))
	for _, t := range l.groups {
		ts = append(ts, t)
	}
	l.mu.Unlock()
	now := time.Now()
	var out []ReplicaLag
	for _, t := range ts {
		p := &t.progress
		p.mu.Lock()
		if now.Sub(p.lastSend) <= lagFresh {
			for id, m := range p.match {
				out = append(out, ReplicaLag{Group: t.group, Replica: string(id), Entries: p.sent - min(m, p.sent)})
			}
		}
		p.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b ReplicaLag) int {
		if a.Group != b.Group {
			if a.Group < b.Group {
				return -1
			}
			return 1
		}
		if a.Replica < b.Replica {
			return -1
		}
		if a.Replica > b.Replica {
			return 1
		}
		return 0
	})
	return out
}

// Collector reports ReplicaLag as the gauge fila_cluster_replica_lag_entries{group,replica} on
// the node that leads each group, and the snapshots this node's link sent
// (fila_cluster_snapshots_sent_total, fila_cluster_snapshot_bytes_sent_total).
func (l *Link) Collector() prometheus.Collector { return linkCollector{l} }

var (
	lagDesc = prometheus.NewDesc("fila_cluster_replica_lag_entries",
		"Raft log entries a follower of a group this node leads has not acknowledged, of those the leader has sent to some replica "+
			"(0 in step; grows while the follower is down or slow, falls as it catches up).",
		[]string{"group", "replica"}, nil)
	snapshotsDesc = prometheus.NewDesc("fila_cluster_snapshots_sent_total",
		"Snapshots this node sent to replicas too far behind its log (InstallSnapshot).", nil, nil)
	snapshotBytesDesc = prometheus.NewDesc("fila_cluster_snapshot_bytes_sent_total",
		"Bytes of the snapshots this node sent to replicas.", nil, nil)
)

type linkCollector struct{ l *Link }

func (c linkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- lagDesc
	ch <- snapshotsDesc
	ch <- snapshotBytesDesc
}

func (c linkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.l.ReplicaLag() {
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(r.Entries), r.Group, r.Replica)
	}
	ch <- prometheus.MustNewConstMetric(snapshotsDesc, prometheus.CounterValue, float64(c.l.stats.SnapshotsSent.Load()))
	ch <- prometheus.MustNewConstMetric(snapshotBytesDesc, prometheus.CounterValue, float64(c.l.stats.SnapshotBytes.Load()))
}
