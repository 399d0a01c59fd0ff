package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// side measures one broker for a workload and returns one value per figure of the workload.
type side func(ctx context.Context, e *env, p *peer) ([]float64, error)

// workload is run on a fresh fila-server and then on a fresh nats-server; each run starts from an
// empty data directory and the broker is stopped before the next one starts.
type workload struct {
	name, doc string
	mode      natsMode // the nats-server configuration
	rift      bool     // Fila's side speaks Rift over QUIC rather than FIBP
	cluster   bool     // three nodes of each broker on loopback (cluster.go) rather than one
	adminHTTP bool     // Fila's cluster nodes serve the admin HTTP API (node.http)
	filaFlags []string // fila-server flags beyond its defaults
	optIn     bool     // left out of the default run (no -only): runs only when -only selects it
	figures   []figure // names, units and directions; values filled in by run
	fila      side
	nats      side
}

// throughput is a msg/s figure whose fila/nats ratio should be at least target.
func throughput(name string, target float64) []figure {
	return []figure{{name: name, unit: "msg/s", better: higherBetter, target: target}}
}

// latency is a pair of p50 and p99 figures in microseconds whose ratios should be at most 1.
func latency(p50, p99 string) []figure {
	return []figure{{name: p50, unit: "us", better: lowerBetter, target: 1}, {name: p99, unit: "us", better: lowerBetter, target: 1}}
}

// workloads are the comparisons, in the order they run. Payloads are 1 KB unless the name says.
var workloads = []workload{
	{name: "publish_1kb_default", doc: "durable batched publish, each broker's default durability",
		mode: jsDefault, figures: throughput("publish_1kb_default", 1), fila: filaPublish(1024), nats: jsPublish(1024)},
	{name: "publish_1kb_fsync", doc: "durable batched publish, fsync before the ack on both",
		mode: jsSyncAlways, figures: throughput("publish_1kb_fsync", 1), fila: filaPublish(1024), nats: jsPublish(1024)},
	{name: "lifecycle_1kb_1c", doc: "pre-filled work queue, enqueue -> consume -> ack, 1 consumer",
		mode: jsDefault, figures: throughput("lifecycle_1kb_1c", 2), fila: filaLifecycle(1), nats: jsLifecycle(1)},
	{name: "lifecycle_1kb_4c", doc: "pre-filled work queue, enqueue -> consume -> ack, 4 consumers",
		mode: jsDefault, figures: throughput("lifecycle_1kb_4c", 2), fila: filaLifecycle(4), nats: jsLifecycle(4)},
	{name: "latency_1kb_default", doc: "end-to-end latency, one message at a time, default durability",
		mode: jsDefault, figures: latency("latency_p50_1kb", "latency_p99_1kb"), fila: filaLatency, nats: jsLatency},
	{name: "latency_1kb_fsync", doc: "end-to-end latency, one message at a time, fsync before the ack on both",
		mode: jsSyncAlways, figures: latency("latency_p50_1kb_fsync", "latency_p99_1kb_fsync"), fila: filaLatency, nats: jsLatency},
	{name: "roundtrip_1kb_fsync", doc: "durable round trip, one message at a time: enqueue -> delivery -> ack -> ack answered, fsync on both",
		mode: jsSyncAlways, figures: latency("roundtrip_p50_1kb_fsync", "roundtrip_p99_1kb_fsync"), fila: filaRoundTrip, nats: jsRoundTrip},
	{name: "roundtrip_1kb_nofsync", doc: "the same round trip without fsync: fila --fsync=false vs JetStream's default",
		mode: jsDefault, filaFlags: []string{"--fsync=false"},
		figures: latency("roundtrip_p50_1kb_nofsync", "roundtrip_p99_1kb_nofsync"), fila: filaRoundTrip, nats: jsRoundTrip},
	{name: "publish_64b", doc: "durable batched publish of 64 B messages, each broker's default durability",
		mode: jsDefault, figures: throughput("publish_64b", 1), fila: filaPublish(64), nats: jsPublish(64)},
	{name: "cluster_failover", doc: "3 nodes, R3: a queue's (stream's) leader killed with SIGKILL -> first enqueue and consume answered on the new leader",
		mode: jsSyncAlways, cluster: true, figures: failoverFigures(), fila: filaFailover, nats: jsFailover},
	{name: "cluster_publish_1kb_fsync", doc: "3 nodes, R3: durable batched publish to the leader, fsync before the ack on both",
		mode: jsSyncAlways, cluster: true, figures: throughput("cluster_publish_1kb_fsync", 1.5), fila: filaPublish(1024), nats: jsPublish(1024)},
	{name: "cluster_forward_publish_1kb_fsync", doc: "3 nodes, R3: cluster_publish_1kb_fsync with the producers on a node that does not lead the queue (stream), which forwards to the leader",
		mode: jsSyncAlways, cluster: true, figures: throughput("cluster_forward_publish_1kb_fsync", 1.5),
		fila: filaPublishForwarded(1024), nats: jsPublishForwarded(1024)},
	{name: "cluster_sdk_publish_1kb_fsync", doc: "3 nodes, R3: cluster_publish_1kb_fsync through the Go SDK's fila.DialCluster seeded with a node that does not lead the queue (its route hint sends the rest to the leader); NATS publishes through a server that does not lead the stream",
		mode: jsSyncAlways, cluster: true, figures: throughput("cluster_sdk_publish_1kb_fsync", 1.5),
		fila: filaPublishSDKHints(1024), nats: jsPublishForwarded(1024)},
	{name: "cluster_lifecycle_1kb_4c", doc: "3 nodes, R3: pre-filled work queue on the leader, enqueue -> consume -> ack, 4 consumers, fsync on both",
		mode: jsSyncAlways, cluster: true, figures: throughput("cluster_lifecycle_1kb_4c", 1.5), fila: filaLifecycle(4), nats: jsLifecycle(4)},
	{name: queuesName(10), doc: "3 nodes, R3: the lifecycle (1 KB, fsync) over 10 queues, each node's queues served by 2 producers and 2 consumer connections on that node (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, figures: throughput(queuesName(10), 1), fila: filaQueuesLifecycle(10), nats: notMeasured(1),
		filaFlags: queuesFlags},
	{name: queuesName(1000), doc: "3 nodes, R3: the same lifecycle over 1,000 queues, the same connections and credit (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, figures: throughput(queuesName(1000), 1), fila: filaQueuesLifecycle(1000), nats: notMeasured(1),
		filaFlags: queuesFlags,
		optIn:     true}, // creating 1,000 queues takes about two minutes here
	{name: durabilityName, doc: "3 nodes, R3: the lifecycle (1 KB, 4 consumers, fsync) on a queue with committed delivery durability, then on one with fast (leases in the leader's memory only) (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, figures: durabilityFigures(), fila: filaDurabilityLifecycle(4), nats: notMeasured(2)},
	{name: rollingName, doc: "3 nodes, R3: the lifecycle (1 KB, fsync) through the SDK, quiet and then through a rolling restart of the three nodes (drain, SIGTERM, start, undrain each in turn) (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, figures: rollingFigures(), fila: filaRolling, nats: notMeasured(5)},
	{name: "cluster_throttle", doc: "3 nodes, R3: a saturated throttle of 200 per 1000 ms shared by subscribers of three queues, their leaders on one node, then on three (the throttle's owner lends tokens to the other two); delivered msg/s, against N/W in the THROTTLE line (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, figures: throttleFigures(), fila: filaThrottled, nats: notMeasured(2)},
	{name: "cluster_shards", doc: "3 nodes, R3: the lifecycle (1 KB, fsync) of one queue of 1, 2 and 4 shards, every node that leads shards getting cluster_lifecycle_1kb_4c's producers (routed by shard) and consumers; the SHARDS line sets 2 and 4 shards against 1 (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, adminHTTP: true, figures: shardsFigures(), fila: filaShardsLifecycle, nats: notMeasured(3)},
	{name: fairName, doc: "3 nodes, R3: a 4-shard queue, five fairness keys of weights 1:2:3:4:5, a backlog and then half of it taken by the SDK's ClusterConsumer; each key's deliveries against weight/15 in the FAIRNESS line (no NATS counterpart)",
		mode: jsSyncAlways, cluster: true, adminHTTP: true, figures: fairFigures(), fila: filaShardFairness, nats: notMeasured(len(fairWeights) + 1)},
	{name: "cluster_roundtrip_1kb_fsync", doc: "3 nodes, R3: durable round trip on the leader, one message at a time, fsync on both",
		mode: jsSyncAlways, cluster: true, figures: latency("cluster_roundtrip_p50_1kb_fsync", "cluster_roundtrip_p99_1kb_fsync"),
		fila: filaRoundTrip, nats: jsRoundTrip},
	{name: "rift_pubsub_64b", doc: "pub/sub 1 -> 1, 64 B: Rift over QUIC vs NATS core over TLS",
		mode: coreTLS, rift: true, figures: throughput("rift_pubsub_64b", 1), fila: riftPubSub(64), nats: natsPubSub(64)},
	{name: "rift_pubsub_1kb", doc: "pub/sub 1 -> 1, 1 KB: Rift over QUIC vs NATS core over TLS",
		mode: coreTLS, rift: true, figures: throughput("rift_pubsub_1kb", 1), fila: riftPubSub(1024), nats: natsPubSub(1024)},
	{name: "rift_reqreply_1kb", doc: "request/reply latency, 1 KB: Rift over QUIC vs NATS core over TLS",
		mode: coreTLS, rift: true, figures: latency("rift_reqreply_p50_1kb", "rift_reqreply_p99_1kb"), fila: riftReqReply, nats: natsReqReply},
}

// selected reports whether -only lets the workload run.
func (w workload) selected(only string) bool {
	if only == "" {
		return !w.optIn
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" && strings.HasPrefix(w.name, s) {
			return true
		}
	}
	return false
}

// run measures the workload on both brokers and returns its figures. A Fila side that cannot run
// (Rift not available) leaves its values n/a, with the reason on stderr.
func (w workload) run(ctx context.Context, e *env) ([]figure, error) {
	figs := make([]figure, len(w.figures))
	copy(figs, w.figures)
	for i := range figs {
		figs[i].peer, figs[i].fila, figs[i].nats = w.mode.String(), math.NaN(), math.NaN()
	}
	if e.o.side != "nats" {
		if err := e.runFila(ctx, w, figs); err != nil {
			return nil, err
		}
	}
	if e.o.side == "fila" {
		return figs, nil
	}
	vals, err := e.runSide(ctx, "nats", w, w.nats, func(ctx context.Context) (*peer, error) {
		if w.cluster {
			return e.startNATSCluster(ctx, w.mode)
		}
		return e.startNATS(ctx, w.mode)
	})
	if err != nil {
		return nil, fmt.Errorf("%s on nats: %w", w.name, err)
	}
	for i := range figs {
		figs[i].nats = vals[i]
	}
	return figs, nil
}

// runFila measures Fila's side of w into figs. Rift is young: when it is missing or fails, Fila's
// figures stay n/a, with the reason on stderr, rather than ending the run.
func (e *env) runFila(ctx context.Context, w workload, figs []figure) error {
	if w.rift && e.riftReason != "" {
		fmt.Fprintf(os.Stderr, "   fila: n/a: %s\n", e.riftReason)
		return nil
	}
	flags := append(slices.Clone(w.filaFlags), strings.Fields(e.o.filaArgs)...)
	vals, err := e.runSide(ctx, "fila", w, w.fila, func(ctx context.Context) (*peer, error) {
		if w.cluster {
			return e.startFilaCluster(ctx, w.adminHTTP, flags...)
		}
		return e.startFila(ctx, w.rift, flags...)
	})
	switch {
	case err != nil && w.rift && ctx.Err() == nil:
		fmt.Fprintf(os.Stderr, "   fila: n/a: Rift failed: %v\n", err)
	case err != nil:
		return fmt.Errorf("%s on fila: %w", w.name, err)
	default:
		for i := range figs {
			figs[i].fila = vals[i]
		}
	}
	return nil
}

// runSide starts a broker, measures one side of w against it and stops it.
func (e *env) runSide(ctx context.Context, name string, w workload, s side, start func(context.Context) (*peer, error)) ([]float64, error) {
	p, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	e.profName, e.pprofURL = w.name+"-"+name, p.pprofURL
	e.brokerPids, e.cpu = []int{p.proc.cmd.Process.Pid}, nil
	if p.cluster != nil {
		e.brokerPids = p.cluster.pids()
	}
	defer func() { e.pprofURL, e.brokerPids = "", nil }()
	vals, err := s(ctx, e, p)
	if err != nil {
		if p.proc.exited() {
			err = fmt.Errorf("%w\nbroker log:\n%s", err, p.proc.logTail())
		}
		return nil, err
	}
	if len(vals) != len(w.figures) {
		return nil, fmt.Errorf("measured %d values for %d figures", len(vals), len(w.figures))
	}
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = w.figures[i].name + "=" + grouped(v, w.figures[i].unit) + " " + w.figures[i].unit
	}
	if e.cpu != nil {
		parts = append(parts, e.cpu.String())
		e.cpuLines = append(e.cpuLines, e.cpu.line(w.name, name))
	}
	fmt.Fprintf(os.Stderr, "   %s: %s\n", name, strings.Join(parts, ", "))
	return vals, nil
}
