// Command chaos is the long run of the history checker (make chaos): it builds fila-server,
// starts nodes on loopback, drives the workload through the Go SDK while a nemesis kills -9 and
// restarts, pauses, or cuts off from the others (a partition), nodes, drains the queue, checks
// the history and prints its figures: operations, faults, lost, duplicated, unavailability
// windows. It exits 1 when the history breaks a promise, 2 when the run could not be carried out.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/chaos"
	"github.com/filamq/fila/tools/internal/loopback"
	"github.com/filamq/fila/tools/internal/repo"
)

var (
	errorKinds = flag.Int("errors", 8, "kinds of errors printed at most (the commonest first)")
	logDir     = flag.String("logs", "", "a directory to write each node's log into (node<ID>.log) at the end")
	explain    = flag.Duration("explain", 2*time.Second, "for each unavailability window at least this long, print what each client was doing (0: none)")
	shards     = flag.Int("shards", 0, "drive one sharded queue of this many shards (2 to 64) instead, ordered by group, every other batch sent twice "+
		"with its idempotency keys (chaos.ShardedWorkload); -queues and -batch do not apply, and kill kills a shard's leader")
)

// shardedQueue is the sharded queue's name (-shards).
const shardedQueue = "orders"

func main() {
	duration := flag.Duration("duration", 2*time.Minute, "how long the workload runs")
	nodes := flag.Int("nodes", 1, "fila-server processes: 1 a single node; 3 or 5 the founding members of a cluster on loopback")
	queues := flag.Int("queues", 1, "queues (each consumer takes one; producers send to each in turn)")
	faults := flag.String("faults", "kill", "the nemesis: a comma-separated mix of kill (kill -9, then restart), pause (SIGSTOP, then SIGCONT) "+
		"and, with -nodes 3 or 5, partition (a node cut off from the others, through a proxy on the inter-node links); none for no faults")
	every := flag.Duration("every", 3*time.Second, "a fault starts within this after the last one healed")
	hold := flag.Duration("hold", time.Second, "how long a fault lasts at most")
	producers := flag.Int("producers", 4, "producing clients")
	consumers := flag.Int("consumers", 4, "consuming clients")
	batch := flag.Int("batch", 4, "messages per Enqueue")
	rate := flag.Int("rate", 2000, "messages per second enqueued by all producers (0: as fast as answered; the history is held in memory, about 200 bytes an operation)")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "the nemesis's random seed")
	serverArgs := flag.String("server-args", "", "further flags for every fila-server, space-separated (e.g. --fsync=false)")
	bin := flag.String("bin", "", "a fila-server binary (default: built from the repository)")
	show := flag.Int("show", 20, "violations printed at most")
	flag.Parse()
	os.Exit(run(*duration, *nodes, *queues, *faults, *every, *hold, *producers, *consumers, *batch, *rate, *seed, *serverArgs, *bin, *show))
}

func run(duration time.Duration, nodes, queues int, faults string, every, hold time.Duration, producers, consumers, batch, rate int,
	seed uint64, serverArgs, bin string, show int) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "fila-chaos-")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		fmt.Println("chaos: building fila-server")
		if bin, err = repo.BuildServer(ctx, dir); err != nil {
			return fail(err)
		}
	}
	args := strings.Fields(serverArgs)
	nodeArgs := func(int) []string { return args }
	var proxy *chaos.LinkProxy
	if nodes > 1 {
		founding, err := chaos.FoundingFlags(nodes)
		if err != nil {
			return fail(err)
		}
		if strings.Contains(faults, "partition") {
			if proxy, err = chaos.NewLinkProxy(nodes); err != nil {
				return fail(err)
			}
			defer proxy.Close()
			founding = proxy.FoundingFlags()
		}
		nodeArgs = func(id int) []string { return append(founding(id), args...) }
	}
	httpAddrs, nodeArgs, err := withHTTP(nodes, nodeArgs)
	if err != nil {
		return fail(err)
	}
	c, err := chaos.StartCluster(bin, dir, nodes, nodeArgs)
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	nemesis, err := nemesisOf(faults, c, proxy)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("chaos: %d node(s) %v, %d queue(s), %v of load (%d producers at %d messages/s in all, %d consumers, batch %d), faults %s every ≤%v for ≤%v, seed %d\n",
		nodes, c.Addrs(), queues, duration, producers, rate, consumers, batch, faults, every, hold, seed)
	start := time.Now()
	res, err := chaos.Run(ctx, chaos.Config{Cluster: c, Nemesis: nemesis, Duration: duration, FaultEvery: every,
		FaultHold: hold, Seed: seed, Workload: chaos.Workload{Queues: queues, Producers: producers, Consumers: consumers, Batch: batch, Rate: rate},
		Load: shardedLoad(c, httpAddrs, producers, consumers, rate)})
	r := res.Report
	for _, op := range res.History {
		if op.Kind == chaos.Fault {
			fmt.Printf("fault: %s from %v to %v%s\n", op.Value, op.Invoke.Round(time.Millisecond), op.Complete.Round(time.Millisecond), errSuffix(op.Err))
		}
	}
	printWindows(res, c)
	printQueueWindows(res.History)
	printErrors(res.History, *errorKinds)
	for i, v := range r.Violations {
		if i == show {
			fmt.Printf("... and %d more violations\n", len(r.Violations)-show)
			break
		}
		fmt.Println("violation:", v)
	}
	if proxy != nil {
		fmt.Printf("chaos: the link proxy forwarded %d bytes between nodes and refused %d connections of cut pairs\n", proxy.Forwarded.Load(), proxy.Refused.Load())
	}
	fmt.Printf("chaos: %v in %v\n", r.Figures, time.Since(start).Round(time.Second))
	writeLogs(c, res.Start)
	if err != nil {
		for _, n := range c.Nodes {
			fmt.Fprintf(os.Stderr, "node %d's log:\n%s\n", n.ID, n.Log.String())
		}
		return fail(err)
	}
	if !r.OK() {
		fmt.Printf("chaos: FAILED: %d violations\n", len(r.Violations))
		return 1
	}
	fmt.Println("chaos: ok: no acknowledged enqueue lost, no acked message delivered again, no phantom, none out of order, no duplicate")
	return 0
}

// shardedLoad is the sharded workload when -shards asks for it (nil: the Workload).
func shardedLoad(c *chaos.Cluster, httpAddrs []string, producers, consumers, rate int) chaos.Load {
	if *shards == 0 {
		return nil
	}
	fmt.Printf("chaos: one queue of %d shards, ordered by group, every other batch sent twice\n", *shards)
	return chaos.ShardedWorkload{Addrs: c.Addrs(), HTTPAddrs: httpAddrs, Queue: shardedQueue, Shards: *shards,
		Producers: producers, Consumers: consumers, Rate: rate}
}

// withHTTP gives each node an admin HTTP API on loopback when -shards asks for a sharded queue
// (it is created there), and returns their addresses.
func withHTTP(nodes int, nodeArgs func(int) []string) ([]string, func(int) []string, error) {
	if *shards == 0 {
		return nil, nodeArgs, nil
	}
	addrs := make([]string, nodes)
	for i := range addrs {
		var err error
		if addrs[i], err = loopback.FreeAddr(); err != nil {
			return nil, nil, err
		}
	}
	return addrs, func(id int) []string { return append(nodeArgs(id), "--http-listen", addrs[id-1]) }, nil
}

// writeLogs writes each node's log into -logs, when given.
func writeLogs(c *chaos.Cluster, start time.Time) {
	if *logDir == "" {
		return
	}
	if err := os.MkdirAll(*logDir, 0o755); err != nil { // a run's hour of history is not lost for a missing folder
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return
	}
	fmt.Printf("chaos: the history's 0s is %s in the nodes' logs (%s)\n", start.UTC().Format("15:04:05.000"), *logDir)
	for _, n := range c.Nodes {
		if err := os.WriteFile(filepath.Join(*logDir, fmt.Sprintf("node%d.log", n.ID)), []byte(n.Log.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
		}
	}
}

// nemesisOf is the nemesis of the comma-separated faults (nil for none).
func nemesisOf(faults string, c *chaos.Cluster, proxy *chaos.LinkProxy) (chaos.Nemesis, error) {
	var mix chaos.Mix
	for _, f := range strings.Split(faults, ",") {
		switch strings.TrimSpace(f) {
		case "kill":
			if *shards > 0 {
				mix = append(mix, chaos.KillShardLeader{Cluster: c, Queue: shardedQueue})
				continue
			}
			mix = append(mix, chaos.KillRestart{Cluster: c})
		case "pause":
			mix = append(mix, chaos.Pause{Cluster: c})
		case "partition":
			if proxy == nil {
				return nil, errors.New("partition needs several nodes (-nodes 3 or 5)")
			}
			mix = append(mix, proxy.Partition())
		case "none", "":
		default:
			return nil, fmt.Errorf("unknown fault %q (kill, pause, partition, none)", f)
		}
	}
	if len(mix) == 0 {
		return nil, nil
	}
	return mix, nil
}

// printWindows prints each unavailability window; windows that overlap (no enqueue and no
// delivery at once) are explained together, once, when they last -explain or longer.
func printWindows(res chaos.Result, c *chaos.Cluster) {
	nodeOf := map[string]string{}
	for _, n := range c.Nodes {
		nodeOf[n.Addr] = fmt.Sprintf("node %d", n.ID)
	}
	name := func(addr string) string {
		if n, ok := nodeOf[addr]; ok {
			return n
		}
		return addr
	}
	ws := res.Report.Unavailable
	for i := 0; i < len(ws); {
		span := ws[i]
		j := i
		for ; j < len(ws) && ws[j].Start <= span.End; j++ {
			w := ws[j]
			fmt.Printf("unavailable: no %s from %v to %v (%v)\n", w.What, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond), (w.End - w.Start).Round(time.Millisecond))
			span.Start, span.End = min(span.Start, w.Start), max(span.End, w.End)
		}
		if *explain > 0 && span.End-span.Start >= *explain {
			for _, l := range chaos.Explain(res.History, span, name, 4) {
				fmt.Println(l)
			}
		}
		i = j
	}
}

// printQueueWindows prints, for each queue, how many windows it had with no enqueue and the
// longest.
func printQueueWindows(history []chaos.Op) {
	qw := chaos.QueueWindows(history)
	queueNames := make([]string, 0, len(qw))
	for q := range qw {
		queueNames = append(queueNames, q)
	}
	sort.Strings(queueNames)
	for _, q := range queueNames {
		var longest chaos.Window
		for _, w := range qw[q] {
			if w.End-w.Start > longest.End-longest.Start {
				longest = w
			}
		}
		fmt.Printf("queue %s: %d windows with no enqueue", q, len(qw[q]))
		if len(qw[q]) > 0 {
			fmt.Printf(", longest %v from %v", (longest.End - longest.Start).Round(time.Millisecond), longest.Start.Round(time.Millisecond))
		}
		fmt.Println()
	}
}

var addrRE = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+):\d+`)

// printErrors prints the commonest errors of the operations that failed or went unanswered.
func printErrors(h []chaos.Op, kinds int) {
	counts := map[string]int{}
	for _, op := range h {
		if op.Err != "" && op.Kind != chaos.Fault {
			counts[op.Kind.String()+" "+op.Outcome.String()+": "+addrRE.ReplaceAllString(op.Err, "$1:*")]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return counts[keys[i]] > counts[keys[j]] || counts[keys[i]] == counts[keys[j]] && keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == kinds {
			fmt.Printf("errors: ... and %d more kinds\n", len(keys)-i)
			break
		}
		fmt.Printf("errors: %d × %s\n", counts[k], k)
	}
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	return 2
}
