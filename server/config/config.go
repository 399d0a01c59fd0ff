// Package config holds fila-server's settings: embedded defaults, overridden by a YAML file,
// then FILA_* environment variables, then command-line flags.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is every setting of fila-server.
type Config struct {
	Listen     string `yaml:"listen" help:"FIBP listen address"`
	DataDir    string `yaml:"data_dir" help:"directory holding the broker's data"`
	HTTPListen string `yaml:"http_listen" help:"metrics and health address (/metrics, /healthz); empty disables"`
	LogLevel   string `yaml:"log_level" help:"debug, info, warn or error"`
	LogFormat  string `yaml:"log_format" help:"text or json"`
	Fsync      bool   `yaml:"fsync" help:"fsync every acknowledged change (group-committed); false trades durability for speed"`
	PProf      bool   `yaml:"pprof" help:"serve Go profiles under /debug/pprof/ on http_listen"`

	TLSCert     string `yaml:"tls_cert" help:"PEM certificate: serve FIBP over TLS"`
	TLSKey      string `yaml:"tls_key" help:"PEM private key for tls_cert"`
	TLSClientCA string `yaml:"tls_client_ca" help:"PEM CA bundle: require and verify client certificates (mTLS)"`

	MaxFrameSize     int           `yaml:"max_frame_size" help:"largest accepted frame in bytes, advertised in HandshakeOk"`
	MaxReassembly    int           `yaml:"max_reassembly" help:"largest body reassembled from continuation frames, in bytes"`
	MaxConnections   int           `yaml:"max_connections" help:"concurrent client connections"`
	MaxInflight      int           `yaml:"max_inflight" help:"requests awaiting an answer per connection"`
	MaxSubscriptions int           `yaml:"max_subscriptions" help:"subscriptions per connection"`
	QueueInbox       int           `yaml:"queue_inbox" help:"requests waiting per queue before ChannelFull"`
	BodyCacheBytes   int           `yaml:"body_cache_bytes" help:"memory for recent message bodies, all queues together; older bodies stay on disk"`
	PingInterval     time.Duration `yaml:"ping_interval" help:"idle time before the server pings a client"`
	PongTimeout      time.Duration `yaml:"pong_timeout" help:"time a client has to answer a Ping"`
	ShutdownTimeout  time.Duration `yaml:"shutdown_timeout" help:"time to finish in-flight requests on SIGINT/SIGTERM"`

	Rift Rift `yaml:"rift"`
}

// Default returns the embedded defaults: a single node on loopback with data under ./data.
func Default() Config {
	return Config{
		Listen:           "127.0.0.1:5555",
		DataDir:          "./data",
		HTTPListen:       "127.0.0.1:9555",
		LogLevel:         "info",
		LogFormat:        "text",
		Fsync:            true,
		MaxFrameSize:     16 << 20,
		MaxReassembly:    64 << 20,
		MaxConnections:   10_000,
		MaxInflight:      4096,
		MaxSubscriptions: 1024,
		QueueInbox:       4096,
		BodyCacheBytes:   64 << 20,
		PingInterval:     15 * time.Second,
		PongTimeout:      30 * time.Second,
		ShutdownTimeout:  10 * time.Second,
		Rift:             DefaultRift(),
	}
}

// Validate reports every problem with c.
func (c *Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("listen: must not be empty"))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir: must not be empty"))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("tls_cert and tls_key: give both or neither"))
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		errs = append(errs, errors.New("tls_client_ca: needs tls_cert and tls_key"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level: %q is not debug, info, warn or error", c.LogLevel))
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		errs = append(errs, fmt.Errorf("log_format: %q is not text or json", c.LogFormat))
	}
	if c.MaxFrameSize < 1024 {
		errs = append(errs, fmt.Errorf("max_frame_size: %d is below 1024", c.MaxFrameSize))
	}
	for name, v := range map[string]int{"max_reassembly": c.MaxReassembly, "max_connections": c.MaxConnections,
		"max_inflight": c.MaxInflight, "max_subscriptions": c.MaxSubscriptions, "queue_inbox": c.QueueInbox, "body_cache_bytes": c.BodyCacheBytes} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	for name, v := range map[string]time.Duration{"ping_interval": c.PingInterval, "pong_timeout": c.PongTimeout, "shutdown_timeout": c.ShutdownTimeout} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	errs = append(errs, c.Rift.validate()...)
	return errors.Join(errs...)
}

// field describes one scalar setting, derived from the struct tags. Nested sections (rift) give
// their fields a prefix: YAML rift.listen is flag --rift-listen and FILA_RIFT_LISTEN. Lists
// (identities, streams) are set in the YAML file only.
type field struct {
	yaml, flag, env, help string
	index                 []int
}

func fields() []field { return appendFields(nil, reflect.TypeOf(Config{}), "", nil) }

func appendFields(out []field, t reflect.Type, prefix string, index []int) []field {
	for i := range t.NumField() {
		f := t.Field(i)
		y := prefix + f.Tag.Get("yaml")
		idx := append(append([]int(nil), index...), i)
		switch {
		case f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)):
			out = appendFields(out, f.Type, y+"_", idx)
		case f.Type.Kind() == reflect.Slice:
		default:
			out = append(out, field{yaml: y, flag: strings.ReplaceAll(y, "_", "-"), env: "FILA_" + strings.ToUpper(y), help: f.Tag.Get("help"), index: idx})
		}
	}
	return out
}

// ErrVersion is returned by Load when --version is given: the caller prints the version and exits.
var ErrVersion = errors.New("version requested")

// Load builds the configuration from defaults, the file named by --config (or FILA_CONFIG), the
// environment and args (without the program name). Usage goes to usage when --help is given, in
// which case Load returns flag.ErrHelp.
func Load(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	cfg := Default()
	fs := flag.NewFlagSet("fila-server", flag.ContinueOnError)
	fs.SetOutput(usage)
	configPath := fs.String("config", getenv("FILA_CONFIG"), "YAML configuration file (env FILA_CONFIG)")
	showVersion := fs.Bool("version", false, "print the version, commit and Go version, and exit")
	v := reflect.ValueOf(&cfg).Elem()
	flagVals := map[string]*flagValue{}
	for _, f := range fields() {
		def := fmt.Sprint(v.FieldByIndex(f.index).Interface())
		fv := &flagValue{isBool: v.FieldByIndex(f.index).Kind() == reflect.Bool}
		flagVals[f.yaml] = fv
		fs.Var(fv, f.flag, fmt.Sprintf("%s (env %s, default %q)", f.help, f.env, def))
	}
	fs.Usage = func() {
		fmt.Fprintln(usage, "fila-server: the Fila broker. Settings come from the defaults, then --config FILE (YAML keys")
		fmt.Fprintln(usage, "as in the flag names with _ for -), then FILA_* environment variables, then flags.")
		fmt.Fprintln(usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *showVersion {
		return cfg, ErrVersion
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (settings are flags: see --help)", fs.Arg(0))
	}
	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			return cfg, fmt.Errorf("config file: %w", err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("config file %s: %w", *configPath, err)
		}
	}
	for _, f := range fields() {
		if val := getenv(f.env); val != "" {
			if err := set(v.FieldByIndex(f.index), val); err != nil {
				return cfg, fmt.Errorf("%s: %w", f.env, err)
			}
		}
	}
	var err error
	fs.Visit(func(fl *flag.Flag) {
		for _, f := range fields() {
			if f.flag == fl.Name && err == nil {
				if e := set(v.FieldByIndex(f.index), flagVals[f.yaml].s); e != nil {
					err = fmt.Errorf("--%s: %w", f.flag, e)
				}
			}
		}
	})
	if err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// set parses s into a settings field.
func set(v reflect.Value, s string) error {
	switch v.Interface().(type) {
	case string:
		v.SetString(s)
	case bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case int:
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(int64(n))
	case time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 30s", s)
		}
		v.SetInt(int64(d))
	default:
		return fmt.Errorf("unsupported setting type %s", v.Type())
	}
	return nil
}

// flagValue holds a flag's text until the file and environment are applied; boolean settings
// may be given bare (--fsync) or with a value (--fsync=false).
type flagValue struct {
	s      string
	isBool bool
}

func (f *flagValue) String() string     { return f.s }
func (f *flagValue) Set(s string) error { f.s = s; return nil }
func (f *flagValue) IsBoolFlag() bool   { return f.isBool }
