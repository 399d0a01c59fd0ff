package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
)

// A replica that was down catches up while its leader runs at full load, and the leader's node
// reports its lag (fila_cluster_replica_lag_entries); one down long enough that the leader
// truncated its log behind a snapshot is brought up by that snapshot, bodies included. Both
// prove the replica holds everything: once it is in step, the third node is killed, an entry
// commits on the leader and the replica alone, the leader is killed and the third node started
// again — the only node that can lead then is the replica (the third node's log lacks the
// entry), or a node that learned everything from it — and every message acknowledged is
// delivered with its body.

// load enqueues to a queue's leader from several connections, as fast as it answers, until
// stopped; it records the payload keys the leader acknowledged.
type load struct {
	addr, queue   string
	batch, size   int
	stop, stopped chan struct{}

	mu    sync.Mutex
	acked []string
	err   error
}

func startLoad(addr, queue string, conns, batch, size int) *load {
	l := &load{addr: addr, queue: queue, batch: batch, size: size, stop: make(chan struct{}), stopped: make(chan struct{})}
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			if err := l.run(c); err != nil {
				l.mu.Lock()
				l.err = errors.Join(l.err, err)
				l.mu.Unlock()
			}
		})
	}
	go func() { wg.Wait(); close(l.stopped) }()
	return l
}

// body is the payload of key: the key, then bytes derived from it, size in all.
func body(key string, size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, key...)
	b = append(b, ':')
	for i := 0; len(b) < size; i++ {
		b = append(b, key[i%len(key)]^byte(i))
	}
	return b
}

func (l *load) run(conn int) error {
	nc, err := net.DialTimeout("tcp", l.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer nc.Close()
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	call := func(id uint32, f fibp.Frame) (fibp.Frame, error) {
		if _, err := nc.Write(fibp.AppendFrame(nil, 0, id, f)); err != nil {
			return nil, err
		}
		for {
			_ = nc.SetReadDeadline(time.Now().Add(fibptest.ReadWait))
			b, err := fr.Next()
			if err != nil {
				return nil, err
			}
			h, rest, err := fibp.ParseHeader(b)
			if err != nil {
				return nil, err
			}
			res, err := fibp.Decode(h.Opcode, rest)
			if err != nil {
				return nil, err
			}
			if h.Opcode == fibp.OpPing {
				if _, err := nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Pong{})); err != nil {
					return nil, err
				}
				continue
			}
			return res, nil
		}
	}
	if _, err := call(0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl}); err != nil {
		return err
	}
	for n := uint32(1); ; n++ {
		select {
		case <-l.stop:
			return nil
		default:
		}
		msgs := make([]fibp.EnqueueMessage, l.batch)
		keys := make([]string, l.batch)
		for i := range msgs {
			keys[i] = fmt.Sprintf("c%d-%d-%d", conn, n, i)
			msgs[i] = fibp.EnqueueMessage{Queue: l.queue, Payload: body(keys[i], l.size)}
		}
		res, err := call(n, &fibp.Enqueue{Messages: msgs})
		if err != nil {
			return err
		}
		r, ok := res.(*fibp.EnqueueResult)
		if !ok {
			return fmt.Errorf("enqueue answered %#v", res)
		}
		l.mu.Lock()
		for i, x := range r.Results {
			if x.ErrorCode == fibp.CodeOk {
				l.acked = append(l.acked, keys[i])
			}
		}
		l.mu.Unlock()
		if c := r.Results[0].ErrorCode; c != fibp.CodeOk {
			return fmt.Errorf("enqueue on the leader answered %v", c)
		}
	}
}

// end stops the load and returns the keys acknowledged.
func (l *load) end(t *testing.T) []string {
	t.Helper()
	close(l.stop)
	<-l.stopped
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	return l.acked
}

// count is how many messages were acknowledged so far; a load that stopped by itself (an error)
// fails the test.
func (l *load) count(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stopped:
		t.Fatalf("the load stopped after %d messages: %v", len(l.acked), l.err)
	default:
	}
	return len(l.acked)
}

// scrape reads the node's /metrics and returns the value of the series named by name and its
// labels (as they print: `group="orders",replica="2"`), or -1 when it has none.
func scrape(t *testing.T, n *clusterProc, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.addrs.HTTP + "/metrics")
	if err != nil {
		t.Fatalf("node %d's metrics: %v", n.id, err)
	}
	defer resp.Body.Close()
	want := name + " "
	if labels != "" {
		want = name + "{" + labels + "} "
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", sc.Text(), err)
			}
			return f
		}
	}
	return -1
}

func lagOf(t *testing.T, leader, replica *clusterProc, queue string) float64 {
	return scrape(t, leader, "fila_cluster_replica_lag_entries", fmt.Sprintf("group=%q,replica=\"%d\"", queue, replica.id))
}

// waitUntil polls cond every 50 ms; the test fails after limit (a safety net against a hang,
// not a timed assertion).
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func kill(n *clusterProc) {
	n.p.cmd.Process.Signal(syscall.SIGKILL)
	n.p.wait()
}

// restart starts a killed node again on its data directory and waits until it serves.
func restart(t *testing.T, bin string, n *clusterProc, more ...string) {
	t.Helper()
	n.launch(t, bin, n.addrs.Cluster, more...)
	n.addrs = waitAddrFile(t, n.addrFile, n.p)
}

// roles are a queue's leader and its two followers.
func roles(t *testing.T, nodes []*clusterProc, queue string) (leader, replica, third *clusterProc) {
	t.Helper()
	leader = enqueueOnLeader(t, nodes, queue, "first")
	var others []*clusterProc
	for _, n := range nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	return leader, others[0], others[1]
}

// holdsEverything shows replica holds every message acknowledged (keys) with its body: the
// third node is killed, an entry commits on leader and replica alone, leader is killed and the
// third started again; the new leader (replica, or a node that learned from it) delivers them.
func holdsEverything(t *testing.T, bin string, nodes []*clusterProc, leader, replica, third *clusterProc, queue string,
	size int, keys []string, more ...string) {
	t.Helper()
	kill(third)
	if n := enqueueOnLeader(t, []*clusterProc{leader}, queue, "marker"); n != leader {
		t.Fatalf("node %d took the marker", n.id)
	}
	kill(leader)
	restart(t, bin, third, more...)
	now := enqueueOnLeader(t, []*clusterProc{replica, third}, queue, "after")
	t.Logf("node %d leads %s after node %d's death (node %d was the replica that caught up)", now.id, queue, leader.id, replica.id)
	c := fibptest.Dial(t, now.addrs.FIBP)
	c.Handshake()
	c.Subscribe(1, queue, 64) // credit given back as deliveries arrive: the node closes a client that lets 64 MiB queue up
	want := map[string]bool{"first": true, "marker": true, "after": true}
	for _, k := range keys {
		want[k] = true
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		ds := c.Deliveries(1)
		c.Send(1, &fibp.Credit{AdditionalCredit: uint32(len(ds))})
		for _, d := range ds {
			p := d.Payload
			key, _, _ := bytes.Cut(p, []byte(":"))
			k := string(key)
			if !want[k] {
				t.Fatalf("delivered %q, never acknowledged", k)
			}
			if k != "first" && k != "marker" && k != "after" && !bytes.Equal(p, body(k, size)) {
				t.Fatalf("message %s delivered with another body (%d bytes)", k, len(p))
			}
			seen[k] = true
		}
	}
}

// A replica killed while its leader runs at full load, and started again while the load goes on,
// catches up: its lag, on the leader's node, grows while it is down and falls to 0.
func TestAReplicaCatchesUpUnderFullLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	http := []string{"--http-listen", "127.0.0.1:0"}
	nodes, _ := formCluster(t, bin, http...)
	leader, replica, third := roles(t, nodes, "orders")
	waitUntil(t, time.Minute, "the leader reports the replica in step", func() bool { return lagOf(t, leader, replica, "orders") == 0 })

	kill(replica)
	l := startLoad(leader.addrs.FIBP, "orders", 2, 16, 1024)
	var down float64
	waitUntil(t, time.Minute, "the replica killed falls 500 entries behind", func() bool {
		l.count(t)
		down = lagOf(t, leader, replica, "orders")
		return down >= 500
	})
	restart(t, bin, replica, http...)
	start, before := time.Now(), l.count(t)
	var lags []float64
	waitUntil(t, time.Minute, "the replica catches up under load", func() bool {
		l.count(t)
		lag := lagOf(t, leader, replica, "orders")
		lags = append(lags, lag)
		return lag >= 0 && lag < 100
	})
	caught, during := time.Since(start), l.count(t)-before
	keys := l.end(t)
	waitUntil(t, time.Minute, "the replica in step once the load stops", func() bool { return lagOf(t, leader, replica, "orders") == 0 })
	t.Logf("lag %v entries when it was started again; in step (< 100) %v after its start, while the leader took %d more messages (%d in all); lag seen %v",
		down, caught.Round(time.Millisecond), during, len(keys), sample(lags, 12))
	if during == 0 {
		t.Fatal("the load had stopped before the replica caught up")
	}
	holdsEverything(t, bin, nodes, leader, replica, third, "orders", 1024, keys, http...)
}

// A replica down while its leader snapshots and truncates its log is brought up by that
// snapshot (the leader's node counts it in fila_cluster_snapshots_sent_total), bodies included.
func TestAReplicaBehindTheLogIsBroughtUpByASnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	http := []string{"--http-listen", "127.0.0.1:0"}
	nodes, _ := formCluster(t, bin, http...)
	leader, replica, third := roles(t, nodes, "orders")
	waitUntil(t, time.Minute, "the leader reports the replica in step", func() bool { return lagOf(t, leader, replica, "orders") == 0 })

	// A queue group snapshots once 64 MiB were proposed since the last snapshot and keeps 64
	// entries of log behind it: 64 KiB messages, two an entry, until the leader has snapshotted
	// and then written 200 more entries.
	const size = 64 << 10
	kill(replica)
	l := startLoad(leader.addrs.FIBP, "orders", 1, 2, size)
	snapshots := func() float64 { return scrape(t, leader, "fila_snapshot_seconds_count", `queue="orders"`) }
	waitUntil(t, 2*time.Minute, "the leader snapshots the queue", func() bool { return l.count(t) >= 0 && snapshots() >= 1 })
	at := l.count(t)
	waitUntil(t, time.Minute, "200 entries more", func() bool { return l.count(t) >= at+400 })
	keys := l.end(t)
	sent := scrape(t, leader, "fila_cluster_snapshots_sent_total", "")
	restart(t, bin, replica, http...)
	waitUntil(t, time.Minute, "the replica in step", func() bool { return lagOf(t, leader, replica, "orders") == 0 })
	after := scrape(t, leader, "fila_cluster_snapshots_sent_total", "")
	t.Logf("%d messages of %d KiB; snapshots sent by the leader's node %v before the replica's restart, %v after", len(keys), size>>10, sent, after)
	if after <= sent {
		t.Fatal("the replica caught up without a snapshot: the leader's log still held what it lacked")
	}
	holdsEverything(t, bin, nodes, leader, replica, third, "orders", size, keys, http...)
}

// sample is at most n values of vs, evenly spread, the last included.
func sample(vs []float64, n int) []float64 {
	if len(vs) <= n {
		return vs
	}
	var out []float64
	for i := range n {
		out = append(out, vs[i*(len(vs)-1)/(n-1)])
	}
	return out
}
