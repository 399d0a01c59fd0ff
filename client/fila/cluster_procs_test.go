package fila_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
	"github.com/filamq/fila/client/internal/serverproc"
)

// A three-node cluster of real fila-server processes on loopback, for the Cluster's tests.

// clusterNode is one node of a test cluster; it keeps its addresses and data over restarts.
type clusterNode struct {
	id      int
	dir     string
	addr    string // FIBP, fixed so that a restarted node keeps the address the others recorded
	peer    string // --cluster-listen
	args    []string
	p       *serverproc.Process
	metrics string // http://host:port/metrics of the current process
}

type testCluster struct {
	t     *testing.T
	nodes []*clusterNode
}

// freeAddr is a loopback address free a moment ago, for a node's inter-node address, which
// initial_cluster names before any node starts (so port 0 cannot do).
func freeAddr(t *testing.T) string { return serverproc.FreeAddr(t) }

// startTestCluster starts three founders (they are ready together: a founder writes its
// addresses once the meta group has a leader).
func startTestCluster(t *testing.T) *testCluster {
	t.Helper()
	cl := &testCluster{t: t}
	var founders []string
	for id := 1; id <= 3; id++ {
		peer := freeAddr(t)
		n := &clusterNode{id: id, dir: t.TempDir(), addr: freeAddr(t), peer: peer}
		founders = append(founders, fmt.Sprintf("%d=%s", id, peer))
		n.args = []string{"--node-id", strconv.Itoa(id), "--cluster-listen", peer}
		cl.nodes = append(cl.nodes, n)
	}
	for _, n := range cl.nodes {
		n.args = append(n.args, "--initial-cluster", strings.Join(founders, ","), "--http-listen", "127.0.0.1:0")
	}
	errs := make([]error, len(cl.nodes))
	var wg sync.WaitGroup
	for i, n := range cl.nodes {
		wg.Go(func() { errs[i] = n.start() })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range cl.nodes {
			if n.p != nil && n.p.Running() {
				n.p.Kill()
			}
			if t.Failed() && n.p != nil {
				t.Logf("node %d's log:\n%s", n.id, n.p.Log.String())
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	cl.waitAddressesRecorded()
	return cl
}

// waitAddressesRecorded waits until every node lists every member's client address (each node
// records its own in the meta state a moment after the cluster formed): until then route hints
// and NotLeader may name no address.
func (c *testCluster) waitAddressesRecorded() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	for _, n := range c.nodes {
		cl, err := fila.Dial(ctx, n.addr, nil)
		if err != nil {
			c.t.Fatal(err)
		}
		for {
			st, err := cl.GetClusterStatus(ctx)
			if err == nil && len(st.Nodes) == len(c.nodes) && !slices.ContainsFunc(st.Nodes, func(s fila.NodeStatus) bool { return s.Addr == "" }) {
				break
			}
			if ctx.Err() != nil {
				c.t.Fatalf("node %d does not list every member's address: %+v %v", n.id, st, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cl.Close()
	}
}

func (n *clusterNode) start() error {
	p, a, err := serverproc.Start(serverBin, n.dir, n.addr, serverWait, n.args...)
	if err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	n.p, n.metrics = p, "http://"+a.HTTP+"/metrics"
	return nil
}

func (c *testCluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.addr)
	}
	return s
}

func (c *testCluster) byAddr(addr string) *clusterNode {
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	c.t.Fatalf("no node at %s", addr)
	return nil
}

// metric sums the node's samples whose series starts with series (name{labels} as exposed, or
// a prefix of it such as name{); 0 when there are none.
func (n *clusterNode) metric(t *testing.T, series string) float64 {
	t.Helper()
	resp, err := http.Get(n.metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sum float64
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, series) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// dialTestCluster dials seeds with a bound on each call's retries that fails a test before its
// deadline rather than hanging.
func dialTestCluster(t *testing.T, seeds []string, o *fila.Options) *fila.Cluster {
	t.Helper()
	if o == nil {
		o = &fila.Options{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	c, err := fila.DialCluster(ctx, seeds, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// createReplicatedQueue creates queue through any node, waits until its group takes an enqueue
// (a warm-up message) and returns its leader's address, with a Cluster of its own so that the
// caller's knows no route yet.
func createReplicatedQueue(t *testing.T, seeds []string, queue string) string {
	t.Helper()
	c := dialTestCluster(t, seeds, nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), serverWait)
	defer cancel()
	any, err := c.Any(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := any.CreateQueue(ctx, fila.QueueConfig{Name: queue}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Enqueue(ctx, fila.Message{Queue: queue, Payload: []byte("warm-up")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("first enqueue to %s: %v %+v", queue, err, res)
	}
	leader, ok := c.Route(queue)
	if !ok {
		t.Fatalf("no route to %s after an enqueue", queue)
	}
	return leader
}
