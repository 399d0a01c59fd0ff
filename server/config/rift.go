package config

import (
	"errors"
	"fmt"
	"time"

	"github.com/filamq/fila/server/rift/stream"
)

// Rift configures the Rift messaging listener (QUIC). It is off unless Listen is set.
type Rift struct {
	Listen   string `yaml:"listen" help:"Rift QUIC (UDP) listen address; empty disables Rift"`
	Cert     string `yaml:"cert" help:"PEM certificate of the Rift listener (TLS 1.3)"`
	Key      string `yaml:"key" help:"PEM private key for rift cert"`
	DevCerts string `yaml:"dev_certs" help:"development only: directory where a local CA and server certificate are generated (once) and used; without identities, a dev identity's token is written there too"`

	MaxConnections    int           `yaml:"max_connections" help:"concurrent Rift connections; at this limit the oldest connection that has not sent AUTH yet gives its slot to the new one"`
	MaxStreams        int           `yaml:"max_streams" help:"concurrent operation streams per Rift connection"`
	AuthTimeout       time.Duration `yaml:"auth_timeout" help:"deadline for TLS plus AUTH, and for each stream's first frame"`
	FrameTimeout      time.Duration `yaml:"frame_timeout" help:"deadline for the rest of a partially received frame"`
	WriteTimeout      time.Duration `yaml:"write_timeout" help:"deadline for a blocked outgoing write"`
	KeepAlive         time.Duration `yaml:"keep_alive" help:"QUIC keepalive period"`
	IdleTimeout       time.Duration `yaml:"idle_timeout" help:"QUIC idle timeout"`
	QueueMsgs         int           `yaml:"subscriber_queue_msgs" help:"messages waiting per subscription before it is cut off as a slow consumer"`
	QueueBytes        Bytes         `yaml:"subscriber_queue_bytes" help:"payload bytes waiting per subscription before it is cut off as a slow consumer"`
	MaxDurableStreams int           `yaml:"max_durable_streams" help:"most durable streams (configured and created at run time); creating one more is refused"`

	PluginsDir       string        `yaml:"plugins_dir" help:"folder of Lua plugins (*.lua) loaded at start; empty = none"`
	PluginIdentity   string        `yaml:"plugin_identity" help:"identity whose permissions plugins without their own entry in rift.plugins use"`
	PluginTimeBudget time.Duration `yaml:"plugin_time_budget" help:"longest a plugin callback may run"`

	Identities []RiftIdentity `yaml:"identities"`
	Streams    []RiftStream   `yaml:"streams"`
	Plugins    []RiftPlugin   `yaml:"plugins"`
}

// RiftIdentity is one Rift principal. Give token or token_sha256 (hex), not both; tokens are kept
// hashed once loaded.
type RiftIdentity struct {
	Name        string   `yaml:"name"`
	Token       string   `yaml:"token"`
	TokenSHA256 string   `yaml:"token_sha256"`
	Publish     []string `yaml:"publish"`
	Subscribe   []string `yaml:"subscribe"`
	Control     bool     `yaml:"control"`
}

// RiftStream is one durable stream of the configuration. Streams can also be created and deleted
// at run time (`fila rift stream create`, docs/rift.md); those keep their definitions in the
// Rift store.
type RiftStream struct {
	Name       string        `yaml:"name"`
	Subjects   []string      `yaml:"subjects"`
	Durability string        `yaml:"durability"` // fsync (default) | os | memory
	MaxMsgs    int64         `yaml:"max_msgs"`   // 0 = unlimited
	MaxBytes   int64         `yaml:"max_bytes"`
	MaxAge     time.Duration `yaml:"max_age"`
	MaxPayload int           `yaml:"max_payload"` // 0 = 1 MiB
}

// RiftPlugin names the identity of one plugin file (<plugins_dir>/<name>.lua).
type RiftPlugin struct {
	Name     string `yaml:"name"`
	Identity string `yaml:"identity"`
}

// DefaultRift returns the Rift spec's defaults, listener off.
func DefaultRift() Rift {
	return Rift{
		MaxConnections: 1024, MaxStreams: 128,
		AuthTimeout: 5 * time.Second, FrameTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second,
		KeepAlive: 10 * time.Second, IdleTimeout: 60 * time.Second,
		QueueMsgs: 8192, QueueBytes: 64 << 20, PluginTimeBudget: 100 * time.Millisecond, MaxDurableStreams: stream.DefaultMaxStreams,
	}
}

// Enabled reports whether the Rift listener is configured.
func (r *Rift) Enabled() bool { return r.Listen != "" }

func (r *Rift) validate() []error {
	var errs []error
	if r.Listen != "" && r.DevCerts == "" && (r.Cert == "" || r.Key == "") {
		errs = append(errs, errors.New("rift: rift.listen needs rift.cert and rift.key (or rift.dev_certs for development)"))
	}
	if (r.Cert == "") != (r.Key == "") {
		errs = append(errs, errors.New("rift.cert and rift.key: give both or neither"))
	}
	for name, v := range map[string]int{"rift.max_connections": r.MaxConnections, "rift.max_streams": r.MaxStreams,
		"rift.subscriber_queue_msgs": r.QueueMsgs, "rift.subscriber_queue_bytes": int(r.QueueBytes), "rift.max_durable_streams": r.MaxDurableStreams} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	for name, v := range map[string]time.Duration{"rift.auth_timeout": r.AuthTimeout, "rift.frame_timeout": r.FrameTimeout,
		"rift.write_timeout": r.WriteTimeout, "rift.keep_alive": r.KeepAlive, "rift.idle_timeout": r.IdleTimeout,
		"rift.plugin_time_budget": r.PluginTimeBudget} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	return errs
}
