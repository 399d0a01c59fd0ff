package main

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nodeMetric reads one unlabelled metric from a node's /metrics (-1 when absent or unreadable).
func nodeMetric(n *clusterProc, name string) float64 {
	resp, err := http.Get("http://" + n.addrs.HTTP + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// awaitAllAsleep waits until no node runs a queue group replica (each hibernates).
func awaitAllAsleep(t *testing.T, nodes []*clusterProc, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a safety net against a hang
	for {
		asleep := true
		for _, n := range nodes {
			if nodeMetric(n, "fila_queue_groups_awake") != 0 {
				asleep = false
			}
		}
		if asleep {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: queue groups still awake after a minute", what)
		}
		// A scrape asks every awake queue group for its figures, which keeps it awake another
		// idle timeout (300 ms here): look less often than that.
		time.Sleep(time.Second)
	}
}

// TestSleepingClusterKilledComesBack: three real nodes with a short queue idle timeout. A queue's
// three replicas hibernate with what was enqueued; an enqueue wakes the group and it sleeps
// again; the three nodes are killed (kill -9) while it sleeps and started again, and every
// replica starts asleep; the next enqueue wakes it, and every message acknowledged is delivered,
// in the order it was enqueued.
func TestSleepingClusterKilledComesBack(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	flags := []string{"--queue-idle-timeout", "300ms", "--http-listen", "127.0.0.1:0"}
	nodes, addrs := formCluster(t, bin, flags...)
	want := []string{"a1", "a2", "a3"}
	for _, p := range want {
		enqueueOnLeader(t, nodes, "orders", p)
	}
	awaitAllAsleep(t, nodes, "after the first enqueues")
	enqueueOnLeader(t, nodes, "orders", "b1") // wakes the group
	want = append(want, "b1")
	awaitAllAsleep(t, nodes, "after the group woke")
	for _, n := range nodes {
		n.p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, n := range nodes {
		n.p.wait()
	}
	start := time.Now()
	startCluster(t, bin, nodes, addrs, flags...)
	awaitAllAsleep(t, nodes, "after the restart")
	t.Logf("restarted with every replica asleep in %v", time.Since(start).Round(time.Millisecond))
	enqueueOnLeader(t, nodes, "orders", "c1") // any node: a follower hands it to the leader
	want = append(want, "c1")
	t.Logf("first enqueue %v after the restart", time.Since(start).Round(time.Millisecond))

	_, c := subscribeOnLeader(t, nodes, "orders")
	for i, d := range c.Deliveries(len(want)) {
		if string(d.Payload) != want[i] {
			t.Fatalf("delivery %d is %q, want %q (all: %q)", i, d.Payload, want[i], want)
		}
	}
}
