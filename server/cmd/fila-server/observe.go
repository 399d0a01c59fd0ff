package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/filamq/fila/server/config"
)

// phase is where the process is in its life, as /readyz reports it.
type phase int32

const (
	phaseRecovering phase = iota // opening the store and replaying the queues' logs
	phaseServing                 // every listener accepts; the node serves requests
	phaseStopping                // shutting down: answering what is in flight, accepting nothing new
)

func (p phase) String() string {
	switch p {
	case phaseRecovering:
		return "recovering"
	case phaseServing:
		return "ready"
	case phaseStopping:
		return "stopping"
	}
	return fmt.Sprintf("phase(%d)", int32(p))
}

// readiness holds the current phase for /readyz.
type readiness struct{ p atomic.Int32 }

func (r *readiness) set(p phase) { r.p.Store(int32(p)) }
func (r *readiness) get() phase  { return phase(r.p.Load()) }

// ServeHTTP answers 200 "ready" once recovery is done and the node serves, 503 with the phase
// before (recovering) and after (stopping): a load balancer or Kubernetes sends traffic only to
// a node that takes it.
func (r *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p := r.get()
	if p != phaseServing {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, p)
}

// route is one more path the HTTP listener serves (the API's).
type route struct {
	path string
	h    http.Handler
}

// startHTTP serves /metrics, /healthz, /readyz (and /debug/pprof/ with --pprof) and routes on
// cfg.HTTPListen; it returns nil when that is empty. It starts before the broker opens, so
// /readyz can tell that recovery is under way.
func startHTTP(cfg config.Config, reg *prometheus.Registry, ready *readiness, health *healthz, routes ...route) (*http.Server, error) {
	if cfg.HTTPListen == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{MaxRequestsInFlight: maxScrapes}))
	mux.Handle("/healthz", health)
	mux.Handle("/readyz", ready)
	for _, r := range routes {
		mux.Handle(r.path, r.h)
	}
	if cfg.PProf {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.Handle("/debug/pprof/profile", untimed(pprof.Profile))
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.Handle("/debug/pprof/trace", untimed(pprof.Trace))
	}
	ln, err := net.Listen("tcp", cfg.HTTPListen)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: markBusy(mux), // Addr: the bound address, for --addr-file
		ReadHeaderTimeout: httpTimeout, ReadTimeout: httpTimeout, WriteTimeout: httpTimeout, IdleTimeout: httpTimeout,
		ConnContext: withConn, ConnState: answered}
	go srv.Serve(newEvictingListener(ln, maxHTTPConnections))
	return srv, nil
}

// untimed lifts the read and write timeouts for a handler that runs as long as it is asked to
// (a profile or trace of ?seconds=N): ReadTimeout would cancel its request, WriteTimeout cut
// its answer. These are served only with --pprof.
func untimed(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		h(w, r)
	})
}

// diskUsageGauge is fila_storage_disk_bytes: the size of every file under the data directory
// (the Pebble store, its WAL and the Raft snapshots), measured at scrape time.
func diskUsageGauge(dir string) prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "fila", Name: "storage_disk_bytes",
		Help: "Bytes of all files under data_dir (store, write-ahead log, snapshots; the engine's unnamed scratch files are fila_engine_scratch_bytes).",
	}, func() float64 {
		var total int64
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if info, err := d.Info(); err == nil {
					total += info.Size()
				}
			}
			return nil
		})
		return float64(total)
	})
}

func newLogger(cfg config.Config) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationsAsText}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// durationsAsText writes durations as "1.5s", not as integer nanoseconds (slog's JSON default).
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// maxHTTPConnections bounds the connections the HTTP listener serves at once: it needs no key,
// so without a bound idle keep-alive connections could take every file the process may open. At
// the bound a new connection closes the oldest one outside a handler (httplimit.go).
const maxHTTPConnections = 64

// maxScrapes bounds the /metrics requests answered at once (more are answered 503 at once): a
// scrape walks every queue and the data directory, and one whose client does not read its answer
// holds its connection inside the handler, where it cannot be closed for room (httplimit.go).
const maxScrapes = 4

// httpTimeout bounds the time to read a request (headers and body), to write its answer, and a
// keep-alive connection's idle time, so that slow or idle clients give their connection back.
// The --pprof profile and trace lift the first two (untimed).
const httpTimeout = 10 * time.Second
