package nodelink

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// TestMeasureGroupCost (FILA_NODELINK_GROUPS=N only) measures what N three-replica Raft groups
// cost over the link, idle and then all applying entries, against the same groups on
// hashicorp/raft's NetworkTransport (one TCP transport per group and node, its own listener and
// connection pool): goroutines and heap per group, heartbeats and bytes per second. The three
// nodes share this process, so the figures are the three nodes' together, per group.
func TestMeasureGroupCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FILA_NODELINK_GROUPS"))
	if n == 0 {
		t.Skip("FILA_NODELINK_GROUPS=N measures N groups")
	}
	window := 5 * time.Second
	for _, kind := range []string{"nodelink", "NetworkTransport"} {
		base := snapshotCosts()
		tr := newTrio(t, nil)
		var groups []*group
		var counted func() (heartbeats, empty, bytes uint64)
		switch kind {
		case "nodelink":
			for i := range n {
				groups = append(groups, tr.startGroup(fmt.Sprint("g", i), defaultTimeouts))
			}
			counted = func() (uint64, uint64, uint64) {
				var hb, e, b uint64
				for _, l := range tr.links {
					hb += l.Stats().HeartbeatsSent.Load()
					e += l.Stats().EmptyAppendsSent.Load()
					b += l.Stats().BytesSent.Load()
				}
				return hb, e, b
			}
		default:
			var nc *netCounter
			groups, nc = startNetworkTransportGroups(t, tr.ids, n)
			counted = nc.load
		}
		for _, g := range groups {
			g.leader(t)
		}
		time.Sleep(3 * time.Second) // settle: elections over, followers caught up
		idle := measure(base, n, window, counted)
		stop := make(chan struct{})
		for _, g := range groups {
			go keepApplying(g, stop)
		}
		time.Sleep(time.Second)
		active := measure(base, n, window, counted)
		close(stop)
		t.Logf("%s, %d groups × 3 replicas (raft.DefaultConfig timeouts):", kind, n)
		t.Logf("  idle:   %s", idle)
		t.Logf("  active: %s (each group applying 100-byte entries, ~50/s)", active)
		for _, g := range groups {
			for _, r := range g.rafts {
				_ = r.Shutdown().Error()
			}
		}
		for _, l := range tr.links {
			_ = l.Close()
		}
	}
}

func defaultTimeouts(c *raft.Config) {
	d := raft.DefaultConfig()
	c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout, c.CommitTimeout =
		d.HeartbeatTimeout, d.ElectionTimeout, d.LeaderLeaseTimeout, d.CommitTimeout
}

func keepApplying(g *group, stop chan struct{}) {
	payload := make([]byte, 100)
	for {
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		for id, r := range g.rafts {
			if r.State() == raft.Leader {
				_ = g.rafts[id].Apply(payload, time.Second).Error()
				break
			}
		}
	}
}

type costs struct {
	goroutines int
	heap       uint64
}

func snapshotCosts() costs {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return costs{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
}

func measure(base costs, n int, window time.Duration, counted func() (uint64, uint64, uint64)) string {
	hb0, e0, b0 := counted()
	start := time.Now()
	ru0 := readCPU()
	time.Sleep(window)
	hb1, e1, b1 := counted()
	cpu := readCPU() - ru0
	secs := time.Since(start).Seconds()
	c := snapshotCosts()
	return fmt.Sprintf("%.1f goroutines/group, %.0f KiB heap/group, %.1f heartbeats/s/group, %.1f empty appends/s/group, %.0f B/s/group, %.3f cores in all",
		float64(c.goroutines-base.goroutines)/float64(n), float64(c.heap-base.heap)/1024/float64(n),
		float64(hb1-hb0)/secs/float64(n), float64(e1-e0)/secs/float64(n), float64(b1-b0)/secs/float64(n), cpu.Seconds()/secs)
}

// startNetworkTransportGroups starts n groups on hashicorp/raft's TCP NetworkTransport, each
// member with its own listener, counting the bytes written through a wrapping stream layer.
func startNetworkTransportGroups(t *testing.T, ids []meta.NodeID, n int) ([]*group, *netCounter) {
	nc := &netCounter{}
	var groups []*group
	for range n {
		g := &group{rafts: map[meta.NodeID]*raft.Raft{}, fsms: map[meta.NodeID]*counter{}}
		trans := map[meta.NodeID]*raft.NetworkTransport{}
		var servers []raft.Server
		for _, id := range ids {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			tt := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: &countingStream{Listener: ln, c: nc},
				MaxPool: 3, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger()})
			trans[id] = tt
			servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: tt.LocalAddr()})
		}
		for _, id := range ids {
			conf := raft.DefaultConfig()
			conf.LocalID = raft.ServerID(id)
			conf.Logger = hclog.NewNullLogger()
			store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
			if err := raft.BootstrapCluster(conf, store, store, snaps, trans[id], raft.Configuration{Servers: servers}); err != nil {
				t.Fatal(err)
			}
			fsm := &counter{}
			r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans[id])
			if err != nil {
				t.Fatal(err)
			}
			g.rafts[id], g.fsms[id] = r, fsm
			tt := trans[id]
			t.Cleanup(func() { _ = tt.Close() })
		}
		groups = append(groups, g)
	}
	return groups, nc
}
