package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/filamq/fila/tools/internal/fibpconn"
	"github.com/filamq/fila/tools/internal/loopback"
)

// natsMode is how a nats-server is configured for a workload.
type natsMode int

const (
	jsDefault    natsMode = iota // JetStream with its default sync_interval (no fsync before the ack)
	jsSyncAlways                 // JetStream with sync_interval: always (fsync before the ack)
	coreTLS                      // NATS core only, clients over TLS
)

func (m natsMode) String() string {
	return [...]string{"JetStream default", "JetStream sync_interval: always", "NATS core over TLS"}[m]
}

// peer is one running broker with a fresh data directory.
type peer struct {
	proc     *proc
	addr     string // fila: host:port; nats: a nats:// or tls:// URL
	riftAddr string // fila with Rift: the QUIC listener's host:port
	pprofURL string // http://host:port, or empty
	dir      string
	cluster  *cluster // the cluster workloads' three nodes (proc and addr are the first's); nil for one
}

// stop ends the broker, removes its data and flushes the page cache's dirty pages, so that the
// next broker's fsyncs do not pay for this one's writes.
func (p *peer) stop() {
	if p.cluster != nil {
		p.cluster.stop()
	} else {
		p.proc.stop()
	}
	os.RemoveAll(p.dir)
	syscall.Sync()
}

// peerDir makes a fresh directory for one broker run.
func (e *env) peerDir(name string) (string, error) {
	e.peers++
	dir := filepath.Join(e.tmp, fmt.Sprintf("%02d-%s", e.peers, name))
	return dir, os.MkdirAll(dir, 0o755)
}

// startFila starts fila-server with its defaults (fsync on) and flags on a free loopback port,
// with its Rift listener (the tool's certificate, one identity) when withRift is set.
func (e *env) startFila(ctx context.Context, withRift bool, flags ...string) (*peer, error) {
	dir, err := e.peerDir("fila")
	if err != nil {
		return nil, err
	}
	addr, err := loopback.FreeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"--data-dir", filepath.Join(dir, "data"), "--listen", addr, "--log-level", "warn"}, flags...)
	p := &peer{addr: addr, dir: dir}
	if e.o.profile {
		httpAddr, err := loopback.FreeAddr()
		if err != nil {
			return nil, err
		}
		args = append(args, "--pprof", "--http-listen", httpAddr)
		p.pprofURL = "http://" + httpAddr
	} else {
		args = append(args, "--http-listen", "")
	}
	if withRift {
		if args, err = e.riftArgs(p, args); err != nil {
			return nil, err
		}
	}
	if p.proc, err = startProc("fila-server", filepath.Join(dir, "fila-server.log"), e.filaBin, args...); err != nil {
		return nil, err
	}
	err = waitReady(ctx, p.proc, 30*time.Second, func() error {
		c, err := fibpconn.Dial(addr)
		if err != nil {
			return err
		}
		c.Close()
		if !withRift {
			return nil
		}
		rc, err := e.riftConnect(ctx, p)
		if err == nil {
			rc.Close()
		}
		return err
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// riftArgs adds the Rift listener's settings to fila-server's arguments.
func (e *env) riftArgs(p *peer, args []string) ([]string, error) {
	var err error
	if p.riftAddr, err = freeUDPAddr(); err != nil {
		return nil, err
	}
	conf := filepath.Join(p.dir, "fila.yaml")
	if err := os.WriteFile(conf, []byte(riftConfig), 0o644); err != nil {
		return nil, err
	}
	return append(args, "--config", conf, "--rift-listen", p.riftAddr,
		"--rift-cert", e.certs.certFile, "--rift-key", e.certs.keyFile), nil
}

// natsConfig renders a nats-server configuration file for mode.
func (e *env) natsConfig(mode natsMode, port, profPort int, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: \"127.0.0.1:%d\"\nserver_name: \"bench\"\n", port)
	if profPort > 0 {
		fmt.Fprintf(&b, "prof_port: %d\n", profPort)
	}
	switch mode {
	case jsDefault:
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n}\n", filepath.Join(dir, "js"))
	case jsSyncAlways:
		fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", filepath.Join(dir, "js"))
	case coreTLS:
		fmt.Fprintf(&b, "tls {\n  cert_file: %q\n  key_file: %q\n}\n", e.certs.certFile, e.certs.keyFile)
	}
	return b.String()
}

// startNATS starts nats-server configured for mode on a free loopback port.
func (e *env) startNATS(ctx context.Context, mode natsMode) (*peer, error) {
	dir, err := e.peerDir("nats")
	if err != nil {
		return nil, err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	profPort := 0
	if e.o.profile {
		if profPort, err = loopback.FreePort(); err != nil {
			return nil, err
		}
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(e.natsConfig(mode, port, profPort, dir)), 0o644); err != nil {
		return nil, err
	}
	p := &peer{addr: fmt.Sprintf("nats://127.0.0.1:%d", port), dir: dir}
	if mode == coreTLS {
		p.addr = fmt.Sprintf("tls://127.0.0.1:%d", port)
	}
	if profPort > 0 {
		p.pprofURL = fmt.Sprintf("http://127.0.0.1:%d", profPort)
	}
	if p.proc, err = startProc("nats-server", filepath.Join(dir, "nats-server.log"), e.natsBin, "-c", conf); err != nil {
		return nil, err
	}
	err = waitReady(ctx, p.proc, 30*time.Second, func() error {
		nc, err := e.natsConnect(p)
		if err != nil {
			return err
		}
		defer nc.Close()
		if mode == coreTLS {
			return nil
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		_, err = js.AccountInfo(ctx)
		return err
	})
	if err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// natsConnect opens a client connection to a nats peer, over TLS when its URL says so.
func (e *env) natsConnect(p *peer) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name("fila-bench"), nats.MaxReconnects(0), nats.Timeout(5 * time.Second)}
	if strings.HasPrefix(p.addr, "tls://") {
		opts = append(opts, nats.Secure(e.certs.client.Clone()))
	}
	return nats.Connect(p.addr, opts...)
}
