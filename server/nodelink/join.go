package nodelink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/meta"
)

// Joining. A node that is not a founding member joins through any member's inter-node address:
// it opens a connection with Join in place of Hello (it knows neither the cluster's name nor the
// member's ID yet), the member answers JoinOk (the cluster's name and members) or Error, and the
// connection closes. The member's Admitter (the broker) records the node through the meta
// leader, handing the request on to it (ForwardJoin) when it does not lead the meta group.

// Admitter is an optional ability of a Handler, found by type assertion: it admits a node that
// joins the cluster. Until the handler is set, or when it has not this ability, a Join is
// answered Unavailable.
type Admitter interface {
	// Admit makes n a member of the cluster and returns the members once it is one (n among
	// them), and the meta log index its admission is applied at (0 when it was a member
	// already). fresh: n's data directory held no cluster state (Join's fresh). A node that does
	// not lead the meta group hands the request to the one that does (ForwardJoin), unless it
	// was handed on already (forwarded): then it answers raft.ErrNotLeader. A *meta.Refused when
	// n may not join (another node has its ID, a fresh node under a member's ID).
	Admit(n meta.Node, fresh, forwarded bool) (members []meta.Node, admittedAt uint64, err error)
}

// JoinRefused is a Join the cluster turned down for good (another node has the ID, the data
// directory belongs to another cluster): asking again changes nothing.
type JoinRefused struct{ Message string }

func (e *JoinRefused) Error() string { return e.Message }

// SetCluster names the cluster once a node that joined has learnt it: until then, it accepts no
// other node (their Hello names a cluster this link does not know).
func (l *Link) SetCluster(name string) {
	l.mu.Lock()
	l.cluster = name
	l.mu.Unlock()
}

func (l *Link) clusterName() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cluster
}

// answerJoin answers a Join that opened a connection (a node that joins), then closes it.
func (l *Link) answerJoin(nc net.Conn, id uint32, body []byte) {
	defer nc.Close()
	var x cluster.Join
	answer := l.admit(&x, x.Decode(body), false)
	_ = nc.SetWriteDeadline(time.Now().Add(l.cfg.Timeout))
	_, _ = nc.Write(cluster.AppendFrame(nil, 0, id, answer))
}

// joinRequest answers a Join another member handed on, on its connection.
func (c *conn) joinRequest(id uint32, body []byte) error {
	var x cluster.Join
	if err := x.Decode(body); err != nil {
		return err
	}
	go func() { _ = c.send(0, id, c.l.admit(&x, nil, true)) }()
	return nil
}

// admit has the handler admit the node x describes and returns the answer: JoinOk or Error.
func (l *Link) admit(x *cluster.Join, decodeErr error, forwarded bool) cluster.Frame {
	refuse := func(code cluster.ErrorCode, format string, args ...any) cluster.Frame {
		return &cluster.Error{Code: code, Message: fmt.Sprintf(format, args...)}
	}
	name := l.clusterName()
	l.mu.Lock()
	a, _ := l.handler.(Admitter)
	l.mu.Unlock()
	switch {
	case decodeErr != nil:
		return refuse(cluster.CodeProtocol, "Join: %v", decodeErr)
	case x.NodeID == "" || x.Address == "":
		return refuse(cluster.CodeProtocol, "Join: a node that joins gives its ID and inter-node address")
	case name == "":
		return refuse(cluster.CodeUnavailable, "node %s has not joined a cluster itself yet", l.cfg.NodeID)
	case x.Cluster != "" && x.Cluster != name:
		return refuse(cluster.CodeRefused, "node %s's data directory belongs to cluster %s; node %s (the join address) is of cluster %s: "+
			"start node %s without join to rejoin its own cluster, or with an empty data directory to join this one",
			x.NodeID, x.Cluster, l.cfg.NodeID, name, x.NodeID)
	case a == nil:
		return refuse(cluster.CodeUnavailable, "node %s admits no node yet", l.cfg.NodeID)
	}
	members, at, err := a.Admit(meta.Node{ID: meta.NodeID(x.NodeID), Address: x.Address, Advertise: x.Advertise}, x.Fresh, forwarded)
	var refused *meta.Refused
	switch {
	case err == nil:
	case errors.As(err, &refused):
		return refuse(cluster.CodeRefused, "%s", refused.Message)
	case errors.Is(err, raft.ErrNotLeader):
		return refuse(cluster.CodeNotLeader, "%v", err)
	default:
		return refuse(cluster.CodeUnavailable, "%v", err)
	}
	ok := &cluster.JoinOk{Cluster: name, Members: make([]cluster.Member, len(members)), AdmittedAt: at}
	for i, m := range members {
		ok.Members[i] = cluster.Member{NodeID: string(m.ID), Address: m.Address, Advertise: m.Advertise}
	}
	return ok
}

// ForwardJoin hands a node's Join to leader, which leads the meta group, and returns the members
// and admission index it answers with: raft.ErrNotLeader when it does not lead, a *meta.Refused
// when the node may not join.
func (l *Link) ForwardJoin(leader meta.NodeID, n meta.Node, fresh bool) ([]meta.Node, uint64, error) {
	c, err := l.connTo(leader)
	if err != nil {
		return nil, 0, err
	}
	var members []meta.Node
	var at uint64
	req := &cluster.Join{Cluster: l.clusterName(), NodeID: string(n.ID), Address: n.Address, Advertise: n.Advertise, Fresh: fresh}
	err = c.roundTrip(req, l.cfg.CallTimeout, func(op cluster.Opcode, body []byte) error {
		ok, err := joinAnswer(op, body)
		if err == nil {
			members, at = membersOf(ok), ok.AdmittedAt
		}
		return err
	})
	var refused *JoinRefused
	if errors.As(err, &refused) {
		return nil, 0, &meta.Refused{Code: meta.CodeInvalidNode, Message: refused.Message}
	}
	return members, at, err
}

// joinAnswer decodes the answer to a Join: JoinOk, or the Error it is (a *JoinRefused when the
// cluster refused the node).
func joinAnswer(op cluster.Opcode, body []byte) (*cluster.JoinOk, error) {
	var ok cluster.JoinOk
	if err := expect(op, cluster.OpJoinOk, &ok, body); err != nil {
		var re *RemoteError
		if errors.As(err, &re) && re.Code == cluster.CodeRefused {
			return nil, &JoinRefused{Message: re.Message}
		}
		return nil, err
	}
	return &ok, nil
}

func membersOf(ok *cluster.JoinOk) []meta.Node {
	out := make([]meta.Node, len(ok.Members))
	for i, m := range ok.Members {
		out[i] = meta.Node{ID: meta.NodeID(m.NodeID), Address: m.Address, Advertise: m.Advertise}
	}
	return out
}

// JoinConfig says how a node joins through a member.
type JoinConfig struct {
	// Through is a member's inter-node address.
	Through string
	// Node is the node that joins: its ID, inter-node address (the address other nodes dial)
	// and advertised address.
	Node meta.Node
	// Cluster is the cluster the node's data directory belongs to (empty on its first join).
	Cluster string
	// Fresh: the node's data directory held no cluster state when it started (Join's fresh).
	Fresh bool
	// TLS, when set, has the node dial TLS (the link's ClientTLS).
	TLS *tls.Config
	// Timeout bounds one attempt (10 s when 0).
	Timeout time.Duration
	// Logger receives each failed attempt (slog.Default when nil).
	Logger *slog.Logger
}

// JoinResult is what a member answered a node that joined with.
type JoinResult struct {
	// Cluster is the cluster's name.
	Cluster string
	// Members are the cluster's nodes, the joining one among them.
	Members []meta.Node
	// AdmittedAt is the meta log index the node's admission is applied at (0: it was a member).
	AdmittedAt uint64
}

// Join asks the member at cfg.Through to make cfg.Node a member, again with backoff (each
// failure logged) until the cluster answers or ctx ends: a *JoinRefused when it turns the node
// down.
func Join(ctx context.Context, cfg JoinConfig) (JoinResult, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		res, err := joinOnce(ctx, cfg)
		var refused *JoinRefused
		if err == nil || errors.As(err, &refused) {
			return res, err
		}
		cfg.Logger.Warn("joining the cluster: no answer yet, trying again", "through", cfg.Through, "attempt", attempt,
			"retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("joining the cluster through %s: %w (last: %v)", cfg.Through, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// joinOnce is one attempt of Join.
func joinOnce(ctx context.Context, cfg JoinConfig) (JoinResult, error) {
	var res JoinResult
	err := openingCall(ctx, cfg.Through, cfg.TLS, cfg.Timeout, func(local net.Addr) cluster.Frame {
		return &cluster.Join{Cluster: cfg.Cluster, NodeID: string(cfg.Node.ID), Address: dialable(cfg.Node.Address, local),
			Advertise: cfg.Node.Advertise, Fresh: cfg.Fresh}
	}, func(op cluster.Opcode, body []byte) error {
		ok, err := joinAnswer(op, body)
		if err == nil {
			res = JoinResult{Cluster: ok.Cluster, Members: membersOf(ok), AdmittedAt: ok.AdmittedAt}
		}
		return err
	})
	return res, err
}

// openingCall opens a connection to the link at addr (TLS with tlsCfg, when set) for one request
// in place of Hello — req builds it, given the connection's local address — and hands answer the
// frame the member answers with before it closes the connection; timeout bounds the whole call.
func openingCall(ctx context.Context, addr string, tlsCfg *tls.Config, timeout time.Duration,
	req func(local net.Addr) cluster.Frame, answer func(op cluster.Opcode, body []byte) error) error {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(timeout))
	if tlsCfg != nil {
		tc := tls.Client(nc, clientTLS(tlsCfg, addr))
		if err := tc.Handshake(); err != nil {
			return err
		}
		nc = tc
	}
	if _, err := nc.Write(cluster.AppendFrame(nil, 0, 1, req(nc.LocalAddr()))); err != nil {
		return err
	}
	body, err := wire.NewFrameReader(nc, cluster.MinFrameSize, cluster.MaxFrameSize).Next()
	if err != nil {
		return err
	}
	h, rest, err := cluster.ParseHeader(body)
	if err != nil {
		return err
	}
	return answer(h.Opcode, rest)
}

// dialable is addr with an unspecified host (a link listening on every interface) replaced by
// local's: the address the member saw this node come from, which the others can dial too.
func dialable(addr string, local net.Addr) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return addr
	}
	if tcp, ok := local.(*net.TCPAddr); ok {
		return net.JoinHostPort(tcp.IP.String(), port)
	}
	return addr
}
