// Package nodelink is the link between the nodes of a Fila cluster: one TCP connection (TLS when
// configured) per node pair carries the Raft messages of every group the two nodes share and the
// requests one node hands another, in the inter-node protocol (spec/cluster.yaml,
// generated/cluster). A Link gives each of the node's Raft groups a raft.Transport of its own
// (Transport), multiplexed over those connections, and implements broker.Network.
//
// The node with the lower ID dials the other (with backoff, again after any failure) and the
// other accepts, so a pair never holds two connections. A Raft message names its group; the
// receiving link hands it to that group's transport, where the messages of one group are
// handled in order (AppendEntries is pipelined) and heartbeats take a fast path; no group waits
// for another. A Raft address is the node's ID: the group travels in the message.
//
// Partition and Heal cut a peer off and bring it back (the nemesis's seam).
package nodelink

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Config says who this node is and how it reaches the others.
type Config struct {
	// Cluster names the cluster: a node of another cluster is refused.
	Cluster string
	// NodeID is this node's ID.
	NodeID meta.NodeID
	// Listen is where the link accepts other nodes ("127.0.0.1:0" picks a port; Addr says it).
	Listen string
	// Peers are the other nodes' inter-node addresses, by ID (AddPeer adds more).
	Peers map[meta.NodeID]string
	// ServerTLS, when set, has the link accept TLS only; ClientTLS, when set, has it dial TLS.
	// Mutual TLS: ServerTLS.ClientAuth = tls.RequireAndVerifyClientCert and a client
	// certificate in ClientTLS.
	ServerTLS, ClientTLS *tls.Config
	// Timeout bounds a Raft RPC's answer, a write, a dial and a handshake (10 s when 0).
	Timeout time.Duration
	// CallTimeout bounds a forwarded request's answer (30 s when 0).
	CallTimeout time.Duration
	// ForwardTimeout bounds the answer to a client's request forwarded to a queue's leader
	// (ForwardEnqueue, ForwardSettle; 5 s when 0).
	ForwardTimeout time.Duration
	// MaxInFlight is how many AppendEntries a group's pipeline to one peer keeps in flight (4
	// when 0).
	MaxInFlight int
	// MaxFrame is the largest frame body the link sends and accepts (cluster.MaxFrameSize when
	// 0, the same on every node): an AppendEntries carries the entries that fit, raft sends the
	// rest next.
	MaxFrame int
	// Logger receives the link's events (slog.Default when nil).
	Logger *slog.Logger
}

// Handler carries out requests other nodes hand this one (the broker).
type Handler interface {
	// ProposeMeta proposes a meta entry as the meta group's leader and returns its log index
	// once applied here; raft.ErrNotLeader when this node does not lead the meta group, a
	// *meta.Refused when the meta state refused a command.
	ProposeMeta(entry []byte) (uint64, error)
}

const (
	defaultTimeout     = 10 * time.Second
	defaultCallTimeout = 30 * time.Second
	defaultInFlight    = 4
	minBackoff         = 20 * time.Millisecond
	maxBackoff         = 2 * time.Second
)

var (
	// ErrClosed answers whatever is asked of a closed link.
	ErrClosed = errors.New("nodelink: closed")
	// ErrUnreachable answers a message to a node the link has no connection to now.
	ErrUnreachable = errors.New("nodelink: node unreachable")
)

// ProtocolError is a peer that broke the inter-node protocol.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "nodelink: protocol: " + e.Msg }

// RemoteError is a request the other node answered with Error.
type RemoteError struct {
	Code    cluster.ErrorCode
	Message string
}

func (e *RemoteError) Error() string { return "nodelink: " + e.Code.String() + ": " + e.Message }

func remoteError(body []byte) error {
	var x cluster.Error
	if err := x.Decode(body); err != nil {
		return err
	}
	if x.Code == cluster.CodeNotLeader {
		return raft.ErrNotLeader
	}
	return &RemoteError{Code: x.Code, Message: x.Message}
}

// Link is this node's end of the links to every other node.
type Link struct {
	cfg  Config
	log  *slog.Logger
	ln   net.Listener
	done chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	peers   map[meta.NodeID]*peer
	groups  map[string]*Transport
	handler Handler
	admin   AdminServer // forwardadmin.go
	http    HTTPServer  // forwardhttp.go
	tokens  TokenServer // tokens.go
	closed  bool
	cluster string // cfg.Cluster, or what SetCluster set (a node that joined learns it then)

	stats Stats
}

// Stats counts what the link sent and received since it started.
type Stats struct {
	BytesSent, BytesReceived   atomic.Uint64
	FramesSent, FramesReceived atomic.Uint64
	// AppendEntries sent: heartbeats (raft's, every HeartbeatTimeout/10 per follower), others
	// without entries (raft's leader sends one every CommitTimeout per follower, to carry the
	// commit index), and with entries.
	HeartbeatsSent, EmptyAppendsSent, AppendsSent atomic.Uint64
	// HeartbeatsSpared: heartbeats answered without being sent, the follower having accepted
	// entries since the last one (spare.go).
	HeartbeatsSpared             atomic.Uint64
	SnapshotsSent, SnapshotBytes atomic.Uint64
}

// peer is another node: its address, its connection when up, and whether it is cut off.
type peer struct {
	id   meta.NodeID
	addr string
	c    *conn // nil while down
	cut  bool  // Partition: no connection until Heal
	wake chan struct{}
}

// New starts a link: it listens, and dials every peer whose ID is above this node's.
func New(cfg Config) (*Link, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("nodelink: a link needs its node's ID")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = defaultCallTimeout
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultInFlight
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxFrame <= 0 || cfg.MaxFrame > cluster.MaxFrameSize {
		cfg.MaxFrame = cluster.MaxFrameSize
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("nodelink: %w", err)
	}
	if cfg.ServerTLS != nil {
		ln = tls.NewListener(ln, cfg.ServerTLS)
	}
	l := &Link{cfg: cfg, log: cfg.Logger.With("node", string(cfg.NodeID)), ln: ln, done: make(chan struct{}),
		peers: map[meta.NodeID]*peer{}, groups: map[string]*Transport{}, cluster: cfg.Cluster}
	l.wg.Go(l.accept)
	for id, addr := range cfg.Peers {
		l.AddPeer(id, addr)
	}
	return l, nil
}

// Addr is where the link accepts other nodes.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Stats returns the link's counters.
func (l *Link) Stats() *Stats { return &l.stats }

// SetHandler has h carry out the requests other nodes hand this one (until it is set they are
// answered Unavailable).
func (l *Link) SetHandler(h Handler) {
	l.mu.Lock()
	l.handler = h
	l.mu.Unlock()
}

// AddPeer records another node's inter-node address (or changes it), and dials it when this
// node's ID is the lower.
func (l *Link) AddPeer(id meta.NodeID, addr string) {
	if id == l.cfg.NodeID {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	p := l.peers[id]
	if p == nil {
		p = &peer{id: id, wake: make(chan struct{}, 1)}
		l.peers[id] = p
		if l.cfg.NodeID < id {
			l.wg.Go(func() { l.dialLoop(p) })
		}
	}
	p.addr = addr
}

// Partition cuts node off: the connection to it closes and none is made until Heal. Raft
// messages to it fail at once, as to a node that is down.
func (l *Link) Partition(node meta.NodeID) {
	l.mu.Lock()
	p := l.peerLocked(node)
	p.cut = true
	c := p.c
	l.mu.Unlock()
	if c != nil {
		c.close(errors.New("nodelink: partitioned"))
	}
}

// Heal undoes Partition.
func (l *Link) Heal(node meta.NodeID) {
	l.mu.Lock()
	p := l.peerLocked(node)
	p.cut = false
	l.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Connected reports whether the link holds a connection to node now.
func (l *Link) Connected(node meta.NodeID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[node]
	return p != nil && p.c != nil
}

// Heard returns when a frame last arrived from node on the connection the link holds to it
// now; false when it holds none or nothing arrived on it yet. A node whose process is stopped
// (SIGSTOP) keeps its connections open, and only falls silent: its peers' groups send it
// heartbeats, which a running node answers.
func (l *Link) Heard(node meta.NodeID) (time.Time, bool) {
	l.mu.Lock()
	p := l.peers[node]
	var c *conn
	if p != nil {
		c = p.c
	}
	l.mu.Unlock()
	if c == nil {
		return time.Time{}, false
	}
	ns := c.heard.Load()
	return time.Unix(0, ns), ns != 0
}

// peerLocked is node's peer, made when unknown (an accepted node not in the configuration).
func (l *Link) peerLocked(node meta.NodeID) *peer {
	p := l.peers[node]
	if p == nil {
		p = &peer{id: node, wake: make(chan struct{}, 1)}
		l.peers[node] = p
	}
	return p
}

// Close closes every connection and stops the link; the groups' transports fail from then on.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	var conns []*conn
	for _, p := range l.peers {
		if p.c != nil {
			conns = append(conns, p.c)
		}
	}
	groups := l.groups
	l.groups = map[string]*Transport{}
	l.mu.Unlock()
	for _, t := range groups {
		t.shut() // what waits for raft is answered; raft's calls fail from now on
	}
	err := l.ln.Close()
	for _, c := range conns {
		c.close(ErrClosed)
	}
	l.wg.Wait()
	return err
}

// connTo is the connection to node, or why there is none.
func (l *Link) connTo(node meta.NodeID) (*conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	p := l.peers[node]
	if p == nil || p.c == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnreachable, node)
	}
	return p.c, nil
}

// dialLoop keeps a connection to p up: dial, greet, serve until it breaks, back off, again.
func (l *Link) dialLoop(p *peer) {
	backoff := minBackoff
	for {
		l.mu.Lock()
		addr, cut := p.addr, p.cut
		l.mu.Unlock()
		if !cut && addr != "" {
			c, err := l.dial(p.id, addr)
			if err == nil {
				backoff = minBackoff
				c.run() // until it breaks
			} else {
				l.log.Debug("nodelink: dial failed", "peer", string(p.id), "addr", addr, "err", err)
			}
		}
		select {
		case <-l.done:
			return
		case <-p.wake:
		case <-time.After(backoff):
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// dial opens a connection to node at addr and greets it.
func (l *Link) dial(node meta.NodeID, addr string) (*conn, error) {
	d := net.Dialer{Timeout: l.cfg.Timeout}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if l.cfg.ClientTLS != nil {
		tc := tls.Client(nc, clientTLS(l.cfg.ClientTLS, addr))
		_ = tc.SetDeadline(time.Now().Add(l.cfg.Timeout))
		if err := tc.Handshake(); err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	_ = nc.SetDeadline(time.Now().Add(l.cfg.Timeout))
	hello := &cluster.Hello{Cluster: l.clusterName(), NodeID: string(l.cfg.NodeID), Target: string(node)}
	if _, err := nc.Write(cluster.AppendFrame(nil, 0, 0, hello)); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c := newConn(l, node, nc)
	body, err := c.fr.Next()
	if err == nil {
		var h cluster.Header
		var rest []byte
		if h, rest, err = cluster.ParseHeader(body); err == nil {
			var ok cluster.HelloOk
			if err = expect(h.Opcode, cluster.OpHelloOk, &ok, rest); err == nil && ok.NodeID != string(node) {
				err = &ProtocolError{Msg: fmt.Sprintf("dialed node %s, reached %s", node, ok.NodeID)}
			}
		}
	}
	if err != nil {
		_ = nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	if !l.attach(c) {
		return nil, ErrClosed
	}
	return c, nil
}

// clientTLS is cfg naming addr's host as the server to verify, unless cfg names one.
func clientTLS(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cfg
	}
	cfg = cfg.Clone()
	cfg.ServerName = host
	return cfg
}

// accept greets the nodes that dial this one.
func (l *Link) accept() {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			l.log.Warn("nodelink: accept", "err", err)
			select {
			case <-l.done:
				return
			case <-time.After(minBackoff):
			}
			continue
		}
		l.wg.Go(func() { l.greet(nc) })
	}
}

// greet reads an accepted connection's Hello, answers it and serves the connection.
func (l *Link) greet(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(l.cfg.Timeout))
	c := newConn(l, "", nc)
	refuse := func(code cluster.ErrorCode, msg string) {
		_, _ = nc.Write(cluster.AppendFrame(nil, 0, 0, &cluster.Error{Code: code, Message: msg}))
		_ = nc.Close()
		l.log.Debug("nodelink: refused a node", "remote", nc.RemoteAddr().String(), "why", msg)
	}
	body, err := c.fr.Next()
	if err != nil {
		_ = nc.Close()
		return
	}
	h, rest, err := cluster.ParseHeader(body)
	if err == nil && h.Opcode == cluster.OpJoin {
		l.answerJoin(nc, h.RequestID, rest) // a node that joins (join.go)
		return
	}
	if err == nil && h.Opcode == cluster.OpFounderCheck {
		l.answerFounderCheck(nc, h.RequestID, rest) // a founder on an empty data directory (founder.go)
		return
	}
	var hello cluster.Hello
	if err == nil {
		err = expect(h.Opcode, cluster.OpHello, &hello, rest)
	}
	switch {
	case err != nil:
		refuse(cluster.CodeProtocol, err.Error())
		return
	case hello.Cluster != l.clusterName():
		refuse(cluster.CodeProtocol, fmt.Sprintf("node %s is of cluster %q, this node of %q", hello.NodeID, hello.Cluster, l.clusterName()))
		return
	case hello.Target != string(l.cfg.NodeID):
		refuse(cluster.CodeProtocol, fmt.Sprintf("this is node %s, not %s", l.cfg.NodeID, hello.Target))
		return
	case meta.NodeID(hello.NodeID) >= l.cfg.NodeID:
		refuse(cluster.CodeProtocol, fmt.Sprintf("node %s must be dialed by this node (%s), the lower ID", hello.NodeID, l.cfg.NodeID))
		return
	}
	c.peer = meta.NodeID(hello.NodeID)
	l.mu.Lock()
	cut := l.peerLocked(c.peer).cut
	l.mu.Unlock()
	if cut {
		refuse(cluster.CodeUnavailable, "partitioned")
		return
	}
	if _, err := nc.Write(cluster.AppendFrame(nil, 0, 0, &cluster.HelloOk{NodeID: string(l.cfg.NodeID)})); err != nil {
		_ = nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	if l.attach(c) {
		c.run()
	}
}

// attach makes c its peer's connection, closing the one it replaces (the peer restarted, or
// redialed after a break this side has not seen yet).
func (l *Link) attach(c *conn) bool {
	l.mu.Lock()
	p := l.peerLocked(c.peer)
	if l.closed || p.cut {
		l.mu.Unlock()
		_ = c.nc.Close()
		return false
	}
	old := p.c
	p.c = c
	l.mu.Unlock()
	if old != nil {
		old.close(errors.New("nodelink: replaced by a new connection"))
	}
	l.log.Debug("nodelink: connected", "peer", string(c.peer))
	return true
}

// detach forgets c once it has broken.
func (l *Link) detach(c *conn) {
	l.mu.Lock()
	if p := l.peers[c.peer]; p != nil && p.c == c {
		p.c = nil
	}
	l.mu.Unlock()
}

// group is the transport of group on this node (nil when none is open).
func (l *Link) group(name string) *Transport {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groups[name]
}

// Address is where node's member of group is reached: the node's ID (the group travels in
// each message).
func (l *Link) Address(node meta.NodeID, group string) raft.ServerAddress {
	return raft.ServerAddress(node)
}

var _ io.Closer = (*Link)(nil)
