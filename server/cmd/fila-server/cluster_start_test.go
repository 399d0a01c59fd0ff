package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/internal/fibptest"
	"github.com/filamq/fila/server/internal/testaddr"
)

// The cluster's start-up settings through the real binary: each bad input is one line on stderr
// and exit status 2, before anything listens or is written.

const testFounders = "1=127.0.0.1:17001,2=127.0.0.1:17002,3=127.0.0.1:17003"

// refusedLine runs bin expecting exit status 2 and one line on stderr that holds want.
func refusedLine(t *testing.T, bin string, env []string, want string, args ...string) string {
	t.Helper()
	code, stderr := refusedStart(t, bin, env, append([]string{"--listen", "127.0.0.1:0", "--http-listen", ""}, args...)...)
	line := strings.TrimSuffix(stderr, "\n")
	if code != 2 || strings.Contains(line, "\n") || !strings.HasPrefix(line, "fila-server: ") || !strings.Contains(line, want) {
		t.Fatalf("fila-server %q: exit %d, stderr:\n%s\nwant exit 2 and one line saying %q", args, code, stderr, want)
	}
	return line
}

func TestClusterSettingsRefusedWithOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	node := func(id string, more ...string) []string {
		return append([]string{"--data-dir", t.TempDir(), "--node-id", id, "--cluster-listen", "127.0.0.1:0"}, more...)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"node ID not in the initial list", nil, node("4", "--initial-cluster", testFounders), "initial_cluster: node_id 4 is not in it (it lists 1, 2, 3)"},
		{"two nodes with one ID", nil, node("1", "--initial-cluster", "1=127.0.0.1:17001,1=127.0.0.1:17002,3=127.0.0.1:17003"),
			"initial_cluster: two nodes have ID 1"},
		{"join with initial cluster", nil, node("1", "--initial-cluster", testFounders, "--join", "127.0.0.1:17002"),
			"initial_cluster and join exclude each other"},
		{"by the environment", []string{"FILA_NODE_ID=5", "FILA_CLUSTER_LISTEN=127.0.0.1:0", "FILA_INITIAL_CLUSTER=" + testFounders},
			[]string{"--data-dir", t.TempDir()}, "initial_cluster: node_id 5 is not in it"},
		{"node ID that is no number", nil, []string{"--node-id", "first"}, `--node-id: "first" is not an integer of 0 or more`},
		{"cluster setting without a node ID", nil, []string{"--join", "127.0.0.1:17001"}, "join: a cluster setting needs node_id"},
		{"first start without founders or join", nil, node("1"), "is empty, so this is the node's first start: give initial_cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedLine(t, bin, serverEnv(tc.env...), tc.want, tc.args...)
		})
	}
}

// A cluster node's data directory records the node and its cluster on the first start; every
// start after checks them, and a restart needs no initial_cluster. A cluster of one founder
// serves alone.
func TestDataDirBelongsToOneNodeOfOneCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	env := serverEnv()
	dir, addr := t.TempDir(), freeAddr(t)
	founders := "1=" + addr
	node1 := func(more ...string) *serverProc {
		return startServer(t, bin, nil, append([]string{"--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "",
			"--log-level", "warn", "--node-id", "1", "--cluster-listen", addr}, more...)...)
	}
	srv := node1("--initial-cluster", founders)
	if srv.addrs.Cluster != addr {
		t.Errorf("addr file %+v: cluster %q, want %q", srv.addrs, srv.addrs.Cluster, addr)
	}
	c := fibptest.Dial(t, srv.addrs.FIBP)
	if ok := c.Handshake(); ok.NodeID != 1 {
		t.Errorf("HandshakeOk node_id %d, want 1", ok.NodeID)
	}
	if r := c.Call(1, &fibp.CreateQueue{Name: "kept"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue: %v", r.ErrorCode)
	}
	if err := srv.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	var id nodeIdentity
	data, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil || json.Unmarshal(data, &id) != nil {
		t.Fatalf("no identity written on the first start (%v):\n%s", err, data)
	}
	if id.NodeID != 1 || id.Founders != founders || !strings.HasPrefix(id.ClusterID, "fila-") {
		t.Fatalf("identity %+v", id)
	}

	run := func(want string, args ...string) {
		t.Helper()
		refusedLine(t, bin, env, want, append([]string{"--data-dir", dir}, args...)...)
	}
	run("belongs to node 1 of cluster "+id.ClusterID+" (founded as "+founders+"), not node 2",
		"--node-id", "2", "--cluster-listen", "127.0.0.1:0", "--initial-cluster", testFounders)
	run("belongs to cluster "+id.ClusterID+" (founded as "+founders+"), not the cluster initial_cluster names ("+testFounders,
		"--node-id", "1", "--cluster-listen", addr, "--initial-cluster", testFounders)
	run("belongs to node 1 of cluster " + id.ClusterID + " (founded as " + founders + "): start it with --node-id 1")

	srv = node1("--advertise", "fila-1.example:5555") // no initial_cluster: the directory knows it
	c = fibptest.Dial(t, srv.addrs.FIBP)
	c.Handshake()
	st := c.Call(2, &fibp.GetClusterStatus{}).(*fibp.GetClusterStatusResult)
	if len(st.Nodes) != 1 || st.Nodes[0].Addr != "fila-1.example:5555" || st.Nodes[0].NodeID != 1 {
		t.Errorf("GetClusterStatus: %+v, want node 1 at its advertised address", st.Nodes)
	}
	if r := c.Call(1, &fibp.CreateQueue{Name: "kept"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeQueueAlreadyExists {
		t.Fatalf("CreateQueue of the queue created before the restart: %v, want QueueAlreadyExists", r.ErrorCode)
	}
	if err := srv.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, identityFile)); string(again) != string(data) {
		t.Fatalf("identity rewritten by a restart:\n%s\nwas\n%s", again, data)
	}

	// A node added later records where it joins before it is admitted (cluster_join_test.go
	// joins for real).
	joiner := t.TempDir()
	if err := writeIdentity(joiner, filepath.Join(joiner, identityFile),
		nodeIdentity{Format: identityFormat, NodeID: 4, JoinedThrough: "127.0.0.1:17001"}); err != nil {
		t.Fatal(err)
	}
	refusedLine(t, bin, env, "belongs to node 4 of the cluster it joined through 127.0.0.1:17001, not node 5",
		"--data-dir", joiner, "--node-id", "5", "--cluster-listen", "127.0.0.1:0", "--join", "127.0.0.1:17001")
}

// Every founder derives the same cluster ID from the list, in whatever order it was given.
func TestClusterIDIsTheFoundersList(t *testing.T) {
	a, _ := config.ParseInitialCluster(testFounders)
	b, _ := config.ParseInitialCluster("3=127.0.0.1:17003, 1=127.0.0.1:17001,2=127.0.0.1:17002")
	c, _ := config.ParseInitialCluster("1=127.0.0.1:17001,2=127.0.0.1:17002,3=127.0.0.1:17004")
	if clusterID(a) != clusterID(b) || clusterID(a) == clusterID(c) || len(clusterID(a)) != len("fila-")+16 {
		t.Fatalf("cluster IDs %s, %s (same list), %s (another)", clusterID(a), clusterID(b), clusterID(c))
	}
}

// freeAddr is a loopback address free a moment ago: initial_cluster names each node's
// inter-node address before any node starts, so port 0 cannot do.
func freeAddr(t *testing.T) string { return testaddr.Free(t) }

// A single node's data directory (a store, no identity) is served by a single node as before and
// refused to a cluster node; the single node writes no identity.
func TestSingleNodeDataDirIsNoClusterNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	srv := startBinary(t, bin, dir, "127.0.0.1:0")
	if err := srv.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, identityFile)); !os.IsNotExist(err) {
		t.Fatalf("a single node wrote %s: %v", identityFile, err)
	}
	refusedLine(t, bin, serverEnv(), "holds a single node's data", "--data-dir", dir,
		"--node-id", "1", "--cluster-listen", "127.0.0.1:0", "--initial-cluster", testFounders)
	srv = startBinary(t, bin, dir, "127.0.0.1:0") // and still serves as the single node it is
	if err := srv.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
}
