package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	cfg, err := Load(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:5555" || cfg.DataDir != "./data" || cfg.HTTPListen != "127.0.0.1:9555" || !cfg.Fsync {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestPrecedenceFileEnvFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fila.yaml")
	if err := os.WriteFile(path, []byte("listen: 127.0.0.1:7000\ndata_dir: /file\nping_interval: 5s\nhttp_listen: 127.0.0.1:7001\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", path, "--data-dir", "/flag"}, env(map[string]string{"FILA_DATA_DIR": "/env", "FILA_HTTP_LISTEN": "127.0.0.1:7002"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:7000" || cfg.HTTPListen != "127.0.0.1:7002" || cfg.DataDir != "/flag" || cfg.PingInterval != 5*time.Second {
		t.Fatalf("precedence: %+v", cfg)
	}
}

func TestBadSettingsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--ping-interval", "soon"}, nil, `--ping-interval: "soon" is not a duration`},
		{nil, map[string]string{"FILA_MAX_INFLIGHT": "many"}, `FILA_MAX_INFLIGHT: "many" is not an integer`},
		{[]string{"--tls-cert", "c.pem"}, nil, "tls_cert and tls_key"},
		{[]string{"--log-level", "loud"}, nil, "log_level"},
		{[]string{"stray"}, nil, `unexpected argument "stray"`},
		{[]string{"--config", "/nonexistent/fila.yaml"}, nil, "config file"},
	} {
		_, err := Load(tc.args, env(tc.env), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%v, %v) = %v, want an error mentioning %q", tc.args, tc.env, err, tc.want)
		}
	}
}

func TestUnknownFileKeyIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fila.yaml")
	os.WriteFile(path, []byte("listne: x\n"), 0o644)
	if _, err := Load([]string{"--config", path}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "listne") {
		t.Fatalf("typo in the config file: %v", err)
	}
}

func TestHelpDocumentsEverySetting(t *testing.T) {
	var out bytes.Buffer
	_, err := Load([]string{"--help"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, f := range fields() {
		if !strings.Contains(out.String(), "-"+f.flag) || !strings.Contains(out.String(), f.env) {
			t.Errorf("--help does not document %s / %s", f.flag, f.env)
		}
	}
}

func TestBooleanFlagsMayBeBare(t *testing.T) {
	cfg, err := Load([]string{"--pprof", "--log-level", "warn", "--fsync=false"}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.PProf || cfg.Fsync || cfg.LogLevel != "warn" {
		t.Fatalf("%+v", cfg)
	}
}
