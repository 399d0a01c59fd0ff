package fila_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/filamq/fila/client/fila"
)

// A first Enqueue through a follower learns the leader from the answer (the NotLeader item's
// route hint, or a forwarded item's), and the next ones go straight to the leader: the follower
// answers nothing more (its fila_errors_total, which counts NotLeader and NodeNotReady items, and
// its fila_cluster_forwarded_total stay) and the leader's fila_enqueued_total counts every message, while the follower is
// paused (SIGSTOP): whatever reached it would not be answered.
func TestClusterEnqueueFollowsRouteHints(t *testing.T) {
	tc := startTestCluster(t)
	leaderAddr := createReplicatedQueue(t, tc.seeds(), "hints")
	leader := tc.byAddr(leaderAddr)
	var follower *clusterNode
	for _, n := range tc.nodes {
		if n != leader {
			follower = n
			break
		}
	}
	c := dialTestCluster(t, []string{follower.addr}, nil)
	if _, ok := c.Route("hints"); ok {
		t.Fatal("a route before any request")
	}
	const answered = `fila_errors_total{` // every code the follower answered with, summed
	const enqueued = `fila_enqueued_total{queue="hints"}`
	ctx := context.Background()
	res, err := c.Enqueue(ctx, fila.Message{Queue: "hints", Payload: []byte("first")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("first enqueue: %v %+v", err, res)
	}
	if got, _ := c.Route("hints"); got != leaderAddr {
		t.Fatalf("route after the first enqueue %q, want the leader %s", got, leaderAddr)
	}
	const forwarded = `fila_cluster_forwarded_total` // items the follower forwarded to the leader
	f0, l0, fw0 := follower.metric(t, answered), leader.metric(t, enqueued), follower.metric(t, forwarded)
	t.Logf("after the first enqueue: the follower answered %v errors and forwarded %v items, the leader enqueued %v", f0, fw0, l0)
	// Paused, the follower answers nothing: an enqueue sent to it would wait until the test's
	// deadline.
	if err := follower.p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer follower.p.Signal(syscall.SIGCONT)
	ctx, cancel := context.WithTimeout(ctx, serverWait)
	defer cancel()
	const n = 20
	for i := range n {
		res, err := c.Enqueue(ctx, fila.Message{Queue: "hints", Payload: fmt.Appendf(nil, "m%d", i)})
		if err != nil || res[0].Err != nil {
			t.Fatalf("enqueue %d: %v %+v", i, err, res)
		}
	}
	follower.p.Signal(syscall.SIGCONT)
	if f1 := follower.metric(t, answered); f1 != f0 {
		t.Errorf("the follower answered %v more errors after the route was known", f1-f0)
	}
	if fw1 := follower.metric(t, forwarded); fw1 != fw0 {
		t.Errorf("the follower forwarded %v more items after the route was known", fw1-fw0)
	}
	if l1 := leader.metric(t, enqueued); l1 != l0+n {
		t.Errorf("the leader enqueued %v of the %d messages sent after the first", l1-l0, n)
	}
}

// A seed list that cannot be a cluster is refused with an error naming the seed: nothing
// answers at any seed, a seed is an HTTP server or a node's cluster port, seeds of two clusters.
func TestDialClusterRefusesBadSeeds(t *testing.T) {
	ctx := context.Background()
	dead := freeAddr(t) // nothing listens there any more
	_, err := fila.DialCluster(ctx, []string{dead}, nil)
	if !errors.Is(err, fila.ErrSeeds) || !strings.Contains(err.Error(), "no seed answered") || !strings.Contains(err.Error(), dead) {
		t.Errorf("unreachable seed: %v", err)
	}

	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	webAddr := strings.TrimPrefix(web.URL, "http://")
	_, err = fila.DialCluster(ctx, []string{brokerAddr, webAddr}, nil)
	if !errors.Is(err, fila.ErrSeeds) || !errors.Is(err, fila.ErrHTTPServer) || !strings.Contains(err.Error(), webAddr) {
		t.Errorf("an HTTP seed: %v", err)
	}

	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts and closes: not FIBP
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			nc, err := silent.Accept()
			if err != nil {
				return
			}
			nc.Close()
		}
	}()
	_, err = fila.DialCluster(ctx, []string{silent.Addr().String()}, nil)
	if !errors.Is(err, fila.ErrSeeds) || !strings.Contains(err.Error(), "not a Fila client (FIBP) address") {
		t.Errorf("a seed that closes the connection: %v", err)
	}

	tc := startTestCluster(t)
	// brokerAddr is the single node of the Examples: another cluster than tc's nodes.
	_, err = fila.DialCluster(ctx, []string{tc.nodes[0].addr, brokerAddr}, nil)
	if !errors.Is(err, fila.ErrSeeds) || !strings.Contains(err.Error(), "different clusters") {
		t.Errorf("seeds of two clusters: %v", err)
	}
	t.Logf("seeds of two clusters: %v", err)
	// A node's cluster port speaks the inter-node protocol, not the client's.
	_, err = fila.DialCluster(ctx, []string{tc.nodes[0].addr, tc.nodes[1].peer}, nil)
	if !errors.Is(err, fila.ErrSeeds) || !strings.Contains(err.Error(), tc.nodes[1].peer) {
		t.Errorf("a node's cluster port as a seed: %v", err)
	}
	t.Logf("a node's cluster port as a seed: %v", err)
	// One seed down among good ones is no mistake.
	c, err := fila.DialCluster(ctx, []string{dead, tc.nodes[1].addr}, nil)
	if err != nil {
		t.Fatalf("a dead seed beside a live one: %v", err)
	}
	if got := len(c.Nodes()); got < 2 {
		t.Errorf("known nodes %v: want the two seeds at least", c.Nodes())
	}
	c.Close()
}
