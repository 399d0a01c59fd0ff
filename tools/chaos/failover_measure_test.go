package chaos

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// TestMeasureFailoverByFault (FILA_MEASURE_FAILOVER=N trials only) measures, on three
// fila-server processes and one queue, how long after its leader is stopped another node
// leads it: with kill -9 and with SIGSTOP (the node is continued once another took over, or
// after 5 s). Each node is asked for a subscription every 20 ms with a 200 ms bound; the
// figures are the fault's time to the first subscription another node takes. Each trial starts
// once every node knows the leader (a node killed in the trial before has restarted and
// rejoined), and FILA_MEASURE_FAILOVER_SETTLE (a duration) later.
func TestMeasureFailoverByFault(t *testing.T) {
	trials, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_FAILOVER"))
	if trials <= 0 {
		t.Skip("FILA_MEASURE_FAILOVER=N (trials) measures failover after kill -9 and after SIGSTOP")
	}
	flags, err := FoundingFlags(3)
	if err != nil {
		t.Fatal(err)
	}
	c, err := StartCluster(serverBinary(t), t.TempDir(), 3, flags)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d's log:\n%s", n.ID, n.Log.tail(40))
			}
		}
	})
	ctx := context.Background()
	w := Workload{Addrs: c.Addrs(), Queue: "failover"}
	if err := w.CreateQueues(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	settle, _ := time.ParseDuration(os.Getenv("FILA_MEASURE_FAILOVER_SETTLE"))
	for _, fault := range []string{"kill -9", "SIGSTOP"} {
		var took []time.Duration
		for i := range trials {
			ready := time.Now()
			waitAllKnowLeader(t, c, "failover", 30*time.Second)
			time.Sleep(settle) // the measurement's setting: how long the nodes have had together
			if i > 0 {
				t.Logf("every node knew the leader %v after the last fault was healed", time.Since(ready).Round(time.Millisecond))
			}
			leader := leaderOf(t, c, "failover", 30*time.Second)
			start := time.Now()
			if fault == "kill -9" {
				leader.Kill()
			} else if err := leader.Pause(); err != nil {
				t.Fatal(err)
			}
			by, at := firstLeader(t, c, leader, "failover", start.Add(5*time.Second))
			if fault == "kill -9" {
				if err := leader.Start(); err != nil {
					t.Fatal(err)
				}
			} else if err := leader.Resume(); err != nil {
				t.Fatal(err)
			}
			if by == nil {
				t.Logf("%s trial %d: node %d stopped, no other node took a subscription within 5 s", fault, i+1, leader.ID)
				took = append(took, 5*time.Second)
				continue
			}
			took = append(took, at.Sub(start))
			t.Logf("%s trial %d: node %d stopped, node %d took a subscription %v later", fault, i+1, leader.ID, by.ID, at.Sub(start).Round(time.Millisecond))
		}
		slices.Sort(took)
		t.Logf("%s of the leader → another node takes a subscription, %d trials: p50 %v, max %v", fault, trials,
			took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}
}

// waitAllKnowLeader waits until every node answers a subscription to queue by taking it or with
// a NotLeader naming the leader: each has its replica open and knows who leads.
func waitAllKnowLeader(t *testing.T, c *Cluster, queue string, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for _, node := range c.Nodes {
		for {
			dctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			cl, err := fila.Dial(dctx, node.Addr, &fila.Options{MaxReconnects: 0})
			cancel()
			if err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				var cons *fila.Consumer
				cons, err = cl.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 1})
				cancel()
				if err == nil {
					cons.Close()
				}
				cl.Close()
				if _, named := fila.LeaderAddr(err); err == nil || named {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not know the leader of %s within %v: %v", node.ID, queue, wait, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// leaderOf waits until a node takes a subscription to queue and returns it.
func leaderOf(t *testing.T, c *Cluster, queue string, wait time.Duration) *Node {
	t.Helper()
	n, _ := firstLeader(t, c, nil, queue, time.Now().Add(wait))
	if n == nil {
		t.Fatalf("no node took a subscription to %s within %v", queue, wait)
	}
	return n
}

// firstLeader asks every node but skip for a subscription to queue every 20 ms, which only the
// queue's leader takes (a node that forwards enqueues to the leader would take an enqueue
// without leading), until one takes it (it returns that node and when) or until deadline (nil).
func firstLeader(t *testing.T, c *Cluster, skip *Node, queue string, deadline time.Time) (*Node, time.Time) {
	t.Helper()
	clients := map[*Node]*fila.Client{}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	for time.Now().Before(deadline) {
		for _, node := range c.Nodes {
			if node == skip {
				continue
			}
			cl := clients[node]
			if cl == nil || !cl.Connected() {
				if cl != nil {
					cl.Close()
				}
				dctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				cl, _ = fila.Dial(dctx, node.Addr, &fila.Options{MaxReconnects: 0})
				cancel()
				clients[node] = cl
				if cl == nil {
					continue
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			cons, err := cl.Consume(ctx, queue, fila.ConsumeOptions{MaxUnacked: 1})
			cancel()
			if err == nil {
				at := time.Now()
				cons.Close()
				return node, at
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, time.Time{}
}
