package nodelink_test

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/meta"
)

// startBrokersAs starts three brokers over the link as fila-server runs them in a cluster: fsync
// on, heartbeat timeout hb (fila-server's default is 500 ms), groups that never hibernate.
func startBrokersAs(t *testing.T, hb time.Duration) map[meta.NodeID]*node {
	t.Helper()
	return startBrokersWith(t, []meta.NodeID{"n1", "n2", "n3"}, func(o *broker.Options) {
		o.IdleTimeout = -1
		o.Cluster.HeartbeatTimeout = hb
	}, "")
}

// gapProducer enqueues one message at a time to the node it takes for the queue's leader, as the
// SDK does (a follower forwards it to the leader): an answer other than Ok sends the next enqueue
// to whichever node leads now. It records when each Ok answer came.
type gapProducer struct {
	nodes map[meta.NodeID]*node
	queue string

	mu     sync.Mutex
	oks    []time.Time
	failed map[broker.Code]int

	quit chan struct{}
	done chan struct{}
	sent atomic.Int64
	down atomic.Value // meta.NodeID of a node stopped under it
}

// leader is the node that leads the queue now, other than a stopped one.
func (p *gapProducer) leader() meta.NodeID {
	down, _ := p.down.Load().(meta.NodeID)
	for id, n := range p.nodes {
		if id != down && n.b.Leads(p.queue) {
			return id
		}
	}
	return ""
}

func startGapProducer(t *testing.T, nodes map[meta.NodeID]*node, queue string) *gapProducer {
	p := &gapProducer{nodes: nodes, queue: queue, failed: map[broker.Code]int{}, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		target := p.leader()
		for i := 0; ; i++ {
			select {
			case <-p.quit:
				return
			default:
			}
			if target == "" {
				target = p.leader()
				if target == "" {
					time.Sleep(time.Millisecond)
					continue
				}
			}
			rs, e := enqueueWithin(t, nodes[target].b, []broker.Message{{Queue: queue, Payload: []byte(strconv.Itoa(i))}})
			p.sent.Add(1)
			now := time.Now()
			p.mu.Lock()
			ok := e == nil && rs[0].Code == broker.CodeOk
			switch {
			case e != nil:
				p.failed[e.Code]++
				target = ""
			case rs[0].Code == broker.CodeOk:
				p.oks = append(p.oks, now)
			default:
				p.failed[rs[0].Code]++
				target = ""
			}
			p.mu.Unlock()
			if !ok {
				time.Sleep(time.Millisecond) // as a client backs off before it asks again
			}
		}
	}()
	return p
}

// okCount is the Ok answers so far.
func (p *gapProducer) okCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.oks)
}

// gap is the longest time between two consecutive Ok answers of which the later came after from
// and the earlier before to: the time the producer saw no enqueue answered Ok around an event
// that began at from and was over (the producer answered Ok again many times) by to.
func (p *gapProducer) gap(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var worst time.Duration
	for i := 1; i < len(p.oks); i++ {
		if p.oks[i].After(from) && p.oks[i-1].Before(to) {
			worst = max(worst, p.oks[i].Sub(p.oks[i-1]))
		}
	}
	return worst
}

func (p *gapProducer) stop() {
	close(p.quit)
	<-p.done
}

// A planned leadership transfer (Broker.TransferLeadership: hashicorp/raft's LeadershipTransfer)
// while a producer enqueues one message at a time: the producer keeps being answered Ok after the
// transfer, from the new leader. FILA_MEASURE_TRANSFER=N measures N transfers' gaps (the longest
// time without an Ok answer around each), then the gap when the leader stops instead (what a
// SIGTERM does today: fila-server does not hand its groups' leadership over before it stops).
func TestMeasurePlannedTransfer(t *testing.T) {
	trials, _ := strconv.Atoi(os.Getenv("FILA_MEASURE_TRANSFER"))
	measure := trials > 0
	if !measure {
		trials = 1
	}
	hb := 500 * time.Millisecond // fila-server's cluster_heartbeat_timeout
	nodes := startBrokersAs(t, hb)
	if e := nodes["n1"].b.CreateQueue(broker.QueueSpec{Name: "moving"}); e != nil {
		t.Fatal(e)
	}
	eventually(t, "moving has a leader", func() bool { return leaderOf(nodes, "moving") != "" })
	p := startGapProducer(t, nodes, "moving")
	stopped := false
	defer func() {
		if !stopped {
			p.stop()
		}
	}()
	eventually(t, "the producer is answered Ok", func() bool { return p.okCount() > 20 })
	var gaps, calls []time.Duration
	for range trials {
		old := leaderOf(nodes, "moving")
		if old == "" {
			eventually(t, "moving has a leader", func() bool { old = leaderOf(nodes, "moving"); return old != "" })
		}
		before := p.okCount()
		at := time.Now()
		if err := nodes[old].b.TransferLeadership("moving", "", ""); err != nil {
			t.Fatalf("transfer from %s: %v", old, err)
		}
		calls = append(calls, time.Since(at))
		eventually(t, "the producer is answered Ok after the transfer", func() bool { return p.okCount() > before+20 })
		if now := leaderOf(nodes, "moving"); now == old {
			t.Fatalf("%s still leads after its transfer", old)
		}
		gaps = append(gaps, p.gap(at, time.Now()))
	}
	if !measure {
		return
	}
	old := leaderOf(nodes, "moving")
	before := p.okCount()
	p.down.Store(old)
	at := time.Now()
	_ = nodes[old].b.Close() // as fila-server's shutdown does; its link goes with the test
	eventually(t, "the producer is answered Ok after the leader stopped", func() bool { return p.okCount() > before+20 })
	stopGap := p.gap(at, time.Now())
	p.stop()
	stopped = true
	nodes[old].b = nil // closed above
	slices.Sort(gaps)
	slices.Sort(calls)
	pct := func(ds []time.Duration, q float64) time.Duration {
		return ds[int(q*float64(len(ds)-1))].Round(100 * time.Microsecond)
	}
	t.Logf("planned transfer, heartbeat timeout %v, fsync on, %d trials: gap without an Ok enqueue p50 %v, p90 %v, max %v; TransferLeadership returned after p50 %v, max %v; %d enqueues sent, refused %v",
		hb, trials, pct(gaps, 0.5), pct(gaps, 0.9), gaps[len(gaps)-1].Round(100*time.Microsecond), pct(calls, 0.5), calls[len(calls)-1].Round(100*time.Microsecond), p.sent.Load(), p.failed)
	t.Logf("the leader stopped instead (no transfer): gap %v", stopGap.Round(100*time.Microsecond))
}
