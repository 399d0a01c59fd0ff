package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// membersView is what GET /api/v1/cluster/members tells of the members and the removals.
type membersView struct {
	Members []struct {
		ID        string `json:"id"`
		Up        bool   `json:"up"`
		MetaVoter bool   `json:"meta_voter"`
	} `json:"members"`
	Removals []struct {
		ID         string `json:"id"`
		GroupsLeft int    `json:"groups_left"`
		IDFree     bool   `json:"id_free"`
	} `json:"removals"`
	JoiningGroups int `json:"joining_groups"`
	UnsettledHere int `json:"unsettled_here"`
}

func membersOf(t *testing.T, n *clusterProc) membersView {
	t.Helper()
	var m membersView
	if code := callAdminAPI(t, n, http.MethodGet, "/api/v1/cluster/members", "", &m); code != http.StatusOK {
		t.Fatalf("members on node %d: HTTP %d", n.id, code)
	}
	return m
}

// A node whose disk is lost comes back under its own ID. Three nodes, replication 3, four queues
// holding messages, two of each acknowledged. Node 3 is killed and its data directory deleted; a
// fresh node 3 that joins now is refused (it would answer Raft for node 3 without its log and
// votes). Node 3 is removed with force; once every group (and the meta group) has it out of its
// Raft configuration the members show its ID free, and a fresh node 3 joins under it: every group
// gets it back as a replica (topped up), caught up, and the meta group as a voter. Every queue's
// leadership is moved to the new node 3 and node 1 is killed: every message not acknowledged is
// delivered, and no acknowledged one.
func TestALostNodeComesBackUnderItsID(t *testing.T) { comeBackUnderItsID(t, false) }

// The same with every queue group asleep on every node when node 3 is lost: the removal wakes
// them to take node 3 out of their configurations, and the top-up to add it back.
func TestALostNodeComesBackWhileItsQueuesSleep(t *testing.T) { comeBackUnderItsID(t, true) }

func comeBackUnderItsID(t *testing.T, sleeping bool) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	flags := []string{"--http-listen", "127.0.0.1:0"}
	if sleeping {
		flags = append(flags, "--queue-idle-timeout", "300ms")
	}
	nodes, addrs := formCluster(t, bin, flags...)
	node1, node2 := nodes[0], nodes[1]
	setRebalancing(t, node1, fibp.RebalancingDisabled, 0) // the moves below stay as made
	queues := []string{"orders", "p0", "p1", "p2"}
	pending := storeAndAckSome(t, nodes, queues)
	if sleeping {
		awaitAllAsleep(t, nodes, "before node 3 is lost")
	}

	// Node 3's disk is lost.
	lost := nodes[2]
	lost.p.cmd.Process.Signal(syscall.SIGKILL)
	lost.p.wait()
	if err := os.RemoveAll(lost.dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node 1 sees node 3 unreachable", func() bool { return nodeStatus(t, node1, 3).State == fibp.NodeStateUnreachable })
	refusedLine(t, bin, serverEnv(), "node 3 is a member of this cluster with its data",
		"--log-level", "error", "--data-dir", t.TempDir(), "--node-id", "3", "--cluster-listen", addrs[2], "--join", node2.addrs.Cluster)
	removeUntilFree(t, node2, []*clusterProc{node1, node2})

	// The replacement: node 3 again, at its address, on an empty data directory.
	back := &clusterProc{id: 3, dir: t.TempDir()}
	back.launch(t, bin, addrs[2], append([]string{"--join", node1.addrs.Cluster}, flags...)...)
	back.addrs = waitAddrFile(t, back.addrFile, back.p)
	awaitTakenBack(t, []*clusterProc{node1, node2, back})
	// Restarted with its data (its meta state applies the old node 3's removal again, before its
	// own admission), it stays.
	back.p.cmd.Process.Signal(syscall.SIGKILL)
	back.p.wait()
	back.launch(t, bin, addrs[2], append([]string{"--join", node1.addrs.Cluster}, flags...)...)
	back.addrs = waitAddrFile(t, back.addrFile, back.p)
	awaitTakenBack(t, []*clusterProc{node1, node2, back})
	for _, q := range queues {
		if _, err := os.Stat(filepath.Join(back.dir, "snapshots", fmt.Sprintf("q%x", q))); err != nil {
			t.Fatalf("the new node 3 has no replica of %s: %v", q, err)
		}
		waitFor(t, fmt.Sprintf("node 3 leads %s", q), func() bool { return moveOrRetry(t, node2, q, 3) })
	}

	// Node 1 is lost too: node 3 leads every queue, with node 2.
	node1.p.cmd.Process.Signal(syscall.SIGKILL)
	node1.p.wait()
	survivors := []*clusterProc{node2, back}
	for _, q := range queues {
		expectDeliveredByLeader(t, survivors, q, pending[q]...)
	}
}

// moveOrRetry asks node n to move queue's leadership to node target and reports whether it did; a
// transfer that failed (the target's replica not caught up yet after its restart) is logged.
func moveOrRetry(t *testing.T, n *clusterProc, queue string, target int) bool {
	t.Helper()
	switch r := admin(t, n, &fibp.MoveQueueLeader{Queue: queue, TargetNodeID: uint64(target)}).(type) {
	case *fibp.MoveQueueLeaderResult:
		return r.ErrorCode == fibp.CodeOk
	case *fibp.Error:
		t.Logf("MoveQueueLeader %s to node %d: %v: %s", queue, target, r.ErrorCode, r.Message)
		return false
	default:
		t.Fatalf("MoveQueueLeader answered %T", r)
	}
	return false
}

// removeUntilFree removes node 3 with force through n and waits until each of live shows its ID
// free.
func removeUntilFree(t *testing.T, n *clusterProc, live []*clusterProc) {
	t.Helper()
	var res struct{ Groups int }
	if code := callAdminAPI(t, n, http.MethodPost, "/api/v1/cluster/members/3/remove", `{"force":true}`, &res); code != http.StatusOK {
		t.Fatalf("removing node 3 with force: HTTP %d", code)
	}
	for _, n := range live {
		waitFor(t, fmt.Sprintf("node %d shows node 3's ID free", n.id), func() bool {
			m := membersOf(t, n)
			return len(m.Removals) == 1 && m.Removals[0].ID == "3" && m.Removals[0].IDFree
		})
	}
}

// storeAndAckSome creates the queues but orders (formCluster's), enqueues five messages to each
// and acknowledges the first two; it returns the three left, by queue.
func storeAndAckSome(t *testing.T, nodes []*clusterProc, queues []string) map[string][]string {
	t.Helper()
	for _, q := range queues[1:] {
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
	}
	pending := map[string][]string{}
	for _, q := range queues {
		for j := range 5 {
			enqueueOnLeader(t, nodes, q, fmt.Sprintf("%s-%d", q, j))
		}
		ackFirst(t, nodes, q, 2)
		pending[q] = []string{q + "-2", q + "-3", q + "-4"}
	}
	return pending
}

// awaitTakenBack waits until every node lists the three members up and voting in the meta group,
// no removal, no replica catching up, and leads no group whose configuration differs from its
// placement.
func awaitTakenBack(t *testing.T, all []*clusterProc) {
	t.Helper()
	var last membersView
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the members as last seen: %+v", last)
		}
	})
	for _, n := range all {
		waitFor(t, fmt.Sprintf("node %d: node 3 a member and meta voter, every group settled", n.id), func() bool {
			m := membersOf(t, n)
			last = m
			voters := 0
			for _, x := range m.Members {
				if x.Up && x.MetaVoter {
					voters++
				}
			}
			return len(m.Members) == 3 && voters == 3 && len(m.Removals) == 0 && m.JoiningGroups == 0 && m.UnsettledHere == 0
		})
	}
}

// ackFirst takes the first n messages of queue on its leader and acknowledges them.
func ackFirst(t *testing.T, nodes []*clusterProc, queue string, n int) {
	t.Helper()
	_, c := subscribeOnLeaderWithCredit(t, nodes, queue, uint32(n))
	defer c.NC.Close()
	ack := &fibp.Ack{}
	for _, d := range c.Deliveries(n) {
		ack.Items = append(ack.Items, fibp.AckItem{Queue: queue, MessageID: d.MessageID})
	}
	r := c.Call(2, ack).(*fibp.AckResult)
	for _, it := range r.Results {
		if it.ErrorCode != fibp.CodeOk {
			t.Fatalf("Ack on %s: %v", queue, it.ErrorCode)
		}
	}
}

// subscribeOnLeaderWithCredit is subscribeOnLeader with a credit of n: the subscription is sent
// no more than n messages.
func subscribeOnLeaderWithCredit(t *testing.T, nodes []*clusterProc, queue string, n uint32) (*clusterProc, *fibptest.Client) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		if time.Now().After(deadline) {
			t.Fatalf("no node took a subscription to %s within a minute", queue)
		}
		for _, p := range nodes {
			c := fibptest.Dial(t, p.addrs.FIBP)
			c.Handshake()
			c.Send(1, &fibp.Consume{Queue: queue, Credit: n})
			if _, f := c.Next(); f.Opcode() == fibp.OpConsumeOk {
				return p, c
			}
			c.NC.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
}
