package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// A fourth node (ID 10) joins a running cluster of three founders through one of them (--join): it
// learns the cluster, catches up the meta group, is listed by every node, hosts a replica of a
// queue created after it joined, and, killed and started again without --join, rejoins from its
// data directory; so do all four killed at once.
func TestAFourthNodeJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin)
	// Node 10: as bytes, "10" sorts below "2" and "3", so it dials them, and node 1 dials it.
	n4 := &clusterProc{id: 10, dir: t.TempDir()}
	clusterAddr := freeAddr(t)
	start := time.Now()
	// Through node 2: whichever node leads the meta group, the join reaches it.
	n4.launch(t, bin, clusterAddr, "--join", nodes[1].addrs.Cluster, "--replication", "4")
	n4.addrs = waitAddrFile(t, n4.addrFile, n4.p)
	t.Logf("node 10 joined and serves after %v", time.Since(start).Round(time.Millisecond))

	var founder, joiner nodeIdentity
	readJSONFile(t, filepath.Join(nodes[0].dir, identityFile), &founder)
	readJSONFile(t, filepath.Join(n4.dir, identityFile), &joiner)
	if joiner.ClusterID != founder.ClusterID || joiner.NodeID != 10 || len(joiner.Members) != 4 {
		t.Fatalf("node 10's identity %+v; want node 10 of %s with the members", joiner, founder.ClusterID)
	}

	// An admin change through it goes to the meta leader and is answered once node 10 applied
	// it: the queue created before it joined is there.
	c := fibptest.Dial(t, n4.addrs.FIBP)
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeQueueAlreadyExists {
		t.Fatalf("CreateQueue of orders on node 10: %v, want QueueAlreadyExists", r.ErrorCode)
	}
	// A queue created through it, with --replication 4, is placed on all four nodes: node 10
	// runs a replica of it (expectReplicatedOn) and the queue serves.
	if r := c.Call(2, &fibp.CreateQueue{Name: "after"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue on node 10: %v", r.ErrorCode)
	}
	c.NC.Close()
	all := append(nodes[:3:3], n4)
	for _, n := range all { // every node lists node 10, up, at the FIBP address it serves
		awaitStatusLists(t, n, n4)
	}
	leader := enqueueOnLeader(t, all, "after", "one")
	t.Logf("node %d leads after, %v after node 10's start", leader.id, time.Since(start).Round(time.Millisecond))
	expectDeliveredByLeader(t, all, "after", "one")
	expectReplicatedOn(t, all, n4, leader, "after", "two")

	// Killed and started again without --join, it rejoins from its data directory.
	n4.p.cmd.Process.Signal(syscall.SIGKILL)
	n4.p.wait()
	start = time.Now()
	n4.launch(t, bin, clusterAddr)
	n4.addrs = waitAddrFile(t, n4.addrFile, n4.p)
	t.Logf("node 10 restarted and serves after %v", time.Since(start).Round(time.Millisecond))
	leader = enqueueOnLeader(t, all, "after", "three")
	t.Logf("node %d leads after, %v after node 10's restart", leader.id, time.Since(start).Round(time.Millisecond))
	expectReplicatedOn(t, all, n4, leader, "after", "four")
	expectDeliveredByLeader(t, all, "after", "two", "three", "four") // "one" stays leased to the first subscriber

	// All four killed at once and started again with no founders' list and no join: the
	// founders find node 10 in their meta state, node 10 its members in its identity file.
	for _, n := range all {
		n.p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, n := range all {
		n.p.wait()
	}
	start = time.Now()
	for i, n := range all {
		n.launch(t, bin, []string{addrs[0], addrs[1], addrs[2], clusterAddr}[i])
	}
	for _, n := range all {
		n.addrs = waitAddrFile(t, n.addrFile, n.p)
	}
	leader = enqueueOnLeader(t, all, "after", "five")
	t.Logf("all four restarted; node %d leads after, %v after the start", leader.id, time.Since(start).Round(time.Millisecond))
	expectReplicatedOn(t, all, n4, leader, "after", "six")
	awaitStatusLists(t, nodes[0], n4)
}

// expectReplicatedOn shows that node n replicates queue, a group of four replicas: n opened a
// replica (its snapshot directory, storage's snapshots/q<hex name>, is there) and, with a node
// stopped (SIGSTOP) that is neither n nor the queue's leader a moment ago, the queue commits an
// enqueue, which takes n's vote (three of four).
func expectReplicatedOn(t *testing.T, nodes []*clusterProc, n, leader *clusterProc, queue, payload string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(n.dir, "snapshots", fmt.Sprintf("q%x", queue))); err != nil {
		t.Fatalf("node %d has no replica of %s: %v", n.id, queue, err)
	}
	var stopped *clusterProc
	var live []*clusterProc
	for _, m := range nodes {
		if stopped == nil && m != n && m != leader {
			stopped = m
			continue
		}
		live = append(live, m)
	}
	stopped.p.cmd.Process.Signal(syscall.SIGSTOP)
	defer stopped.p.cmd.Process.Signal(syscall.SIGCONT)
	by := enqueueOnLeader(t, live, queue, payload)
	t.Logf("node %d stopped, node %d took an enqueue to %s", stopped.id, by.id, queue)
}

// The joins the cluster refuses end the start with one line and exit 2: an ID another node
// has, a data directory of another cluster. An unreachable join address is tried again, with
// backoff, and logged.
func TestJoinRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, _ := formCluster(t, bin)
	env := serverEnv()
	through := nodes[0].addrs.Cluster
	refusedLine(t, bin, env, "node ID 2 is taken: node 2 of this cluster is at "+nodes[1].addrs.Cluster,
		"--log-level", "error", "--data-dir", t.TempDir(), "--node-id", "2", "--cluster-listen", "127.0.0.1:0", "--join", through)

	other := t.TempDir()
	if err := writeIdentity(other, filepath.Join(other, identityFile), nodeIdentity{Format: identityFormat, NodeID: 5,
		ClusterID: "fila-0123456789abcdef", JoinedThrough: "127.0.0.1:1", Members: []identityMember{{NodeID: "1", Address: "127.0.0.1:1"}}}); err != nil {
		t.Fatal(err)
	}
	refusedLine(t, bin, env, "node 5's data directory belongs to cluster fila-0123456789abcdef; node 1 (the join address) is of cluster",
		"--log-level", "error", "--data-dir", other, "--node-id", "5", "--cluster-listen", "127.0.0.1:0", "--join", through)

	// Nobody listens at the join address: the node says so and tries again, and is still up.
	cmd := exec.Command(bin, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "", "--node-id", "6",
		"--cluster-listen", "127.0.0.1:0", "--join", freeAddr(t))
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	retries := 0
	for sc := bufio.NewScanner(stderr); retries < 2 && sc.Scan(); {
		if strings.Contains(sc.Text(), "no answer yet, trying again") {
			retries++
		}
	}
	if retries < 2 {
		t.Fatalf("the node exited or stopped logging before trying the join twice")
	}
	if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the node with an unreachable join address is gone: %v", err)
	}
}

func readJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// expectDeliveredByLeader subscribes to queue on whichever node leads it (its leadership may
// move to its preferred leader meanwhile) and expects the payloads, in any order.
func expectDeliveredByLeader(t *testing.T, nodes []*clusterProc, queue string, payloads ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			c.Send(1, &fibp.Consume{Queue: queue, Credit: 10})
			if _, f := c.Next(); f.Opcode() != fibp.OpConsumeOk {
				c.NC.Close()
				continue
			}
			got := map[string]bool{}
			for _, d := range c.Deliveries(len(payloads)) {
				got[string(d.Payload)] = true
			}
			c.NC.Close()
			for _, p := range payloads {
				if !got[p] {
					t.Fatalf("node %d, leading %s, delivered %v; want %q", n.id, queue, got, payloads)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took a subscription to %s within a minute", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitStatusLists waits until n's GetClusterStatus lists node m, up, at m's FIBP address,
// beside the founders.
func awaitStatusLists(t *testing.T, n, m *clusterProc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a safety net against a hang
	for reqID := uint32(1); ; reqID++ {
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		st := c.Call(reqID, &fibp.GetClusterStatus{}).(*fibp.GetClusterStatusResult)
		c.NC.Close()
		if len(st.Nodes) == 4 {
			for _, s := range st.Nodes {
				if s.NodeID == uint64(m.id) && s.Addr == m.addrs.FIBP && s.State == fibp.NodeStateUp {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d's cluster status %+v does not list node %d up at %s", n.id, st.Nodes, m.id, m.addrs.FIBP)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With cluster_tls_*, the join travels over mutual TLS like the rest of the link, and the node
// that joined serves a queue placed on it.
func TestAJoinOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	cert, key, ca := writeNodeCerts(t)
	tlsFlags := []string{"--cluster-tls-cert", cert, "--cluster-tls-key", key, "--cluster-tls-ca", ca}
	nodes, _ := formCluster(t, bin, tlsFlags...)
	n4 := &clusterProc{id: 4, dir: t.TempDir()}
	n4.launch(t, bin, freeAddr(t), append([]string{"--join", nodes[0].addrs.Cluster, "--replication", "4"}, tlsFlags...)...)
	n4.addrs = waitAddrFile(t, n4.addrFile, n4.p)
	c := fibptest.Dial(t, n4.addrs.FIBP)
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "wide"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue on node 4: %v", r.ErrorCode)
	}
	c.NC.Close()
	all := append(nodes[:3:3], n4)
	leader := enqueueOnLeader(t, all, "wide", "over TLS")
	expectReplicatedOn(t, all, n4, leader, "wide", "again")
	expectDeliveredByLeader(t, all, "wide", "over TLS", "again")
}
