package nodelink

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Founders on an empty data directory. A founding member found nothing in its data directory
// either on its first start or after losing it; only the cluster can tell the two apart. Before
// it writes anything, it asks every other founder (FounderCheck, on a connection of its own, in
// place of Hello) whether their meta state records that it served: a founder that lost its data
// must not take its place again empty, since its replicas would answer Raft without the log and
// votes they had (docs/cluster.md, "Replacing a node that lost its disk").

// FounderRecords is an optional ability of a Handler, found by type assertion: it reads, in this
// node's meta state, whether a node served in the cluster. Until the handler is set, or when it
// has not this ability, a FounderCheck is answered served false.
type FounderRecords interface {
	// FounderServed returns the address node id gave clients, and whether the meta state
	// records that it served (it announced that address, which a node does once it runs).
	FounderServed(id meta.NodeID) (advertise string, served bool)
}

// answerFounderCheck answers a FounderCheck that opened a connection, then closes it.
func (l *Link) answerFounderCheck(nc net.Conn, id uint32, body []byte) {
	defer nc.Close()
	var x cluster.FounderCheck
	var answer cluster.Frame
	if err := x.Decode(body); err != nil {
		answer = &cluster.Error{Code: cluster.CodeProtocol, Message: "FounderCheck: " + err.Error()}
	} else {
		answer = l.founderServed(&x)
	}
	_ = nc.SetWriteDeadline(time.Now().Add(l.cfg.Timeout))
	_, _ = nc.Write(cluster.AppendFrame(nil, 0, id, answer))
}

func (l *Link) founderServed(x *cluster.FounderCheck) *cluster.FounderCheckResult {
	l.mu.Lock()
	r, _ := l.handler.(FounderRecords)
	l.mu.Unlock()
	if r == nil || x.Cluster != l.clusterName() {
		return &cluster.FounderCheckResult{}
	}
	addr, served := r.FounderServed(meta.NodeID(x.NodeID))
	return &cluster.FounderCheckResult{Served: served, Advertise: addr}
}

// CheckFounder asks the founder at addr (TLS with tlsCfg, when set) whether its meta state
// records that node id of the cluster named clusterName served, and the address it gave clients
// then; one attempt, bounded by timeout. An error when the founder could not be asked.
func CheckFounder(ctx context.Context, addr, clusterName string, id meta.NodeID, tlsCfg *tls.Config,
	timeout time.Duration) (advertise string, served bool, err error) {
	err = openingCall(ctx, addr, tlsCfg, timeout, func(net.Addr) cluster.Frame {
		return &cluster.FounderCheck{Cluster: clusterName, NodeID: string(id)}
	}, func(op cluster.Opcode, body []byte) error {
		var res cluster.FounderCheckResult
		if err := expect(op, cluster.OpFounderCheckResult, &res, body); err != nil {
			return err
		}
		advertise, served = res.Advertise, res.Served
		return nil
	})
	return advertise, served, err
}
