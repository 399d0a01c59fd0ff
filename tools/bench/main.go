// Command bench measures a real fila-server on loopback and prints one summary line per figure:
//
//	BENCH name=lifecycle_1kb_4c value=123456 unit=msg/s
//
// It builds and starts the server itself (with a temporary data directory) unless -addr names a
// running one. Run it with `make bench` or `go run ./tools/bench [-quick]` from the repository root.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type options struct {
	addr     string
	duration time.Duration
	backlog  int
	only     string
	fsync    bool
	queues   int

	restartKeys int // the restart_keys figure's messages, each under a fairness key of its own

	backlogSizes   string // the backlog figure's sizes, ascending
	backlogPayload int
	backlogKeys    int
	heapProfile    string        // directory for the server's heap profiles ("" = none)
	serverBin      string        // a fila-server binary to run instead of building one
	pprof          string        // an address to serve the server's /debug/pprof/ on ("" = a free one when needed)
	settle         time.Duration // idle wait before the backlog figure's second RSS reading
}

func main() {
	var o options
	quick := flag.Bool("quick", false, "a few seconds in all: proves the tool works, figures are rough")
	flag.StringVar(&o.addr, "addr", "", "benchmark a running server instead of starting one")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measuring time per throughput workload")
	flag.IntVar(&o.backlog, "backlog", 1_000_000, "messages in the backlog for the memory figure")
	flag.StringVar(&o.only, "only", "", "comma-separated workload names to run (default: all)")
	flag.BoolVar(&o.fsync, "fsync", true, "run the server with fsync on (its default)")
	flag.IntVar(&o.queues, "queues", 10_000, "idle queues for the queues figure")
	flag.IntVar(&o.restartKeys, "restart-keys", 1_000_000, "messages, each under a fairness key of its own, for the restart_keys figure")
	flag.StringVar(&o.backlogSizes, "backlog-sizes", "1000000", "comma-separated, ascending backlog sizes for the backlog figure")
	flag.IntVar(&o.backlogPayload, "backlog-payload", 1024, "payload bytes of the backlog figure's messages")
	flag.IntVar(&o.backlogKeys, "backlog-keys", 0, "fairness keys of the backlog figure's messages (0 = none given)")
	flag.StringVar(&o.heapProfile, "heap-profile", "", "save the server's heap profiles (backlog figure) in this directory")
	flag.DurationVar(&o.settle, "backlog-settle", 30*time.Second, "idle wait before the backlog figure's second RSS reading")
	flag.StringVar(&o.serverBin, "fila-server", "", "run this fila-server binary instead of building one from the working tree")
	flag.StringVar(&o.pprof, "pprof", "", "serve the server's /debug/pprof/ on this address (to profile a workload)")
	plotOut := flag.String("plot-backlog", "", "write an SVG of the BACKLOG lines of saved runs, given as label=file arguments, and exit")
	flag.Parse()
	if *plotOut != "" {
		if err := plotBacklog(*plotOut, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *quick {
		o.duration, o.backlog, o.queues, o.backlogSizes, o.settle = 500*time.Millisecond, 20_000, 200, "20000", time.Second
		o.restartKeys = 20_000
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	srv := &server{addr: o.addr}
	if o.addr == "" {
		var err error
		if srv, err = startServer(o.serverBin, o.fsync, o.heapProfile != "" || o.pprof != "", o.pprof); err != nil {
			return err
		}
		defer srv.stop()
	}
	time.Sleep(300 * time.Millisecond) // let the server settle before reading its idle RSS
	r := &runner{o: o, srv: srv, idleRSS: srv.rssBytes()}
	for _, w := range workloads {
		if o.only != "" && !strings.Contains(","+o.only+",", ","+w.name+",") {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s: %s\n", w.name, w.doc)
		if err := w.run(r); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
	}
	return nil
}

// report prints one machine-readable figure.
func report(name string, value float64, unit string) {
	fmt.Printf("BENCH name=%s value=%.6g unit=%s\n", name, value, unit)
}
