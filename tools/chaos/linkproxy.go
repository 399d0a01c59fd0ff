package chaos

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/tools/internal/loopback"
)

// LinkProxy stands between the nodes of a cluster on loopback and cuts the links between them
// on demand: the nemesis's partitions between real processes, with no hook in the server.
//
// Each node listens (--cluster-listen) on an address of its own, and the founders' list
// (--initial-cluster) names, for each node, a proxy in front of it instead: every node dials
// every other through the other's proxy. The proxy reads the first frame of each connection,
// the node link's Hello (which names the dialing node and the node it means to reach), to know
// which pair of nodes the connection joins, then forwards the bytes both ways untouched. Cut
// closes the connections of a pair and refuses the pair's new ones (closed once their Hello is
// read, as a node that is unreachable) until Heal: both nodes see the link break, as under a
// partition, while clients still reach both.
//
// The proxy reads Hello in clear: it cannot stand between nodes that speak TLS to each other.
type LinkProxy struct {
	fronts []*proxyFront // by node ID - 1

	mu     sync.Mutex
	cut    map[nodePair]bool
	conns  map[nodePair]map[*proxyConn]struct{}
	closed bool
	wg     sync.WaitGroup

	// Forwarded counts the bytes the proxy forwarded, both ways; Refused the connections it
	// closed because their pair was cut.
	Forwarded, Refused atomic.Uint64
}

// nodePair is two node IDs, the lower first.
type nodePair [2]int

func pairOf(a, b int) nodePair {
	if a > b {
		a, b = b, a
	}
	return nodePair{a, b}
}

// proxyFront is the proxy in front of one node: where the others dial it, and where it listens.
type proxyFront struct {
	node    int
	ln      net.Listener
	backend string // the node's --cluster-listen
}

// proxyConn is one forwarded connection: the dialer's and the one to the node it reached.
type proxyConn struct{ from, to net.Conn }

func (c *proxyConn) close() {
	_ = c.from.Close()
	_ = c.to.Close()
}

// NewLinkProxy starts the proxies of nodes 1..n on loopback, each in front of an address free
// a moment ago that its node is to listen on (FoundingFlags gives it).
func NewLinkProxy(n int) (*LinkProxy, error) {
	p := &LinkProxy{cut: map[nodePair]bool{}, conns: map[nodePair]map[*proxyConn]struct{}{}}
	for id := 1; id <= n; id++ {
		backend, err := loopback.FreeAddr()
		if err != nil {
			p.Close()
			return nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.Close()
			return nil, err
		}
		f := &proxyFront{node: id, ln: ln, backend: backend}
		p.fronts = append(p.fronts, f)
		p.wg.Go(func() { p.accept(f) })
	}
	return p, nil
}

// FoundingFlags are the cluster flags of the proxied founders, for StartCluster's args: node
// id listens on its own address and the founders' list names the proxies. A node restarted
// keeps its flags.
func (p *LinkProxy) FoundingFlags() func(id int) []string {
	var founders []string
	for _, f := range p.fronts {
		founders = append(founders, fmt.Sprintf("%d=%s", f.node, f.ln.Addr()))
	}
	initial := strings.Join(founders, ",")
	return func(id int) []string {
		return []string{"--node-id", fmt.Sprint(id), "--cluster-listen", p.fronts[id-1].backend, "--initial-cluster", initial}
	}
}

// Addr is the address of the proxy in front of node (the one the founders' list gives it).
func (p *LinkProxy) Addr(node int) string { return p.fronts[node-1].ln.Addr().String() }

// Cut partitions node from others: the connections between them close, and new ones are
// refused until Heal.
func (p *LinkProxy) Cut(node int, others []int) error {
	var drop []*proxyConn
	p.mu.Lock()
	for _, o := range others {
		pr := pairOf(node, o)
		p.cut[pr] = true
		for c := range p.conns[pr] {
			drop = append(drop, c)
		}
	}
	p.mu.Unlock()
	for _, c := range drop {
		c.close()
	}
	return nil
}

// Heal undoes Cut: the nodes' links redial by themselves.
func (p *LinkProxy) Heal(node int, others []int) error {
	p.mu.Lock()
	for _, o := range others {
		delete(p.cut, pairOf(node, o))
	}
	p.mu.Unlock()
	return nil
}

// Connected reports whether a forwarded connection joins a and b now.
func (p *LinkProxy) Connected(a, b int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns[pairOf(a, b)]) > 0
}

// Partition is the nemesis that isolates a random node from the others through the proxy.
func (p *LinkProxy) Partition() Partition {
	var nodes []int
	for _, f := range p.fronts {
		nodes = append(nodes, f.node)
	}
	return Partition{Nodes: nodes, Cut: p.Cut, Heal: p.Heal}
}

// Close stops the proxies and closes every connection they forward.
func (p *LinkProxy) Close() {
	p.mu.Lock()
	p.closed = true
	var drop []*proxyConn
	for _, cs := range p.conns {
		for c := range cs {
			drop = append(drop, c)
		}
	}
	p.mu.Unlock()
	for _, f := range p.fronts {
		_ = f.ln.Close()
	}
	for _, c := range drop {
		c.close()
	}
	p.wg.Wait()
}

func (p *LinkProxy) accept(f *proxyFront) {
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Go(func() { p.forward(f, nc) })
	}
}

// helloWait bounds the wait for a dialer's Hello and for the dial to its node.
const helloWait = 10 * time.Second

// forward reads the dialer's Hello, and unless its pair is cut, dials the node, passes the Hello
// on and copies both ways until either side closes.
func (p *LinkProxy) forward(f *proxyFront, from net.Conn) {
	_ = from.SetReadDeadline(time.Now().Add(helloWait))
	hello, raw, err := readHello(from)
	_ = from.SetReadDeadline(time.Time{})
	if err != nil {
		_ = from.Close()
		return
	}
	dialer, err := strconv.Atoi(hello.NodeID)
	if err != nil || hello.Target != strconv.Itoa(f.node) {
		_ = from.Close() // not a node of this proxy's cluster: refused as a node would refuse it
		return
	}
	pr := pairOf(dialer, f.node)
	if p.isCut(pr) {
		p.Refused.Add(1)
		_ = from.Close()
		return
	}
	to, err := net.DialTimeout("tcp", f.backend, helloWait)
	if err != nil {
		_ = from.Close()
		return
	}
	c := &proxyConn{from: from, to: to}
	if !p.track(pr, c) {
		p.Refused.Add(1)
		c.close()
		return
	}
	defer p.untrack(pr, c)
	if _, err := to.Write(raw); err != nil {
		c.close()
		return
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		n, _ := io.Copy(dst, src)
		p.Forwarded.Add(uint64(n))
		c.close() // one side gone: the other sees it as a node would
	}
	wg.Go(func() { pipe(to, from) })
	pipe(from, to)
	wg.Wait()
}

func (p *LinkProxy) isCut(pr nodePair) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut[pr]
}

// track records c as a connection of pr, unless pr was cut (or the proxy closed) meanwhile.
func (p *LinkProxy) track(pr nodePair, c *proxyConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.cut[pr] {
		return false
	}
	if p.conns[pr] == nil {
		p.conns[pr] = map[*proxyConn]struct{}{}
	}
	p.conns[pr][c] = struct{}{}
	return true
}

func (p *LinkProxy) untrack(pr nodePair, c *proxyConn) {
	p.mu.Lock()
	delete(p.conns[pr], c)
	p.mu.Unlock()
}

// maxHello bounds the first frame the proxy reads: a Hello is three short strings.
const maxHello = 4096

// readHello reads a connection's first frame, which must be a Hello, and returns it with its
// bytes as read.
func readHello(r io.Reader) (cluster.Hello, []byte, error) {
	var hello cluster.Hello
	raw := make([]byte, cluster.LengthSize)
	if _, err := io.ReadFull(r, raw); err != nil {
		return hello, nil, err
	}
	n := binary.BigEndian.Uint32(raw)
	if n < cluster.MinFrameSize || n > maxHello {
		return hello, nil, fmt.Errorf("chaos: a first frame of %d bytes is no Hello", n)
	}
	raw = slices.Grow(raw, int(n))[:cluster.LengthSize+int(n)]
	if _, err := io.ReadFull(r, raw[cluster.LengthSize:]); err != nil {
		return hello, nil, err
	}
	h, body, err := cluster.ParseHeader(raw[cluster.LengthSize:])
	if err != nil {
		return hello, nil, err
	}
	if h.Opcode != cluster.OpHello {
		return hello, nil, errors.New("chaos: the first frame is " + h.Opcode.String() + ", not Hello")
	}
	if err := hello.Decode(body); err != nil {
		return hello, nil, err
	}
	return hello, raw, nil
}
