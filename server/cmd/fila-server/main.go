// Command fila-server runs the Fila broker. With no arguments it serves FIBP on 127.0.0.1:5555
// with data under ./data and metrics on 127.0.0.1:9555; see --help for every setting.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/internal/buildinfo"
	"github.com/filamq/fila/server/transport"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := config.Load(args, os.Getenv, os.Stderr)
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

func serve(cfg config.Config, log *slog.Logger) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(),
		diskUsageGauge(cfg.DataDir))
	ready := &readiness{}
	httpSrv, err := startHTTP(cfg, reg, ready)
	if err != nil {
		return err
	}
	if httpSrv != nil {
		defer httpSrv.Close()
	}

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	bo := broker.DefaultOptions(cfg.DataDir)
	bo.Sync = cfg.Fsync
	bo.InboxSize = cfg.QueueInbox
	bo.BodyCacheBytes = int(cfg.BodyCacheBytes)
	bo.Logger = log
	bo.Registry = reg
	rn, err := openRift(cfg, log)
	if err != nil {
		return err
	}
	if rn != nil {
		bo.Events = rn.events
		reg.MustRegister(newRiftCollector(rn.svc))
	}
	b, err := broker.Open(bo)
	if err != nil {
		rn.close()
		return err
	}
	reg.MustRegister(broker.NewCollector(b, broker.CollectorOptions{TopKeys: cfg.MetricsTopKeys}))

	tlsConf, err := loadTLS(cfg)
	if err != nil {
		b.Close()
		return err
	}
	srv := transport.New(b, transport.Options{
		TLS: tlsConf, MaxFrameSize: int(cfg.MaxFrameSize), MaxReassembly: int(cfg.MaxReassembly),
		MaxConnections: cfg.MaxConnections, MaxInflight: cfg.MaxInflight, MaxSubscriptions: cfg.MaxSubscriptions,
		PingInterval: cfg.PingInterval, PongTimeout: cfg.PongTimeout, Logger: log, Registry: reg,
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		b.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	if rn != nil {
		if err := rn.listen(cfg, log); err != nil {
			srv.Shutdown(context.Background())
			rn.close()
			b.Close()
			return err
		}
	}
	ready.set(phaseServing)
	log.Info("fila-server ready", "fibp", ln.Addr().String(), "http", cfg.HTTPListen, "data", cfg.DataDir, "tls", tlsConf != nil, "fsync", cfg.Fsync)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case err := <-served:
		log.Error("listener failed", "err", err)
	}
	ready.set(phaseStopping)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("connections did not finish in time", "err", err)
	}
	if err := rn.close(); err != nil {
		log.Warn("rift did not close cleanly", "err", err)
	}
	if err := b.Close(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

func loadTLS(cfg config.Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("tls client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls client CA %s: no certificates found", cfg.TLSClientCA)
		}
		conf.ClientCAs, conf.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return conf, nil
}
