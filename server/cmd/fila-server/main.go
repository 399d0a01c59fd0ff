// Command fila-server runs the Fila broker. With no arguments it serves FIBP on 127.0.0.1:5555
// with data under ./data and metrics on 127.0.0.1:9555; see --help for every setting.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/certs"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/internal/buildinfo"
	"github.com/filamq/fila/server/internal/gcfloor"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/nodelink"
	"github.com/filamq/fila/server/offheap"
	"github.com/filamq/fila/server/storage"
	"github.com/filamq/fila/server/transport"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "dev-certs" {
		return devCerts(args[1:])
	}
	if len(args) > 0 && args[0] == "check" {
		return check(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "restore" {
		return restore(args[1:], os.Stdout, os.Stderr)
	}
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(args[1:], os.Stdout, os.Stderr)
	}
	cfg, err := config.Load(args, os.LookupEnv, os.Stderr)
	if errors.Is(err, config.ErrHelp) {
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Println(buildinfo.Read().String("fila-server"))
		return 0
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fila-server:", err)
		return 2
	}
	log := newLogger(cfg)
	if err := serve(cfg, log); err != nil {
		if bad := (*badInputError)(nil); errors.As(err, &bad) {
			fmt.Fprintln(os.Stderr, "fila-server:", bad)
			return 2
		}
		log.Error("fila-server stopped", "err", err)
		return 1
	}
	return 0
}

// buildInfoGauge is fila_build_info{version,commit,go_version} 1.
func buildInfoGauge() prometheus.Gauge {
	bi := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "fila_build_info",
		Help:        "Always 1; the labels say which build is running (commit has -dirty for a modified tree).",
		ConstLabels: prometheus.Labels{"version": bi.Version, "commit": bi.CommitLabel(), "go_version": bi.GoVersion},
	})
	g.Set(1)
	return g
}

// gcHeapFloor is the heap goal below which the garbage collector is not asked to run (unless
// GOGC is set): a lightly loaded broker then collects every few thousand messages instead of every
// few hundred, which is what a light-load round trip's tail is made of (server/internal/gcfloor).
const gcHeapFloor = 64 << 20

func serve(cfg config.Config, log *slog.Logger) error {
	defer gcfloor.Start(gcHeapFloor)()
	// Before anything touches the directory (the HTTP listener, the scratch files, Rift's store):
	// a second server on it says so and leaves the first alone.
	if err := storage.CheckNotInUse(cfg.DataDir); err != nil {
		return err
	}
	id, err := claimDataDir(cfg)
	if err != nil {
		return err
	}
	// The queues' memory outside the Go heap: its scratch files and sweeps start with the
	// broker's options below, and end after the broker (startScratch's stop).
	alloc := offheap.New(offheap.Options{Logger: log})
	reg := processRegistry(cfg.DataDir, alloc)
	ready, health, bk := &readiness{}, &healthz{}, newBackups(cfg, log)
	api := newAdminAPI()
	httpSrv, err := startHTTP(cfg, reg, ready, health, append(consoleRoutes(), route{backupPath, bk}, route{apiPath, api})...)
	if err != nil {
		return err
	}
	if httpSrv != nil {
		defer httpSrv.Close()
	}

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	bo, err := brokerOptions(cfg, log, reg)
	if err != nil {
		return err
	}
	link, err := openLink(cfg, id, &bo, log)
	if err != nil {
		return err
	}
	if link != nil {
		defer link.Close() // after the broker: serve's stop closes it first
	}
	defer startScratch(alloc, cfg.DataDir, bo.Storage.ReserveSize(), cfg.ShutdownTimeout, log)()
	bo.Allocator = alloc
	budget := memoryBudget(cfg, log)
	bo.MemoryBudget = budget // the queues' deduplication identities are counted in it too
	limitGoHeap(log)
	b, rn, err := openServices(cfg, bo, reg, log)
	if err != nil {
		return err
	}
	health.b.Store(b)
	if link != nil {
		link.SetHandler(b)
		link.SetTokenServer(b)
		reg.MustRegister(link.Collector())        // the lag of the replicas of the groups this node leads, snapshots sent
		reg.MustRegister(link.TrafficCollector()) // bytes and frames over the inter-node link
	}
	reg.MustRegister(broker.NewCollector(b, broker.CollectorOptions{TopKeys: cfg.MetricsTopKeys, MaxQueues: cfg.MetricsMaxQueues}))

	tlsCerts, err := loadTLS(cfg)
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", cfg.Listen)
	}
	if err != nil {
		rn.close()
		b.Close()
		return err
	}
	topts := transportOptions(cfg, tlsCerts, log, reg, budget)
	if link != nil {
		topts.Admin = linkAdmin{link} // cluster.go
	}
	srv := transport.New(b, topts)
	if link != nil {
		link.SetAdminServer(srv.ServeAdmin)
		api.setLink(link, cfg.NodeID, log) // adminapi_forward.go
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	abort := func(err error) error { // before serving: stop what started, in order
		srv.Shutdown(context.Background())
		rn.close()
		b.Close()
		return err
	}
	if rn != nil {
		if err := rn.listen(cfg, log, budget); err != nil {
			return abort(err)
		}
	}
	// Both stay registered until serve returns: a signal while stopping is not fatal. Registered
	// before the addr file says the server is ready, so that a SIGTERM sent at once is a stop, not
	// the default action (the process killed).
	sig, hup := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if cfg.AddrFile != "" {
		if err := writeAddrFile(cfg.AddrFile, bound(ln, rn, httpSrv, link)); err != nil {
			return abort(fmt.Errorf("addr_file: %w", err))
		}
	}
	bk.b.Store(b)
	api.b.Store(b)
	if rn != nil {
		bk.streams.Store(rn.svc.Streams)
	}
	ready.set(phaseServing)
	logReady(log, cfg, ln, tlsCerts != nil, b)

	go stopWhenRemoved(b.Removed(), sig, log) // membership.go
	if err := awaitStop(sig, hup, served, b.StorageStuck(), tlsCerts, rn, log); err != nil {
		return err // no shutdown: closing would wait for the requests blocked in the store
	}
	ready.set(phaseStopping)
	// A cluster node hands its leaderships on first, while its clients are still served: a
	// subscription here then ends NotLeader (the SDK follows it), and an enqueue is forwarded.
	b.HandOff(min(cfg.ShutdownTimeout, maxHandOff))
	bk.close() // a backup being written completes first: the stores close next
	return shutdown(cfg.ShutdownTimeout, srv, rn, b, log)
}

// maxHandOff bounds how long a stopping cluster node spends handing its leaderships on (within
// shutdown_timeout): a drain handed 503 on in 2.6 s here.
const maxHandOff = 10 * time.Second

// processRegistry is a registry holding the process's own metrics: the Go runtime, the process,
// the build, the data directory's disk and the engine's mapped memory.
func processRegistry(dataDir string, alloc *offheap.Allocator) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(),
		diskUsageGauge(dataDir), newMappedCollector(alloc))
	return reg
}

// shutdown closes the listeners, giving open connections up to timeout to finish, then the
// stores (closeStores). A connection closed at the timeout ends at once unless its reader waits
// inside the broker on a store that does not answer (a Consume waking a hibernated queue): the
// connections get one more timeout to end, then the stores are closed without them.
func shutdown(timeout time.Duration, srv *transport.Server, rn *riftNode, b *broker.Broker, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- srv.Shutdown(ctx) }()
	select {
	case err := <-ended:
		if err != nil {
			log.Warn("connections did not finish in time", "err", err)
		}
	case <-ctx.Done(): // srv.Shutdown is closing them now
		select {
		case err := <-ended:
			log.Warn("connections did not finish in time", "err", err)
		case <-time.After(timeout):
			log.Warn("connections did not end once closed (a request waits on a store that does not answer): closing the stores without them")
		}
	}
	if err := closeStores(rn, b, timeout, log); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// closeStores closes Rift (its listener, plugins and streams) and then the broker, giving them
// up to timeout together: a store that is stuck, or a disk that no longer answers, must not keep
// the process from exiting. Exiting without the close is a crash the next start recovers from:
// every acknowledged write is in a store's WAL.
func closeStores(rn *riftNode, b *broker.Broker, timeout time.Duration, log *slog.Logger) error {
	closed := make(chan error, 1)
	go func() {
		if err := rn.close(); err != nil {
			log.Warn("rift did not close cleanly", "err", err)
		}
		closed <- b.Close()
	}()
	select {
	case err := <-closed:
		if errors.Is(err, broker.ErrStorageStuck) {
			return errStorageStuck
		}
		return err
	case <-time.After(timeout):
		return fmt.Errorf("the stores did not close within shutdown_timeout (%v): exiting without closing them "+
			"(acknowledged messages are in their WALs and replayed at the start)", timeout)
	}
}

// openServices opens Rift's node (when configured) and the broker, and checks that the data
// directory may be served with the authentication configured (requireAuth). On an error nothing
// it opened stays open.
func openServices(cfg config.Config, bo broker.Options, reg *prometheus.Registry, log *slog.Logger) (*broker.Broker, *riftNode, error) {
	rn, err := openRift(cfg, log)
	if err != nil {
		return nil, nil, err
	}
	if rn != nil {
		bo.Events = rn.events
		reg.MustRegister(newRiftCollector(rn.svc))
	}
	b, err := broker.Open(bo)
	if err != nil {
		rn.close()
		return nil, nil, err
	}
	if err := requireAuth(cfg, b, log); err != nil {
		rn.close()
		b.Close()
		return nil, nil, err
	}
	return b, rn, nil
}

// brokerOptions is the broker's part of the configuration.
func brokerOptions(cfg config.Config, log *slog.Logger, reg *prometheus.Registry) (broker.Options, error) {
	bo := broker.DefaultOptions(cfg.DataDir)
	bo.Sync = cfg.Fsync
	bo.Storage.Salvage = cfg.Salvage
	bo.InboxSize = cfg.QueueInbox
	bo.MaxQueues = cfg.MaxQueues
	bo.IdleTimeout = cfg.QueueIdleTimeout
	bo.BodyCacheBytes = int(cfg.BodyCacheBytes)
	bo.Logger = log
	bo.Registry = reg
	bootstrap, err := cfg.BootstrapKey()
	if err != nil {
		return broker.Options{}, err
	}
	bo.BootstrapAPIKey = bootstrap
	return bo, nil
}

// transportOptions is the FIBP listener's part of the configuration.
func transportOptions(cfg config.Config, tlsCerts *certs.Reloader, log *slog.Logger, reg *prometheus.Registry,
	budget *membudget.Budget) transport.Options {
	var tlsConf *tls.Config
	if tlsCerts != nil {
		tlsConf = tlsCerts.Config()
	}
	return transport.Options{
		TLS: tlsConf, MaxFrameSize: int(cfg.MaxFrameSize), MaxReassembly: int(cfg.MaxReassembly),
		MaxConnections: cfg.MaxConnections, MaxPerClient: cfg.MaxPerClient, HandshakeTimeout: cfg.HandshakeTimeout,
		MaxInflight: cfg.MaxInflight, MaxSubscriptions: cfg.MaxSubscriptions,
		PingInterval: cfg.PingInterval, PongTimeout: cfg.PongTimeout, Logger: log, Registry: reg,
		Budget: budget, NoMemoryAccounting: !cfg.MemoryAccounting, MaxConnectionMemory: int64(cfg.MaxConnectionMemory),
		ReassemblyTimeout: cfg.ReassemblyTimeout, NodeID: cfg.NodeID,
		Advertise: cfg.Advertise,
	}
}

// logReady reports the server ready.
func logReady(log *slog.Logger, cfg config.Config, ln net.Listener, tls bool, b *broker.Broker) {
	log.Info("fila-server ready", "fibp", ln.Addr().String(), "http", cfg.HTTPListen, "data", cfg.DataDir, "tls", tls,
		"fsync", cfg.Fsync, "auth", b.Auth().Enabled())
}

// requireAuth fails closed: a data directory that holds API keys was meant to be served with
// authentication, so without a bootstrap key it is not served at all, unless insecure_no_auth
// says so; then the start is logged as an error, so that it is seen.
func requireAuth(cfg config.Config, b *broker.Broker, log *slog.Logger) error {
	st := b.Auth()
	n := st.Len()
	switch {
	case st.Enabled() || n == 0:
		return nil
	case cfg.InsecureNoAuth:
		log.Error("AUTHENTICATION IS OFF on a data directory that holds API keys (--insecure-no-auth): "+
			"every client may read and change every queue and create keys that stay valid once authentication is back",
			"stored_keys", n)
		return nil
	}
	return fmt.Errorf("the data directory holds %d API keys but no bootstrap key is configured, so authentication would be off: "+
		"give the bootstrap key in FILA_BOOTSTRAP_API_KEY or in a file named by --bootstrap-api-key-file (bootstrap_api_key_file), "+
		"or start with --insecure-no-auth to run without authentication", n)
}

// bound lists the addresses the listeners are bound to, for the addr_file.
func bound(ln net.Listener, rn *riftNode, httpSrv *http.Server, link *nodelink.Link) boundAddrs {
	addrs := boundAddrs{FIBP: ln.Addr().String()}
	if link != nil {
		addrs.Cluster = link.Addr()
	}
	if rn != nil {
		addrs.Rift = rn.ln.Addr().String()
	}
	if httpSrv != nil {
		addrs.HTTP = httpSrv.Addr
	}
	return addrs
}

// errStorageStuck stops the server when its store is stuck (broker.StorageStuck).
var errStorageStuck = errors.New("the store is stuck after a failed write inside Pebble and cannot recover in this process: " +
	"exiting so that the server is restarted (acknowledged messages are in the WAL and replayed at the start)")

// awaitStop returns once a stop signal arrives (sig) or the FIBP listener fails (served); a
// SIGHUP (hup) loads the listeners' certificates again. It returns errStorageStuck, at once,
// when the store is stuck (stuck): the server then exits without its shutdown.
func awaitStop(sig, hup <-chan os.Signal, served <-chan error, stuck <-chan struct{}, tlsCerts *certs.Reloader,
	rn *riftNode, log *slog.Logger) error {
	for {
		select {
		case <-hup:
			reloadTLS("fibp", tlsCerts, log)
			if rn != nil && rn.certs != nil {
				reloadTLS("rift", rn.certs, log)
			}
		case s := <-sig:
			log.Info("shutting down", "signal", s.String())
			return nil
		case err := <-served:
			log.Error("listener failed", "err", err)
			return nil
		case <-stuck:
			return errStorageStuck
		}
	}
}

// loadTLS loads the FIBP listener's certificates; nil when TLS is not configured.
func loadTLS(cfg config.Config) (*certs.Reloader, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	return certs.Load(certs.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, ClientCA: cfg.TLSClientCA})
}

// reloadTLS loads a listener's certificate files again (SIGHUP); open connections keep their
// sessions.
func reloadTLS(listener string, r *certs.Reloader, log *slog.Logger) {
	if r == nil {
		log.Info("SIGHUP: no TLS certificates to reload", "listener", listener)
		return
	}
	if err := r.Reload(); err != nil {
		log.Error("SIGHUP: certificates not reloaded; the previous ones stay in use", "listener", listener, "err", err)
		return
	}
	log.Info("SIGHUP: certificates reloaded", "listener", listener)
}

// devCerts is `fila-server dev-certs DIR`.
func devCerts(args []string) int {
	if len(args) != 1 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintln(os.Stderr, "usage: fila-server dev-certs DIR")
		fmt.Fprintln(os.Stderr, "  writes a local CA, a server certificate for localhost/127.0.0.1/::1 and a client certificate (development only)")
		return 2
	}
	paths, err := certs.WriteDev(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "fila-server dev-certs:", err)
		return 1
	}
	for _, p := range paths {
		fmt.Println(p)
	}
	d := args[0]
	fmt.Printf("\nserver: fila-server --tls-cert %s --tls-key %s --tls-client-ca %s\n",
		filepath.Join(d, certs.DevServerCert), filepath.Join(d, certs.DevServerKey), filepath.Join(d, certs.DevCA))
	fmt.Printf("client: fila --ca %s --cert %s --key %s queue list\n",
		filepath.Join(d, certs.DevCA), filepath.Join(d, certs.DevClientCert), filepath.Join(d, certs.DevClientKey))
	return 0
}

// memoryBudget is the server-wide budget of client-held memory, nil when accounting is off.
func memoryBudget(cfg config.Config, log *slog.Logger) *membudget.Budget {
	if !cfg.MemoryAccounting {
		log.Warn("memory accounting is off: clients can make the server hold unbounded memory")
		return nil
	}
	limit, from := int64(cfg.MemoryBudget), "memory_budget"
	if limit == 0 {
		def := membudget.Default()
		limit, from = def.Bytes, "half of "+def.Source
	}
	log.Info("client memory budget", "bytes", limit, "from", from, "per_connection", int64(cfg.MaxConnectionMemory))
	return membudget.New(limit)
}

// goLimitShare is the part of a cgroup's memory limit given to the Go runtime as its soft limit
// when GOMEMLIMIT is not set; the rest is for memory outside it (the engine's mapped memory,
// the kernel's per-process share).
const goLimitShare = 0.9

// limitGoHeap gives the Go runtime a soft memory limit of goLimitShare of the process's cgroup
// limit, unless GOMEMLIMIT is set: without one the garbage collector lets the heap reach twice
// what is live, so a heap whose live part fits the cgroup (clients held to memory_budget, half of
// it) could still be OOM-killed by the garbage beside it.
func limitGoHeap(log *slog.Logger) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return
	}
	m := membudget.ProcessMemory(os.DirFS("/"), math.MaxInt64)
	if !m.Cgroup() {
		return
	}
	limit := int64(float64(m.Bytes) * goLimitShare)
	debug.SetMemoryLimit(limit)
	log.Info("Go memory limit", "bytes", limit, "from", fmt.Sprintf("%.0f%% of %s", goLimitShare*100, m.Source))
}
