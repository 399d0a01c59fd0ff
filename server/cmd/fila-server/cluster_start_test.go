package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
// start after checks them. Until the node link is built, a cluster node's start then stops with
// one line saying so.
func TestDataDirBelongsToOneNodeOfOneCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	env := serverEnv()
	dir := t.TempDir()
	run := func(want string, args ...string) string {
		t.Helper()
		return refusedLine(t, bin, env, want, append([]string{"--data-dir", dir}, args...)...)
	}
	line := run("this build has no inter-node link yet", "--node-id", "1", "--cluster-listen", "127.0.0.1:0", "--initial-cluster", testFounders)
	var id nodeIdentity
	data, err := os.ReadFile(filepath.Join(dir, identityFile))
	if err != nil || json.Unmarshal(data, &id) != nil {
		t.Fatalf("no identity written on the first start (%v):\n%s", err, data)
	}
	if id.NodeID != 1 || id.Founders != testFounders || !strings.HasPrefix(id.ClusterID, "fila-") || !strings.Contains(line, id.ClusterID) {
		t.Fatalf("identity %+v; the refusal said: %s", id, line)
	}

	// Every founder computes the same cluster ID from the same list, in any order.
	other := t.TempDir()
	refusedLine(t, bin, env, id.ClusterID, "--data-dir", other, "--node-id", "3", "--cluster-listen", "127.0.0.1:0",
		"--initial-cluster", "3=127.0.0.1:17003,2=127.0.0.1:17002,1=127.0.0.1:17001")

	run("belongs to node 1 of cluster "+id.ClusterID+" (founded as "+testFounders+"), not node 2",
		"--node-id", "2", "--cluster-listen", "127.0.0.1:0", "--initial-cluster", testFounders)
	run("belongs to cluster "+id.ClusterID,
		"--node-id", "1", "--cluster-listen", "127.0.0.1:0", "--initial-cluster", "1=127.0.0.1:17001,2=127.0.0.1:17002,3=127.0.0.1:17004")
	run("belongs to node 1 of cluster " + id.ClusterID + " (founded as " + testFounders + "): start it with --node-id 1")
	// A restart needs neither the founders nor join: the directory knows them.
	run("node 1 of cluster "+id.ClusterID, "--node-id", "1", "--cluster-listen", "127.0.0.1:0")
	data2, _ := os.ReadFile(filepath.Join(dir, identityFile))
	if string(data2) != string(data) {
		t.Fatalf("identity rewritten by a restart:\n%s\nwas\n%s", data2, data)
	}

	// A node added later records where it joined.
	joiner := t.TempDir()
	refusedLine(t, bin, env, "node 4 of the cluster it joined through 127.0.0.1:17001",
		"--data-dir", joiner, "--node-id", "4", "--cluster-listen", "127.0.0.1:0", "--join", "127.0.0.1:17001")
	refusedLine(t, bin, env, "belongs to node 4 of the cluster it joined through 127.0.0.1:17001, not node 5",
		"--data-dir", joiner, "--node-id", "5", "--cluster-listen", "127.0.0.1:0", "--join", "127.0.0.1:17001")
}

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
