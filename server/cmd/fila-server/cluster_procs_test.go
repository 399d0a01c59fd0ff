package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
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

// Three real fila-server processes on loopback form a cluster from the same initial_cluster; a
// queue created on one node is served by its leader; killed together (kill -9) and started again
// without initial_cluster, the nodes elect leaders by themselves and the queue still holds what
// was acknowledged.

// clusterProc is one node of a test cluster.
type clusterProc struct {
	id       int
	dir      string
	addrFile string
	p        *serverProc
	addrs    boundAddrs
}

// launch starts the node without waiting for it to be ready (a founder is ready once the meta
// group has a leader, which needs the others).
func (n *clusterProc) launch(t *testing.T, bin, clusterAddr string, more ...string) {
	t.Helper()
	if raceEnabled {
		// The nodes are fila-server processes built without the race detector: under it, only
		// this harness would be checked, at several times the cost, on a machine the race step
		// loads with every other package at once (elections and catch-ups then miss the tests'
		// bounds). Every multi-process test runs in make test's first step.
		t.Skip("multi-process cluster test: runs in make test's first step (its nodes are not race-built)")
	}
	n.addrFile = filepath.Join(t.TempDir(), "addrs.json")
	args := append([]string{"--data-dir", n.dir, "--listen", "127.0.0.1:0", "--http-listen", "", "--log-level", "warn",
		"--node-id", fmt.Sprint(n.id), "--cluster-listen", clusterAddr, "--addr-file", n.addrFile}, more...)
	cmd := exec.Command(bin, args...)
	cmd.Env = serverEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if dir := os.Getenv("FILA_TEST_NODE_LOGS"); dir != "" {
		// A measurement's or a debugging session's copy of every node's log, appended to across
		// restarts: node-<id>.log in that directory.
		if f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("node-%d.log", n.id)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			cmd.Stderr = io.MultiWriter(&stderr, f)
			t.Cleanup(func() { f.Close() })
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		p.wait()
		if t.Failed() {
			t.Logf("node %d's log:\n%s", n.id, stderr.String())
		}
	})
	n.p = p
}

func startCluster(t *testing.T, bin string, nodes []*clusterProc, addrs []string, more ...string) {
	t.Helper()
	for i, n := range nodes {
		n.launch(t, bin, addrs[i], more...)
	}
	for _, n := range nodes {
		n.addrs = waitAddrFile(t, n.addrFile, n.p)
	}
}

// queuesOfDepths creates n queues, prefix0 to prefix(n-1), queue i holding i+1 messages
// enqueued on its leader, and returns each one's depth.
func queuesOfDepths(t *testing.T, nodes []*clusterProc, prefix string, n int) map[string]int {
	t.Helper()
	depth := map[string]int{}
	for i := range n {
		q := fmt.Sprintf("%s%d", prefix, i)
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		for m := range i + 1 {
			enqueueOnLeader(t, nodes, q, fmt.Sprint("m", m))
		}
		depth[q] = i + 1
	}
	return depth
}

// enqueueOnLeader offers msg to each node until one takes it (the leader, or a follower that
// forwards it and names the leader in a route hint; NotLeader or NodeNotReady during an
// election), and returns the queue's leader.
func enqueueOnLeader(t *testing.T, nodes []*clusterProc, queue, payload string) *clusterProc {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for reqID := uint32(1); ; reqID++ {
		for _, n := range nodes {
			c := fibptest.Dial(t, n.addrs.FIBP)
			c.Handshake()
			r := c.Call(reqID, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: queue, Payload: []byte(payload)}}}).(*fibp.EnqueueResult)
			c.NC.Close()
			switch code := r.Results[0].ErrorCode; code {
			case fibp.CodeOk:
				for _, h := range r.RouteHints { // forwarded: the hint names the leader
					for _, m := range nodes {
						if h.Queue == queue && (h.LeaderNodeID == uint64(m.id) || h.LeaderAddr != "" && h.LeaderAddr == m.addrs.FIBP) {
							return m
						}
					}
				}
				return n // never offer the message again: it is stored
			case fibp.CodeNotLeader, fibp.CodeNodeNotReady, fibp.CodeQueueNotFound:
			default:
				t.Fatalf("enqueue on node %d: %v", n.id, code)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took an enqueue to %s within a minute", queue)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestThreeProcessesFormACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin)
	leader := enqueueOnLeader(t, nodes, "orders", "first")
	t.Logf("node %d leads orders", leader.id)
	for _, n := range nodes {
		c := fibptest.Dial(t, n.addrs.FIBP)
		if ok := c.Handshake(); ok.NodeID != uint64(n.id) {
			t.Errorf("node %d's HandshakeOk: node_id %d", n.id, ok.NodeID)
		}
		if n.addrs.Cluster != addrs[n.id-1] {
			t.Errorf("node %d's addr file: cluster %q, want %q", n.id, n.addrs.Cluster, addrs[n.id-1])
		}
		c.NC.Close()
	}
	expectDelivered(t, leader, "orders", "first")
}

// With cluster_tls_*, the nodes reach each other over mutual TLS: one certificate per node, for
// both uses, from the cluster's CA.
func TestClusterOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	cert, key, ca := writeNodeCerts(t)
	nodes, _ := formCluster(t, bin, "--cluster-tls-cert", cert, "--cluster-tls-key", key, "--cluster-tls-ca", ca)
	leader := enqueueOnLeader(t, nodes, "orders", "over TLS")
	expectDelivered(t, leader, "orders", "over TLS")

	// The link serves TLS and wants a client certificate: one without is turned away.
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	conn, err := tls.Dial("tcp", nodes[0].addrs.Cluster, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13})
	if err == nil {
		_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the server refuses the missing certificate after the handshake
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("a peer without a certificate: %v, want the link to require one", err)
	}
}

// writeNodeCerts writes a CA and a node certificate for 127.0.0.1, valid as server and client.
func writeNodeCerts(t *testing.T) (cert, key, ca string) {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test cluster CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &nodeKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, ca = filepath.Join(dir, "node.pem"), filepath.Join(dir, "node-key.pem"), filepath.Join(dir, "ca.pem")
	for path, block := range map[string]*pem.Block{cert: {Type: "CERTIFICATE", Bytes: der}, key: {Type: "EC PRIVATE KEY", Bytes: keyDER},
		ca: {Type: "CERTIFICATE", Bytes: caDER}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, ca
}

// Killed together (kill -9) and started again without initial_cluster, the nodes elect leaders
// by themselves and the queue holds what was acknowledged.
//
// It failed about one run in six while a restarting node deleted, as orphans, the queue groups its
// meta state had not caught up with yet, and missed the groups applied before its registry went
// live (fixed in the broker's recover). The failures were, in one of two ways: the queue's leader
// after the restart lacks an entry of its log and has no snapshot to send instead ("failed to get
// log: index=5 … log not found", "failed to send snapshot … no snapshots found"), and the queue
// takes no enqueue; or a node's start removes the queue's snapshots as those of a deleted queue
// ("storage: removing the snapshots of a deleted queue left beside no log"), or a replica applies
// a Lease of a message it does not hold ("apply Lease: … engine: message not found"), and the
// enqueue acknowledged before the kill is not delivered after it. Since the fix, 30 runs in a row
// passed, then 40 more at 47c7504 and 88c455d (first enqueue 0.06-6.0 s after the start) before
// it joined the default run.
func TestClusterKilledAtOnceComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	nodes, addrs := formCluster(t, bin)
	enqueueOnLeader(t, nodes, "orders", "before")
	for _, n := range nodes { // all at once, as a power cut
		n.p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, n := range nodes {
		n.p.wait()
	}
	start := time.Now()
	startCluster(t, bin, nodes, addrs) // no initial_cluster: each directory knows its cluster
	leader := enqueueOnLeader(t, nodes, "orders", "after")
	t.Logf("node %d leads orders after the restart; first enqueue %v after the start", leader.id, time.Since(start).Round(time.Millisecond))
	expectDelivered(t, leader, "orders", "before", "after")
}

// formCluster starts three founders on loopback and creates the queue orders through node 2.
func formCluster(t *testing.T, bin string, more ...string) ([]*clusterProc, []string) {
	t.Helper()
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	founders := fmt.Sprintf("1=%s,2=%s,3=%s", addrs[0], addrs[1], addrs[2])
	nodes := []*clusterProc{{id: 1, dir: t.TempDir()}, {id: 2, dir: t.TempDir()}, {id: 3, dir: t.TempDir()}}
	start := time.Now()
	startCluster(t, bin, nodes, addrs, append([]string{"--initial-cluster", founders}, more...)...)
	t.Logf("formed in %v", time.Since(start).Round(time.Millisecond))
	c := fibptest.Dial(t, nodes[1].addrs.FIBP) // any node takes an admin change
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue on node 2: %v", r.ErrorCode)
	}
	c.NC.Close()
	return nodes, addrs
}

// expectDelivered subscribes to queue on node and expects the payloads, in any order.
func expectDelivered(t *testing.T, n *clusterProc, queue string, payloads ...string) {
	t.Helper()
	c := fibptest.Dial(t, n.addrs.FIBP)
	c.Handshake()
	c.Subscribe(1, queue, 10)
	got := map[string]bool{}
	for _, d := range c.Deliveries(len(payloads)) {
		got[string(d.Payload)] = true
	}
	for _, p := range payloads {
		if !got[p] {
			t.Fatalf("node %d, leading %s, delivered %v; want %q", n.id, queue, got, payloads)
		}
	}
}
