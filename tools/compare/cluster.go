package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/tools/internal/fibpconn"
	"github.com/filamq/fila/tools/internal/loopback"
)

// The cluster workloads run three brokers on loopback: three fila-server processes founded from
// one initial_cluster (queue groups of three replicas, fsync on), and three nats-server processes
// in one JetStream cluster with R3 streams (sync_interval: always). Every node keeps its ports
// and its data directory for the whole run, so that a node killed with SIGKILL is started again
// as itself.

// clusterSize is the number of nodes in a cluster run.
const clusterSize = 3

// node is one broker process of a cluster.
type node struct {
	name string   // fila: its node ID; nats: its server_name
	addr string   // the client address: fila host:port; nats a nats:// URL
	bin  string   // the binary and its arguments, to start it again after a kill
	args []string // …
	log  string   // its log file (each start appends a numbered one)
	prof string   // fila with -profile: its pprof base URL
	http string   // fila with -profile or a workload's adminHTTP: its HTTP base URL (admin API, pprof)
	proc *proc
	runs int // starts so far
}

// cluster is a running cluster of clusterSize nodes.
type cluster struct {
	nodes []*node
	ready func(ctx context.Context, n *node) error // answers once n serves clients
}

// start starts n and waits until it serves clients.
func (c *cluster) start(ctx context.Context, n *node) error {
	n.runs++
	p, err := startProc(n.name, fmt.Sprintf("%s.%d", n.log, n.runs), n.bin, n.args...)
	if err != nil {
		return err
	}
	n.proc = p
	return waitReady(ctx, p, time.Minute, func() error { return c.ready(ctx, n) })
}

// kill ends n with SIGKILL, as a crash would, and waits until it is gone.
func (n *node) kill() {
	running.Lock()
	delete(running.set, n.proc)
	running.Unlock()
	syscall.Kill(-n.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-n.proc.done
}

// stop stops every node that runs.
func (c *cluster) stop() {
	for _, n := range c.nodes {
		if n.proc != nil && !n.proc.exited() {
			n.proc.stop()
		}
	}
}

// pids are the nodes' process IDs, for the CPU they use.
func (c *cluster) pids() []int {
	var out []int
	for _, n := range c.nodes {
		if n.proc != nil && !n.proc.exited() {
			out = append(out, n.proc.cmd.Process.Pid)
		}
	}
	return out
}

// index is the position of the node whose client address is addr (-1 when none).
func (c *cluster) index(addr string) int {
	for i, n := range c.nodes {
		if n.addr == addr {
			return i
		}
	}
	return -1
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		a, err := loopback.FreeAddr()
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

// startFilaCluster founds a three-node fila cluster on loopback with fila-server's defaults
// (fsync on, three replicas per queue) and flags, and returns it as a peer whose addr is the
// first node's. With adminHTTP (or -profile) every node serves HTTP (node.http).
func (e *env) startFilaCluster(ctx context.Context, adminHTTP bool, flags ...string) (*peer, error) {
	dir, err := e.peerDir("fila-cluster")
	if err != nil {
		return nil, err
	}
	listen, err := freeAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	link, err := freeAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	initial := make([]string, clusterSize)
	for i := range initial {
		initial[i] = fmt.Sprintf("%d=%s", i+1, link[i])
	}
	c := &cluster{ready: func(_ context.Context, n *node) error {
		conn, err := fibpconn.Dial(n.addr)
		if err == nil {
			conn.Close()
		}
		return err
	}}
	for i := range clusterSize {
		n := &node{name: fmt.Sprint(i + 1), addr: listen[i], bin: e.filaBin, log: filepath.Join(dir, fmt.Sprintf("node%d.log", i+1))}
		httpArgs := []string{"--http-listen", ""}
		if e.o.profile || adminHTTP {
			httpAddr, err := loopback.FreeAddr()
			if err != nil {
				return nil, err
			}
			httpArgs, n.http = []string{"--http-listen", httpAddr}, "http://"+httpAddr
			if e.o.profile {
				httpArgs, n.prof = append(httpArgs, "--pprof"), n.http
			}
		}
		n.args = append(append([]string{"--data-dir", filepath.Join(dir, fmt.Sprintf("node%d", i+1)), "--listen", listen[i],
			"--log-level", "warn", "--node-id", n.name, "--cluster-listen", link[i],
			"--initial-cluster", strings.Join(initial, ",")}, httpArgs...), flags...)
		c.nodes = append(c.nodes, n)
	}
	return e.startCluster(ctx, c, dir)
}

// startNATSCluster starts a three-node JetStream cluster on loopback, configured for mode.
func (e *env) startNATSCluster(ctx context.Context, mode natsMode) (*peer, error) {
	dir, err := e.peerDir("nats-cluster")
	if err != nil {
		return nil, err
	}
	listen, err := freeAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	routes, err := freeAddrs(clusterSize)
	if err != nil {
		return nil, err
	}
	c := &cluster{ready: func(ctx context.Context, n *node) error {
		nc, err := e.natsConnect(&peer{addr: n.addr})
		if err != nil {
			return err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx) // answers once the JetStream meta group has a leader
		return err
	}}
	for i := range clusterSize {
		n := &node{name: fmt.Sprintf("n%d", i+1), addr: "nats://" + listen[i], bin: e.natsBin,
			log: filepath.Join(dir, fmt.Sprintf("n%d.log", i+1))}
		conf := filepath.Join(dir, n.name+".conf")
		if err := os.WriteFile(conf, []byte(natsClusterConfig(mode, n.name, listen[i], routes, i, filepath.Join(dir, n.name))), 0o644); err != nil {
			return nil, err
		}
		n.args = []string{"-c", conf}
		c.nodes = append(c.nodes, n)
	}
	return e.startCluster(ctx, c, dir)
}

// natsClusterConfig renders node i's configuration: JetStream (fsync before the ack with
// jsSyncAlways) and routes to the others.
func natsClusterConfig(mode natsMode, name, listen string, routes []string, i int, store string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %q\nserver_name: %q\n", listen, name)
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n", store)
	if mode == jsSyncAlways {
		b.WriteString("  sync_interval: always\n")
	}
	b.WriteString("}\n")
	fmt.Fprintf(&b, "cluster {\n  name: bench\n  listen: %q\n  routes: [\n", routes[i])
	for j, r := range routes {
		if j != i {
			fmt.Fprintf(&b, "    nats-route://%s\n", r)
		}
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

// startCluster starts every node (together: a founder waits for the others) and waits until each
// serves clients.
func (e *env) startCluster(ctx context.Context, c *cluster, dir string) (*peer, error) {
	for _, n := range c.nodes {
		n.runs++
		p, err := startProc(n.name, fmt.Sprintf("%s.%d", n.log, n.runs), n.bin, n.args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		n.proc = p
	}
	for _, n := range c.nodes {
		if err := waitReady(ctx, n.proc, time.Minute, func() error { return c.ready(ctx, n) }); err != nil {
			c.stop()
			return nil, err
		}
	}
	return &peer{proc: c.nodes[0].proc, addr: c.nodes[0].addr, pprofURL: c.nodes[0].prof, dir: dir, cluster: c}, nil
}

// probeWait is how long the tool waits before asking the nodes again while a cluster has no
// leader for a queue or stream.
const probeWait = 20 * time.Millisecond

// filaLeader returns the address of the node that leads queue: the one that takes a subscription;
// the others answer NotLeader, or NodeNotReady while the group elects. It asks every node in turn
// until one does or ctx ends. Only for an empty queue: the probe's credit is unlimited (0), and a
// message it was sent would stay leased until its visibility timeout.
func filaLeader(ctx context.Context, c *cluster, queue string) (string, error) {
	for {
		for _, n := range c.nodes {
			if n.proc == nil || n.proc.exited() {
				continue
			}
			if leads(n.addr, queue) {
				return n.addr, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no node leads %s: %w", queue, ctx.Err())
		case <-time.After(probeWait):
		}
	}
}

// leads reports whether the node at addr takes a subscription to queue.
func leads(addr, queue string) bool {
	c, err := fibpconn.Dial(addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_, err = c.Consume(queue, 0, func(*fibp.Delivery) {})
	return err == nil
}

// queueAddr creates queue (through the first node of a cluster, which hands it to the meta
// leader) and returns the address to serve it from: the single node's, or the node that leads
// the queue's group.
func (e *env) queueAddr(ctx context.Context, p *peer, queue string) (string, error) {
	if err := createQueue(p.addr, queue); err != nil {
		return "", err
	}
	if p.cluster == nil {
		return p.addr, nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	addr, err := filaLeader(ctx, p.cluster, queue)
	if err == nil && e.pprofURL != "" {
		e.pprofURL = p.cluster.nodes[p.cluster.index(addr)].prof // -profile profiles the leader
	}
	return addr, err
}

// natsStreamLeader returns the client address of the server that leads stream.
func natsStreamLeader(ctx context.Context, js jetstream.JetStream, c *cluster, stream string) (*node, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		info, err := streamInfo(ctx, js, stream)
		if err == nil && info.Cluster != nil {
			for _, n := range c.nodes {
				if n.name == info.Cluster.Leader {
					return n, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no server leads stream %s: %w", stream, errors.Join(err, ctx.Err()))
		case <-time.After(probeWait):
		}
	}
}

// streamInfo asks for a stream's info with a short timeout (it fails while the stream elects).
func streamInfo(ctx context.Context, js jetstream.JetStream, stream string) (*jetstream.StreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return s.Info(ctx)
}

// natsClusterConnect connects to every node of a NATS cluster (the client picks one and moves to
// another when it goes away).
func natsClusterConnect(c *cluster) (*nats.Conn, error) {
	urls := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		urls[i] = n.addr
	}
	return nats.Connect(strings.Join(urls, ","), nats.Name("fila-bench"), nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(probeWait), nats.DontRandomize())
}

// scaleTargets are the cluster figures with a floor relative to Fila's own single node: a
// three-node cluster's throughput should be at least half a single node's.
var scaleTargets = map[string]float64{"cluster_publish_1kb_fsync": 0.5, "cluster_lifecycle_1kb_4c": 0.5}

// scaleLines renders, for every cluster figure whose single-node figure (the same name without
// "cluster_") was measured in the same run, Fila's cluster against Fila's single node:
//
//	SCALE figure=cluster_publish_1kb_fsync cluster=9000 single=30000 ratio=0.300 unit=msg/s target=0.5 result=missed
func scaleLines(figs []figure) []string {
	var out []string
	for _, c := range figs {
		name, ok := strings.CutPrefix(c.name, "cluster_")
		if !ok {
			continue
		}
		i := slices.IndexFunc(figs, func(f figure) bool { return f.name == name })
		if i < 0 || math.IsNaN(c.fila) || math.IsNaN(figs[i].fila) {
			continue
		}
		r := ratio(c.fila, figs[i].fila)
		line := fmt.Sprintf("SCALE figure=%s cluster=%s single=%s ratio=%s unit=%s", c.name, plain(c.fila, c.unit),
			plain(figs[i].fila, c.unit), plainRatio(r), c.unit)
		if t, ok := scaleTargets[c.name]; ok {
			res := "met"
			if r < t {
				res = "missed"
			}
			line += fmt.Sprintf(" target=%.1f result=%s", t, res)
		}
		out = append(out, line)
	}
	return out
}
