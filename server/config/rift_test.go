package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const riftYAML = `
rift:
  listen: 127.0.0.1:7443
  cert: server.pem
  key: server-key.pem
  identities:
    - name: game
      token: "s3cret"
      publish: ["game.>"]
      subscribe: ["game.*", "_INBOX.game.>"]
      control: false
  streams:
    - name: events
      subjects: ["events.>"]
      durability: fsync
      max_msgs: 0
      max_bytes: 0
      max_age: 0s
  plugins_dir: plugins
  plugins:
    - {name: echo, identity: game}
`

func TestRiftSectionFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fila.yaml")
	if err := os.WriteFile(path, []byte(riftYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", path, "--rift-max-streams", "64"}, env(map[string]string{"FILA_RIFT_LISTEN": "127.0.0.1:8443"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Rift
	if r.Listen != "127.0.0.1:8443" || r.Cert != "server.pem" || r.Key != "server-key.pem" || r.MaxStreams != 64 {
		t.Errorf("scalars: %+v", r)
	}
	if r.MaxConnections != 1024 || r.AuthTimeout != 5*time.Second || r.IdleTimeout != time.Minute {
		t.Errorf("defaults lost when the file sets the rift section: %+v", r)
	}
	if len(r.Identities) != 1 || r.Identities[0].Name != "game" || r.Identities[0].Token != "s3cret" ||
		len(r.Identities[0].Subscribe) != 2 || r.Identities[0].Control {
		t.Errorf("identities: %+v", r.Identities)
	}
	if len(r.Streams) != 1 || r.Streams[0].Name != "events" || r.Streams[0].Durability != "fsync" || r.Streams[0].Subjects[0] != "events.>" {
		t.Errorf("streams: %+v", r.Streams)
	}
	if r.PluginsDir != "plugins" || len(r.Plugins) != 1 || r.Plugins[0].Identity != "game" {
		t.Errorf("plugins: %+v", r)
	}
}

func TestRiftFlagsAndValidation(t *testing.T) {
	cfg, err := Load([]string{"--rift-listen", "127.0.0.1:7443", "--rift-cert", "c.pem", "--rift-key", "k.pem"}, env(nil), &bytes.Buffer{})
	if err != nil || !cfg.Rift.Enabled() || cfg.Rift.Cert != "c.pem" {
		t.Fatalf("flags: %+v, %v", cfg.Rift, err)
	}
	if cfg, err := Load(nil, env(nil), &bytes.Buffer{}); err != nil || cfg.Rift.Enabled() {
		t.Fatalf("Rift must be off by default: %+v, %v", cfg.Rift, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rift-listen", "127.0.0.1:7443"}, "rift.listen needs rift.cert"},
		{[]string{"--rift-cert", "c.pem"}, "rift.cert and rift.key"},
		{[]string{"--rift-max-connections", "0"}, "rift.max_connections"},
		{[]string{"--rift-idle-timeout", "-1s"}, "rift.idle_timeout"},
	} {
		if _, err := Load(tc.args, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%v) = %v, want an error mentioning %q", tc.args, err, tc.want)
		}
	}
	if _, err := Load([]string{"--rift-listen", "127.0.0.1:7443", "--rift-dev-certs", t.TempDir()}, env(nil), &bytes.Buffer{}); err != nil {
		t.Errorf("dev certs replace cert and key: %v", err)
	}
}

func TestRiftUnknownKeyIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fila.yaml")
	os.WriteFile(path, []byte("rift:\n  identities:\n    - name: x\n      tokn: y\n"), 0o644)
	if _, err := Load([]string{"--config", path}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "tokn") {
		t.Fatalf("typo in a rift identity: %v", err)
	}
}
