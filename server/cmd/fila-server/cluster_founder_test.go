package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/filamq/fila/generated/fibp"
)

// A founding member that lost its data directory is refused when it starts again empty with
// initial_cluster, as a fresh node that joins under a member's ID is: the other founders' meta
// state records that it served, and its replicas would answer Raft without the log and votes they
// had. Node 3 starts only after nodes 1 and 2 formed the cluster and created a queue (a founder's
// late first start is not refused), serves, is killed -9 and its directory deleted: started again
// with the same settings it exits 2 with one line and writes nothing, so the same start is
// refused again.
func TestAFounderThatLostItsDataIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	founders := fmt.Sprintf("1=%s,2=%s,3=%s", addrs[0], addrs[1], addrs[2])
	nodes := []*clusterProc{{id: 1, dir: t.TempDir()}, {id: 2, dir: t.TempDir()}, {id: 3, dir: t.TempDir()}}
	startCluster(t, bin, nodes[:2], addrs[:2], "--initial-cluster", founders)
	if r := admin(t, nodes[0], &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue on node 1: %v", r.ErrorCode)
	}
	enqueueOnLeader(t, nodes[:2], "orders", "before node 3")

	startCluster(t, bin, nodes[2:], addrs[2:], "--initial-cluster", founders)
	lost := nodes[2]
	waitFor(t, "node 1 records node 3's address", func() bool { return nodeStatus(t, nodes[0], 3).Addr == lost.addrs.FIBP })

	lost.p.cmd.Process.Signal(syscall.SIGKILL)
	lost.p.wait()
	if err := os.RemoveAll(lost.dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(lost.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for try := 1; try <= 2; try++ {
		line := refusedLine(t, bin, serverEnv(), "records that node 3 served at "+lost.addrs.FIBP,
			"--log-level", "error", "--data-dir", lost.dir, "--node-id", "3", "--cluster-listen", addrs[2], "--initial-cluster", founders)
		if try == 1 {
			t.Log(line)
		}
		if entries, err := os.ReadDir(lost.dir); err != nil || len(entries) > 0 {
			t.Fatalf("the refused start left %d entries in the data directory (%v)", len(entries), err)
		}
	}
}
