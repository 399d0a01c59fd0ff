package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

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
	if !errors.Is(err, ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, f := range fields() {
		if !strings.Contains(out.String(), "--"+f.flag+" ") || !strings.Contains(out.String(), f.env) {
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

func TestSizesTakeUnits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fila.yaml")
	if err := os.WriteFile(path, []byte("max_frame_size: 8MiB\nmax_reassembly: 1048576\nrift:\n  subscriber_queue_bytes: 1.5 GiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load([]string{"--config", path, "--body-cache-bytes", "64MiB"}, env(map[string]string{"FILA_MAX_REASSEMBLY": "32MB"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{MaxFrameSize: 8 << 20, MaxReassembly: 32_000_000, BodyCacheBytes: 64 << 20}
	if cfg.MaxFrameSize != want.MaxFrameSize || cfg.MaxReassembly != want.MaxReassembly || cfg.BodyCacheBytes != want.BodyCacheBytes || cfg.Rift.QueueBytes != 3<<29 {
		t.Fatalf("sizes: frame %d reassembly %d cache %d rift %d", cfg.MaxFrameSize, cfg.MaxReassembly, cfg.BodyCacheBytes, cfg.Rift.QueueBytes)
	}
	if _, err := Load([]string{"--max-frame-size", "lots"}, env(nil), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), `--max-frame-size: "lots" is not a size such as 64MiB`) {
		t.Fatalf("a bad size: %v", err)
	}
}

func TestBytesString(t *testing.T) {
	for b, want := range map[Bytes]string{0: "0", 100: "100", 1536 << 10: "1536KiB", 64 << 20: "64MiB", 2 << 30: "2GiB"} {
		if got := b.String(); got != want {
			t.Errorf("Bytes(%d).String() = %q, want %q", int(b), got, want)
		}
		var back Bytes
		if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
			t.Errorf("%q parses back to %d, %v", b.String(), int(back), err)
		}
	}
}

// A mistake in the command line is one line that points to --help, never the whole usage.
func TestCommandLineMistakesAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lisen", "x"}, "unknown flag: --lisen"},
		{[]string{"-listen", "x"}, "long flags take two dashes (--listen)"},
		{[]string{"--listen"}, "flag needs an argument: --listen"},
	} {
		var out bytes.Buffer
		_, err := Load(tc.args, env(nil), &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), "(see fila-server --help)") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%q) = %v, want one line with %q pointing to --help", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("Load(%q) wrote usage:\n%s", tc.args, out.String())
		}
	}
}

// A bootstrap key of white space only is refused, not taken for no key; an empty variable is
// unset like every FILA_* variable. insecure_no_auth and a bootstrap key contradict each other.
func TestBootstrapKeySettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string // "" = loads
	}{
		{"white space", nil, map[string]string{"FILA_BOOTSTRAP_API_KEY": " \t\n"}, "FILA_BOOTSTRAP_API_KEY: is set but empty or white space only"},
		{"empty", nil, map[string]string{"FILA_BOOTSTRAP_API_KEY": ""}, "FILA_BOOTSTRAP_API_KEY: is set but empty or white space only"},
		{"another variable empty is unset", nil, map[string]string{"FILA_DATA_DIR": ""}, ""},
		{"insecure alone", []string{"--insecure-no-auth"}, nil, ""},
		{"insecure with a key", []string{"--insecure-no-auth"}, map[string]string{"FILA_BOOTSTRAP_API_KEY": strings.Repeat("k", 40)}, "insecure_no_auth"},
		{"insecure with a key file", []string{"--insecure-no-auth", "--bootstrap-api-key-file", "/k"}, nil, "insecure_no_auth"},
		{"insecure from the environment", nil, map[string]string{"FILA_INSECURE_NO_AUTH": "true", "FILA_BOOTSTRAP_API_KEY": strings.Repeat("k", 40)}, "insecure_no_auth"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, env(tc.env), &bytes.Buffer{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Load: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
