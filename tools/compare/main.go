// Command compare runs the same workloads against fila-server and against NATS (JetStream for the
// queue workloads, NATS core over TLS for the Rift ones) on loopback, one broker at a time, and
// prints one line per figure:
//
//	COMPARE workload=publish_1kb_fsync fila=123456 nats=98765 ratio=1.250 unit=msg/s
//
// ratio is always fila/nats: for throughput (msg/s) a ratio ≥ 1 is a win, for latency (us) a
// ratio ≤ 1 is. A Markdown table, the same lines and a PNG bar chart go to the results folder.
//
// It installs nats-server at a pinned version with `go install` into a cache directory, builds
// fila-server from the repository (found by walking up to go.work), gives every broker run a
// fresh temporary data directory, and stops every process it started, also on Ctrl-C.
// Run it from the repository with `make bench-compare` or `make bench-compare-quick`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/filamq/fila/tools/internal/repo"
)

// natsServerVersion is the NATS server the figures are compared with.
const natsServerVersion = "v2.15.2"

type options struct {
	quick          bool
	duration       time.Duration // measuring time per throughput figure and broker
	warmup         time.Duration // load before measuring starts
	latencySamples int           // exchanges timed per latency workload and broker
	latencyWarmup  int           // exchanges before timing starts
	prefill        int64         // messages in the queue before a lifecycle workload starts
	only           string
	out            string
	cache          string
	filaServer     string
	profile        bool
	repeat         int    // runs of each workload; figures are their medians
	failoverTrials int    // leader kills per broker in cluster_failover
	side           string // "fila" or "nats" measures that broker alone (the other's figures n/a)
	filaArgs       string // further flags for every fila-server, space-separated
}

// env is what the workloads share during one run.
type env struct {
	o          options
	tmp        string // holds the brokers' data directories and the certificates
	certs      *certs
	filaBin    string
	natsBin    string
	riftReason string // why the Rift workloads cannot run on Fila's side; empty when they can
	loadStart  string // the load average when the workloads started

	peers              int      // broker runs so far, to name their directories
	profName, pprofURL string   // the workload and broker being measured, for profiles
	brokerPids         []int    // the broker processes being measured (a cluster's three)
	cpu                *cpuUse  // CPU per message of the last figure measured, when known
	cpuLines           []string // every side's CPU line (cpuUse.line), in the order measured
}

func parseFlags() options {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "a few seconds per workload: proves the tool works, figures are rough")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "measuring time per throughput figure and broker")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "load before measuring starts")
	flag.IntVar(&o.latencySamples, "latency-samples", 5000, "exchanges timed per latency workload and broker")
	flag.IntVar(&o.latencyWarmup, "latency-warmup", 200, "exchanges before timing starts")
	flag.Int64Var(&o.prefill, "prefill", 200_000, "messages in the queue before a lifecycle workload starts")
	flag.StringVar(&o.only, "only", "", "comma-separated workload name prefixes to run (default: all)")
	flag.StringVar(&o.out, "out", "", "results folder (default ./results/compare-<timestamp>)")
	flag.StringVar(&o.cache, "cache", "", "where nats-server is installed (default <user cache dir>/fila-bench)")
	flag.StringVar(&o.filaServer, "fila-server", "", "use this fila-server binary instead of building one")
	flag.BoolVar(&o.profile, "profile", false, "save each broker's CPU and allocation profiles under <out>/pprof")
	flag.StringVar(&o.filaArgs, "fila-args", "", "further flags for every fila-server, space-separated (e.g. --cluster-heartbeat-timeout=500ms)")
	flag.StringVar(&o.side, "side", "", "measure one broker only, fila or nats (the other's figures are n/a); default both")
	flag.IntVar(&o.failoverTrials, "failover-trials", 20, "leader kills per broker in cluster_failover")
	flag.IntVar(&o.repeat, "repeat", 1, "run each workload this many times (alternating brokers) and report medians with their range")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: compare [flags]\n\nworkloads:")
		for _, w := range workloads {
			fmt.Fprintf(os.Stderr, "  %-20s %s\n", w.name, w.doc)
		}
		fmt.Fprintln(os.Stderr, "\nflags:")
		flag.PrintDefaults()
	}
	flag.Parse()
	if o.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]func(){
			"duration": func() { o.duration = 1500 * time.Millisecond }, "warmup": func() { o.warmup = 300 * time.Millisecond },
			"latency-samples": func() { o.latencySamples = 200 }, "latency-warmup": func() { o.latencyWarmup = 20 },
			"prefill": func() { o.prefill = 10_000 }, "failover-trials": func() { o.failoverTrials = 3 },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	if o.side != "" && o.side != "fila" && o.side != "nats" {
		fmt.Fprintf(os.Stderr, "compare: -side %q: fila or nats (empty: both)\n", o.side)
		os.Exit(2)
	}
	if o.out == "" {
		o.out = filepath.Join("results", "compare-"+time.Now().Format("20060102-150405"))
	}
	return o
}

func main() {
	relayIfChild()
	o := parseFlags()
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	finished := make(chan struct{})
	go func() {
		select {
		case <-finished:
			return
		case <-ctx.Done():
		}
		stopSignals() // a second Ctrl-C kills the tool; Pdeathsig then takes the brokers down too
		fmt.Fprintln(os.Stderr, "\ninterrupted: stopping the brokers")
		time.Sleep(10 * time.Second) // the run unwinds and stops them itself; this is the backstop
		stopAll()
		os.Exit(130)
	}()
	err := run(ctx, o)
	close(finished)
	stopAll()
	if ctx.Err() != nil {
		os.Exit(130)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	e := &env{o: o}
	var err error
	if e.tmp, err = os.MkdirTemp("", "fila-compare-"); err != nil {
		return err
	}
	defer os.RemoveAll(e.tmp)
	if e.certs, err = makeCerts(e.tmp); err != nil {
		return err
	}
	if err := e.prepareBinaries(ctx); err != nil {
		return err
	}
	root, _ := repo.Root()
	if e.riftReason = riftUnavailable(e.filaBin); e.riftReason != "" {
		fmt.Fprintln(os.Stderr, "Rift workloads: Fila's side is n/a:", e.riftReason)
	}
	start := time.Now()
	e.loadStart = loadAverage()
	var figs []figure
	for _, w := range workloads {
		if !w.selected(o.only) {
			continue
		}
		var runs [][]figure
		for r := range max(o.repeat, 1) {
			if o.repeat > 1 {
				fmt.Fprintf(os.Stderr, "== %s (run %d of %d): %s\n", w.name, r+1, o.repeat, w.doc)
			} else {
				fmt.Fprintf(os.Stderr, "== %s: %s\n", w.name, w.doc)
			}
			got, err := w.run(ctx, e)
			if err != nil {
				return err
			}
			runs = append(runs, got)
		}
		got := medians(runs)
		for _, f := range got {
			fmt.Println(f.compareLine())
		}
		figs = append(figs, got...)
	}
	if len(figs) == 0 {
		return fmt.Errorf("-only %q selects no workload", o.only)
	}
	fmt.Fprintln(os.Stderr, "== floors: fsync, and bare QUIC and TLS round trips, below any broker")
	floors, err := e.measureFloors(ctx, e.o.latencySamples, min(e.o.duration, 3*time.Second))
	if err != nil {
		return err
	}
	for _, f := range floors {
		fmt.Println(f.line())
	}
	for _, l := range gapLines(figs, floors) {
		fmt.Println(l)
	}
	for _, l := range summaryLines(figs) {
		fmt.Println(l)
	}
	if err := writeResults(e, root, figs, floors, time.Since(start)); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "results written to", o.out)
	return nil
}

// prepareBinaries installs nats-server (once per cache) and builds fila-server (each run, unless
// -fila-server names one).
func (e *env) prepareBinaries(ctx context.Context) error {
	cache := e.o.cache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("no user cache directory (pass -cache): %w", err)
		}
		cache = filepath.Join(dir, "fila-bench")
	}
	fmt.Fprintf(os.Stderr, "nats-server %s in %s (installed with go install on first use)\n", natsServerVersion, cache)
	var err error
	if e.natsBin, err = installNATS(ctx, cache); err != nil {
		return err
	}
	if e.filaBin = e.o.filaServer; e.filaBin != "" {
		return nil
	}
	fmt.Fprintln(os.Stderr, "building fila-server from the repository")
	if e.filaBin, err = repo.BuildServer(ctx, e.tmp); err != nil {
		return fmt.Errorf("%w (or pass -fila-server)", err)
	}
	return nil
}
