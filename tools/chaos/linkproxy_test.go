package chaos

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
)

// backendNode stands for a node behind the proxy: it accepts connections and hands each to
// the test.
func backendNode(t *testing.T, addr string) <-chan net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	return accepted
}

// dialAs dials node to's proxy as node from and sends from's Hello.
func dialAs(t *testing.T, p *LinkProxy, from, to string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", p.Addr(int(to[0]-'0')))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(cluster.AppendFrame(nil, 0, 0, &cluster.Hello{Cluster: "c", NodeID: from, Target: to})); err != nil {
		t.Fatal(err)
	}
	return nc
}

// closedByPeer waits (a generous deadline failing the test) until c's other end closes it.
func closedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
}

// The proxy passes a node's Hello and what follows on untouched, learns the pair from the
// Hello, and a Cut closes the pair's connections and refuses its new ones until Heal, leaving
// other pairs alone.
func TestLinkProxyCutsAPairOnly(t *testing.T) {
	p, err := NewLinkProxy(3)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	flags := p.FoundingFlags()
	backends := map[int]<-chan net.Conn{}
	for id := 1; id <= 3; id++ {
		f := flags(id)
		if f[3] == p.Addr(id) || !strings.Contains(f[5], "2="+p.Addr(2)) {
			t.Fatalf("node %d's flags %v: it must listen behind its proxy, and the founders' list name the proxies", id, f)
		}
		backends[id] = backendNode(t, f[3])
	}
	hello := cluster.AppendFrame(nil, 0, 0, &cluster.Hello{Cluster: "c", NodeID: "1", Target: "2"})

	c12 := dialAs(t, p, "1", "2")
	n2 := <-backends[2]
	got := make([]byte, len(hello)+5)
	if _, err := c12.Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(n2, got); err != nil || !bytes.Equal(got, append(hello, "after"...)) {
		t.Fatalf("node 2 read %q (%v), want the Hello and what followed", got, err)
	}
	if _, err := n2.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 4)
	if _, err := io.ReadFull(c12, back); err != nil || string(back) != "back" {
		t.Fatalf("node 1 read %q (%v)", back, err)
	}
	c23 := dialAs(t, p, "2", "3")
	n3 := <-backends[3]
	for deadline := time.Now().Add(10 * time.Second); !p.Connected(2, 3); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) { // tracked just after the dial the backend accepted
			t.Fatal("the proxy does not track the connection of nodes 2 and 3")
		}
	}

	if err := p.Cut(1, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	closedByPeer(t, c12)
	closedByPeer(t, n2)
	again := dialAs(t, p, "1", "2")
	closedByPeer(t, again)
	if p.Refused.Load() != 1 || !p.Connected(2, 3) {
		t.Fatalf("refused %d, 2-3 connected %v: want 1 refused and 2-3 untouched", p.Refused.Load(), p.Connected(2, 3))
	}
	if _, err := c23.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	one := make([]byte, len(hello)+1)
	if _, err := io.ReadFull(n3, one); err != nil || one[len(one)-1] != 'x' {
		t.Fatalf("node 3 read %q (%v)", one, err)
	}

	if err := p.Heal(1, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	dialAs(t, p, "1", "2")
	select {
	case <-backends[2]:
	case <-time.After(10 * time.Second):
		t.Fatal("after Heal, node 1's new connection did not reach node 2")
	}
}

// A first frame that is not a Hello, or a Hello for another node, is closed without reaching
// the node.
func TestLinkProxyRefusesWhatIsNotAHello(t *testing.T) {
	p, err := NewLinkProxy(2)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	backend := backendNode(t, p.FoundingFlags()(2)[3])
	for _, first := range [][]byte{
		cluster.AppendFrame(nil, 0, 0, &cluster.HelloOk{NodeID: "1"}),
		cluster.AppendFrame(nil, 0, 0, &cluster.Hello{Cluster: "c", NodeID: "1", Target: "3"}),
		{0xff, 0xff, 0xff, 0xff},
	} {
		nc, err := net.Dial("tcp", p.Addr(2))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(first); err != nil {
			t.Fatal(err)
		}
		closedByPeer(t, nc)
		nc.Close()
	}
	select {
	case c := <-backend:
		t.Fatalf("a connection reached the node: %v", c.RemoteAddr())
	default:
	}
}
