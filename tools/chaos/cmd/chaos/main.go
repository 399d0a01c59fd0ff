// Command chaos is the long run of the history checker (make chaos): it builds fila-server,
// starts nodes on loopback, drives the workload through the Go SDK while a nemesis kills -9 and
// restarts, or pauses, nodes, drains the queue, checks the history and prints its figures:
// operations, faults, lost, duplicated, unavailability windows. It exits 1 when the history
// breaks a promise, 2 when the run could not be carried out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/chaos"
	"github.com/filamq/fila/tools/internal/repo"
)

func main() {
	duration := flag.Duration("duration", 2*time.Minute, "how long the workload runs")
	nodes := flag.Int("nodes", 1, "fila-server processes: 1 a single node; 3 or 5 the founding members of a cluster on loopback")
	queues := flag.Int("queues", 1, "queues (each consumer takes one; producers send to each in turn)")
	faults := flag.String("faults", "kill", "the nemesis: a comma-separated mix of kill (kill -9, then restart) and pause (SIGSTOP, then SIGCONT); none for no faults")
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
	if nodes > 1 {
		founding, err := chaos.FoundingFlags(nodes)
		if err != nil {
			return fail(err)
		}
		nodeArgs = func(id int) []string { return append(founding(id), args...) }
	}
	c, err := chaos.StartCluster(bin, dir, nodes, nodeArgs)
	if err != nil {
		return fail(err)
	}
	defer c.Stop()
	var mix chaos.Mix
	for _, f := range strings.Split(faults, ",") {
		switch strings.TrimSpace(f) {
		case "kill":
			mix = append(mix, chaos.KillRestart{Cluster: c})
		case "pause":
			mix = append(mix, chaos.Pause{Cluster: c})
		case "none", "":
		default:
			return fail(fmt.Errorf("unknown fault %q (kill, pause, none)", f))
		}
	}
	var nemesis chaos.Nemesis
	if len(mix) > 0 {
		nemesis = mix
	}
	fmt.Printf("chaos: %d node(s) %v, %d queue(s), %v of load (%d producers at %d messages/s in all, %d consumers, batch %d), faults %s every ≤%v for ≤%v, seed %d\n",
		nodes, c.Addrs(), queues, duration, producers, rate, consumers, batch, faults, every, hold, seed)
	start := time.Now()
	res, err := chaos.Run(ctx, chaos.Config{Cluster: c, Nemesis: nemesis, Duration: duration, FaultEvery: every,
		FaultHold: hold, Seed: seed, Workload: chaos.Workload{Queues: queues, Producers: producers, Consumers: consumers, Batch: batch, Rate: rate}})
	r := res.Report
	for _, op := range res.History {
		if op.Kind == chaos.Fault {
			fmt.Printf("fault: %s from %v to %v%s\n", op.Value, op.Invoke.Round(time.Millisecond), op.Complete.Round(time.Millisecond), errSuffix(op.Err))
		}
	}
	for _, w := range r.Unavailable {
		fmt.Printf("unavailable: no %s from %v to %v (%v)\n", w.What, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond), (w.End - w.Start).Round(time.Millisecond))
	}
	printErrors(res.History)
	for i, v := range r.Violations {
		if i == show {
			fmt.Printf("... and %d more violations\n", len(r.Violations)-show)
			break
		}
		fmt.Println("violation:", v)
	}
	fmt.Printf("chaos: %v in %v\n", r.Figures, time.Since(start).Round(time.Second))
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
	fmt.Println("chaos: ok: no acknowledged enqueue lost, no acked message delivered again, no phantom")
	return 0
}

var addrRE = regexp.MustCompile(`(\d+\.\d+\.\d+\.\d+):\d+`)

// printErrors prints the commonest errors of the operations that failed or went unanswered.
func printErrors(h []chaos.Op) {
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
		if i == 8 {
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
