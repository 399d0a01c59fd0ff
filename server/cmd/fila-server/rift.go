package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/filamq/fila/server/certs"
	"github.com/filamq/fila/server/config"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/devcert"
	"github.com/filamq/fila/server/rift/events"
	"github.com/filamq/fila/server/rift/listener"
	"github.com/filamq/fila/server/rift/plugin"
	"github.com/filamq/fila/server/rift/service"
	"github.com/filamq/fila/server/rift/stream"
)

// riftNode is the Rift side of the server: the service, its plugins and its QUIC listener.
type riftNode struct {
	svc     *service.Service
	plugins *plugin.Host
	ln      *listener.Server
	events  *events.Events
	certs   *certs.Reloader // the listener's certificate, reloaded on SIGHUP
}

// openRift opens the Rift service (streams under <data_dir>/rift) and loads its plugins. It
// returns nil when rift.listen is not set.
func openRift(cfg config.Config, log *slog.Logger) (*riftNode, error) {
	rc := cfg.Rift
	if !rc.Enabled() {
		return nil, nil
	}
	ids, err := riftIdentities(rc, log)
	if err != nil {
		return nil, err
	}
	streams, err := riftStreams(rc.Streams)
	if err != nil {
		return nil, err
	}
	svc, err := service.Open(service.Options{
		Identities: ids, Streams: streams, StreamDir: filepath.Join(cfg.DataDir, riftDirName), MaxStreams: rc.MaxDurableStreams,
		Bus: bus.Options{QueueMsgs: rc.QueueMsgs, QueueBytes: int(rc.QueueBytes)}, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	n := &riftNode{svc: svc, events: events.New(svc.Bus)}
	if rc.PluginsDir != "" {
		assign := map[string]string{}
		for _, p := range rc.Plugins {
			assign[p.Name] = p.Identity
		}
		n.plugins, err = plugin.Load(svc, plugin.Options{Dir: rc.PluginsDir, Identities: assign,
			DefaultIdentity: rc.PluginIdentity, TimeBudget: rc.PluginTimeBudget, Logger: log})
		if err != nil {
			svc.Close()
			return nil, err
		}
	}
	return n, nil
}

// listen starts the QUIC listener.
func (n *riftNode) listen(cfg config.Config, log *slog.Logger, budget *membudget.Budget) error {
	rc := cfg.Rift
	certFile, keyFile := rc.Cert, rc.Key
	if rc.DevCerts != "" && certFile == "" {
		ca, c, k, err := devcert.Ensure(rc.DevCerts)
		if err != nil {
			return fmt.Errorf("rift dev certificates: %w", err)
		}
		certFile, keyFile = c, k
		log.Warn("rift uses development certificates: clients must trust "+ca, "dir", rc.DevCerts)
	}
	reloader, err := certs.Load(certs.Files{Cert: certFile, Key: keyFile})
	if err != nil {
		return fmt.Errorf("rift %w", err)
	}
	n.certs = reloader
	n.ln, err = listener.Listen(n.svc, listener.Options{
		Addr: rc.Listen, TLS: &tls.Config{GetCertificate: reloader.GetCertificate},
		MaxConnections: rc.MaxConnections, MaxStreams: rc.MaxStreams, AuthTimeout: rc.AuthTimeout,
		FrameTimeout: rc.FrameTimeout, WriteTimeout: rc.WriteTimeout, KeepAlive: rc.KeepAlive, IdleTimeout: rc.IdleTimeout,
		SubQueueMsgs: rc.QueueMsgs, SubQueueBytes: int(rc.QueueBytes), Events: n.events, Logger: log,
		Budget: budget, MaxConnectionMemory: int64(cfg.MaxConnectionMemory),
	})
	if err != nil {
		return err
	}
	log.Info("rift ready", "quic", n.ln.Addr().String(), "identities", n.svc.Auth.Len(), "streams", len(n.svc.Streams.Names()))
	return nil
}

func (n *riftNode) close() error {
	if n == nil {
		return nil
	}
	var errs []error
	if n.ln != nil {
		errs = append(errs, n.ln.Close())
	}
	if n.plugins != nil {
		n.plugins.Close()
	}
	errs = append(errs, n.svc.Close())
	return errors.Join(errs...)
}

// riftIdentities converts the configured identities. In development mode without identities it
// makes one, "dev", allowed everything, and writes its token to <dev_certs>/dev-token.
func riftIdentities(rc config.Rift, log *slog.Logger) ([]auth.Config, error) {
	var out []auth.Config
	for _, id := range rc.Identities {
		out = append(out, auth.Config{Name: id.Name, Token: id.Token, TokenSHA256: id.TokenSHA256,
			Publish: id.Publish, Subscribe: id.Subscribe, Control: id.Control})
	}
	if len(out) > 0 || rc.DevCerts == "" {
		return out, nil
	}
	path := filepath.Join(rc.DevCerts, "dev-token")
	token, err := os.ReadFile(path)
	if err != nil {
		var r [32]byte
		rand.Read(r[:])
		token = []byte(hex.EncodeToString(r[:]))
		if err := os.MkdirAll(rc.DevCerts, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, token, 0o600); err != nil {
			return nil, err
		}
	}
	log.Warn("rift development identity \"dev\" may do everything; its token is in " + path)
	return []auth.Config{{Name: "dev", Token: string(token), Publish: []string{">"}, Subscribe: []string{">"}, Control: true}}, nil
}

func riftStreams(cfgs []config.RiftStream) ([]stream.Config, error) {
	var out []stream.Config
	for _, c := range cfgs {
		d, err := stream.ParseDurability(c.Durability)
		if err != nil {
			return nil, fmt.Errorf("rift stream %s: %w", c.Name, err)
		}
		out = append(out, stream.Config{Name: c.Name, Subjects: c.Subjects, Durability: d,
			MaxMsgs: c.MaxMsgs, MaxBytes: c.MaxBytes, MaxAge: time.Duration(c.MaxAge), MaxPayload: c.MaxPayload})
	}
	return out, nil
}
