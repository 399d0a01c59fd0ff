package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Four real processes — three founders and node 10, joined — and six queues of three replicas
// holding messages. Removing node 3, a founder and a voter of the meta group, through the admin
// API: refused for an unknown node (404), while it is not drained (409 node_not_drained), through
// itself (409 self, even forced), and,
// drained, while node 2 is down (409 quorum: the meta group would keep one of two voters). With
// node 2 back, the removal places each of node 3's groups on the node that did not replicate it;
// the new replicas catch up, the leaders take node 3 out of the groups' Raft configurations (no
// node leads a group whose configuration differs from its placement), node 3 stops by itself,
// every queue has a replica on each of nodes 1, 2 and 10 and commits with one of them stopped, and
// every message stored before is delivered. The removed node started again with its data
// directory and --join is refused.
func TestRemoveADrainedNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	web := []string{"--http-listen", "127.0.0.1:0"}
	nodes, addrs := formCluster(t, bin, web...)
	n10 := &clusterProc{id: 10, dir: t.TempDir()}
	n10.launch(t, bin, freeAddr(t), append([]string{"--join", nodes[0].addrs.Cluster}, web...)...)
	n10.addrs = waitAddrFile(t, n10.addrFile, n10.p)
	all := []*clusterProc{nodes[0], nodes[1], nodes[2], n10}
	for _, n := range all {
		awaitStatusLists(t, n, n10)
	}
	var queues []string
	stored := map[string][]string{}
	for i := range 6 {
		q := fmt.Sprintf("r%d", i)
		if r := admin(t, n10, &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
		queues = append(queues, q)
		for j := range 3 {
			p := fmt.Sprintf("%s-%d", q, j)
			enqueueOnLeader(t, all, q, p)
			stored[q] = append(stored[q], p)
		}
	}

	// Bad input, and a node that is not drained.
	node1 := nodes[0]
	expectRemoveRefused(t, node1, "9", false, http.StatusNotFound, "node_not_found")
	expectRemoveRefused(t, node1, "3", false, http.StatusConflict, "node_not_drained")
	expectRemoveRefused(t, node1, "1", true, http.StatusConflict, "self")

	// Drained, node 3 still may not go while node 2 is down: the meta group would be left with
	// node 1 alone of its two other voters.
	if r := admin(t, node1, &fibp.DrainNode{NodeID: 3, Drain: true}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DrainNode 3: %v", r.ErrorCode)
	}
	waitFor(t, "node 3 leads nothing", func() bool {
		s := nodeStatus(t, node1, 3)
		return s.State == fibp.NodeStateDraining && s.QueueLeaderships == 0 && leadsNone(t, node1, queues, 3) &&
			clusterStatus(t, node1).MetaLeaderNodeID != 3
	})
	node2 := nodes[1]
	node2.p.cmd.Process.Signal(syscall.SIGKILL)
	node2.p.wait()
	waitFor(t, "node 1 sees node 2 unreachable", func() bool {
		return nodeStatus(t, node1, 2).State == fibp.NodeStateUnreachable
	})
	expectRemoveRefused(t, node1, "3", false, http.StatusConflict, "quorum")
	node2.launch(t, bin, addrs[1], web...)
	node2.addrs = waitAddrFile(t, node2.addrFile, node2.p)
	waitFor(t, "node 1 sees node 2 up", func() bool { return nodeStatus(t, node1, 2).State == fibp.NodeStateUp })

	var res struct {
		NodeID string `json:"node_id"`
		Groups int    `json:"groups"`
	}
	if code := callAdminAPI(t, node2, http.MethodPost, "/api/v1/cluster/members/3/remove", `{}`, &res); code != http.StatusOK {
		t.Fatalf("removing node 3: HTTP %d", code)
	}
	if res.Groups != 7 { // orders and r0-r5, each on all of nodes 1-3 or on three of four
		t.Logf("node 3 replicated %d groups", res.Groups)
	}
	waitFor(t, "the removed node 3 stops by itself", func() bool {
		select {
		case <-nodes[2].p.done:
			return true
		default:
			return false
		}
	})
	live := []*clusterProc{node1, node2, n10}
	awaitSettled(t, live, "3", 0)
	expectServedByAll(t, live, append([]string{"orders"}, queues...), stored)

	// The removed node does not come back with its data directory (its ID, once free, is for a
	// node with an empty one: TestALostNodeComesBackUnderItsID).
	refusedLine(t, bin, serverEnv(), "node 3 was removed from this cluster, and its data directory is the removed node's",
		"--log-level", "error", "--data-dir", nodes[2].dir, "--node-id", "3", "--cluster-listen", "127.0.0.1:0", "--join", node1.addrs.Cluster)
	expectRemoveRefused(t, node1, "3", true, http.StatusNotFound, "node_not_found")
}

// awaitSettled waits until each of nodes lists removed among the removed IDs and one member per
// node, sees joining replicas still catching up in only stuck groups, and leads no group whose Raft
// configuration differs from its placement.
func awaitSettled(t *testing.T, nodes []*clusterProc, removed string, stuck int) {
	t.Helper()
	for _, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d: every new replica caught up, every group it leads settled", n.id), func() bool {
			var m struct {
				Members       []struct{ ID string } `json:"members"`
				Removed       []string              `json:"removed"`
				JoiningGroups int                   `json:"joining_groups"`
				UnsettledHere int                   `json:"unsettled_here"`
			}
			callAdminAPI(t, n, http.MethodGet, "/api/v1/cluster/members", "", &m)
			return len(m.Members) == len(nodes) && len(m.Removed) == 1 && m.Removed[0] == removed && m.JoiningGroups == stuck &&
				m.UnsettledHere == 0
		})
	}
}

// expectServedByAll checks that each queue has a replica on every one of live (three nodes), none
// of which names node 3 its leader, commits with one of them stopped (so a new replica votes), and
// delivers what it stored before.
func expectServedByAll(t *testing.T, live []*clusterProc, queues []string, stored map[string][]string) {
	t.Helper()
	for _, q := range queues {
		for _, n := range live {
			if _, err := os.Stat(filepath.Join(n.dir, "snapshots", fmt.Sprintf("q%x", q))); err != nil {
				t.Fatalf("node %d has no replica of %s after the removal: %v", n.id, q, err)
			}
		}
		for _, n := range live {
			if r := routes(t, n)[q]; r == 3 {
				t.Fatalf("node %d names the removed node 3 leader of %s", n.id, q)
			}
		}
	}
	for _, q := range queues {
		leader := enqueueOnLeader(t, live, q, q+"-after")
		var other *clusterProc
		for _, n := range live {
			if n != leader && other == nil {
				other = n
			}
		}
		expectReplicatedOn(t, live, other, leader, q, q+"-stopped")
		expectDeliveredByLeader(t, live, q, append(stored[q], q+"-after", q+"-stopped")...)
	}
}

// callAdminAPI sends one request to node n's admin API and decodes its JSON answer into v; it returns
// the HTTP status.
func callAdminAPI(t *testing.T, n *clusterProc, method, path, body string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+n.addrs.HTTP+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("node %d's admin API: %v", n.id, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("node %d answered %s %s with %q: %v", n.id, method, path, b, err)
	}
	return res.StatusCode
}

// expectRemoveRefused asks node n to remove node id and expects a refusal with status and code.
func expectRemoveRefused(t *testing.T, n *clusterProc, id string, force bool, status int, code string) {
	t.Helper()
	var e struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	got := callAdminAPI(t, n, http.MethodPost, "/api/v1/cluster/members/"+id+"/remove", fmt.Sprintf(`{"force":%v}`, force), &e)
	if got != status || e.Code != code {
		t.Fatalf("removing node %s (force %v): HTTP %d %s (%s), want %d %s", id, force, got, e.Code, e.Error, status, code)
	}
	t.Logf("removing node %s refused: %s", id, e.Error)
}

// A node lost for good (its disk, say): killed, it is removed with force (without, it is refused
// as not drained), and a replacement joins under a new ID with an empty data directory. The
// queues of three replicas it held are placed again and deliver every message; queue solo, whose
// only replica it held, cannot be served — a new replica is placed but has nobody to catch up
// from, and the members show it catching up — until it is deleted and created again. Until then
// the lost node's removal is not complete (solo's configuration, without a leader, still holds
// it) and a fresh node under its ID is refused; deleting solo frees the ID.
func TestReplaceALostNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	web := []string{"--http-listen", "127.0.0.1:0"}
	nodes, _ := formCluster(t, bin, web...)
	n10 := &clusterProc{id: 10, dir: t.TempDir()}
	n10.launch(t, bin, freeAddr(t), append([]string{"--join", nodes[0].addrs.Cluster, "--replication", "1"}, web...)...)
	n10.addrs = waitAddrFile(t, n10.addrFile, n10.p)
	all := []*clusterProc{nodes[0], nodes[1], nodes[2], n10}
	for _, n := range all {
		awaitStatusLists(t, n, n10)
	}
	if r := admin(t, n10, &fibp.CreateQueue{Name: "solo"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue solo: %v", r.ErrorCode)
	}
	enqueueOnLeader(t, all, "solo", "only-here")
	queues := []string{"orders", "s0", "s1", "s2"}
	for _, q := range queues[1:] {
		if r := admin(t, nodes[0], &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateQueue %s: %v", q, r.ErrorCode)
		}
	}
	for _, q := range queues {
		enqueueOnLeader(t, all, q, q+"-kept")
	}
	var lost *clusterProc
	for _, n := range all {
		if _, err := os.Stat(filepath.Join(n.dir, "snapshots", fmt.Sprintf("q%x", "solo"))); err == nil {
			lost = n
		}
	}
	var live []*clusterProc
	for _, n := range all {
		if n != lost {
			live = append(live, n)
		}
	}
	t.Logf("node %d, solo's only replica, is lost", lost.id)
	lost.p.cmd.Process.Signal(syscall.SIGKILL)
	lost.p.wait()
	waitFor(t, "the lost node shows unreachable", func() bool {
		return nodeStatus(t, live[0], lost.id).State == fibp.NodeStateUnreachable
	})
	id := fmt.Sprint(lost.id)
	expectRemoveRefused(t, live[0], id, false, http.StatusConflict, "node_not_drained")
	var res struct{ Groups int }
	if code := callAdminAPI(t, live[1], http.MethodPost, "/api/v1/cluster/members/"+id+"/remove", `{"force":true}`, &res); code != http.StatusOK {
		t.Fatalf("removing node %s with force: HTTP %d", id, code)
	}
	awaitSettled(t, live, id, 1) // solo's new replica has nobody to catch up from
	// solo has no leader to take the lost node out of its configuration: the removal is not
	// complete, and a fresh node under the lost ID is refused.
	refusedLine(t, bin, serverEnv(), "node "+id+" was removed from this cluster and its removal is not complete",
		"--log-level", "error", "--data-dir", t.TempDir(), "--node-id", id, "--cluster-listen", "127.0.0.1:0", "--join", live[0].addrs.Cluster)
	for _, n := range live {
		c := fibptest.Dial(t, n.addrs.FIBP)
		c.Handshake()
		r := c.Call(1, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "solo", Payload: []byte("x")}}}).(*fibp.EnqueueResult)
		c.NC.Close()
		if code := r.Results[0].ErrorCode; code == fibp.CodeOk {
			t.Fatalf("node %d took an enqueue to solo, whose every replica is lost", n.id)
		} else {
			t.Logf("an enqueue to solo through node %d: %v", n.id, code)
		}
	}
	for _, q := range queues {
		expectDeliveredByLeader(t, live, q, q+"-kept")
	}
	// solo is deleted and created again, empty; it serves.
	if r := admin(t, live[0], &fibp.DeleteQueue{Queue: "solo"}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DeleteQueue solo: %v", r.ErrorCode)
	}
	if r := admin(t, live[0], &fibp.CreateQueue{Name: "solo"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateQueue solo again: %v", r.ErrorCode)
	}
	enqueueOnLeader(t, live, "solo", "again")
	waitFor(t, "the lost node's ID is free once solo is deleted", func() bool {
		m := membersOf(t, live[0])
		return len(m.Removals) == 1 && m.Removals[0].ID == id && m.Removals[0].IDFree
	})

	// The replacement: a new ID, an empty data directory, --join.
	n11 := &clusterProc{id: 11, dir: t.TempDir()}
	n11.launch(t, bin, freeAddr(t), append([]string{"--join", live[0].addrs.Cluster}, web...)...)
	n11.addrs = waitAddrFile(t, n11.addrFile, n11.p)
	for _, n := range append(live, n11) {
		awaitStatusLists(t, n, n11)
	}
}

// The new replica a removal places catches up by snapshot, bodies included, when its group's
// leader has truncated its log: queue orders (on founders 1-3) is loaded until its leader has
// snapshotted; a drained follower of it is removed, and node 10, which joined after orders was
// placed, takes its place — the leader's node counts a snapshot sent — and then holds every
// message: with the other follower killed, an entry commits on the leader and node 10 alone, the
// leader is killed, and node 10 (or a node that learned from it) delivers everything
// acknowledged, with its body.
func TestRemovalCatchesUpBySnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	web := []string{"--http-listen", "127.0.0.1:0"}
	nodes, _ := formCluster(t, bin, web...)
	leader, removed, other := roles(t, nodes, "orders")
	n10 := &clusterProc{id: 10, dir: t.TempDir()}
	n10.launch(t, bin, freeAddr(t), append([]string{"--join", nodes[0].addrs.Cluster}, web...)...)
	n10.addrs = waitAddrFile(t, n10.addrFile, n10.p)

	const size = 64 << 10
	l := startLoad(leader.addrs.FIBP, "orders", 1, 2, size)
	snapshots := func() float64 { return scrape(t, leader, "fila_snapshot_seconds_count", `queue="orders"`) }
	waitUntil(t, 2*time.Minute, "the leader snapshots the queue", func() bool { return l.count(t) >= 0 && snapshots() >= 1 })
	at := l.count(t)
	waitUntil(t, time.Minute, "200 entries more", func() bool { return l.count(t) >= at+400 })
	keys := l.end(t)

	if r := admin(t, leader, &fibp.DrainNode{NodeID: uint64(removed.id), Drain: true}).(*fibp.DrainNodeResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("DrainNode %d: %v", removed.id, r.ErrorCode)
	}
	waitFor(t, "the drained node leads nothing", func() bool {
		return nodeStatus(t, leader, removed.id).QueueLeaderships == 0 && clusterStatus(t, leader).MetaLeaderNodeID != uint64(removed.id)
	})
	leader = enqueueOnLeader(t, []*clusterProc{leader, other}, "orders", "first") // the leader now (it may have moved)
	if leader == other {
		other = nodes[0]
		for _, n := range nodes {
			if n != leader && n != removed {
				other = n
			}
		}
	}
	sent := scrape(t, leader, "fila_cluster_snapshots_sent_total", "")
	var res struct{ Groups int }
	if code := callAdminAPI(t, leader, http.MethodPost, fmt.Sprintf("/api/v1/cluster/members/%d/remove", removed.id), `{}`, &res); code != http.StatusOK {
		t.Fatalf("removing node %d: HTTP %d", removed.id, code)
	}
	live := []*clusterProc{leader, other, n10}
	awaitSettled(t, live, fmt.Sprint(removed.id), 0)
	after := scrape(t, leader, "fila_cluster_snapshots_sent_total", "")
	t.Logf("%d messages of %d KiB; snapshots sent by the leader's node: %v before the removal, %v after", len(keys), size>>10, sent, after)
	if after <= sent {
		t.Fatal("node 10 caught up without a snapshot: the leader's log still held everything")
	}
	holdsEverything(t, bin, live, leader, n10, other, "orders", size, keys, web...)
}
