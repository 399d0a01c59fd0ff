package config

import (
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// ErrHelp is returned by Load when --help (or -h) is given; the usage has been written.
var ErrHelp = errors.New("help requested")

// ErrVersion is returned by Load when --version is given: the caller prints the version and exits.
var ErrVersion = errors.New("version requested")

// field describes one scalar setting, derived from the struct tags. Nested sections (rift) give
// their fields a prefix: YAML rift.listen is flag --rift-listen and FILA_RIFT_LISTEN. Lists
// (identities, streams) are set in the YAML file only.
type field struct {
	yaml, flag, env, help string
	index                 []int
}

func fields() []field { return appendFields(nil, reflect.TypeFor[Config](), "", nil) }

func appendFields(out []field, t reflect.Type, prefix string, index []int) []field {
	for i := range t.NumField() {
		f := t.Field(i)
		y := prefix + f.Tag.Get("yaml")
		idx := append(append([]int(nil), index...), i)
		switch {
		case f.Tag.Get("yaml") == "-": // set in code only (BootstrapAPIKey)
		case f.Type.Kind() == reflect.Struct:
			out = appendFields(out, f.Type, y+"_", idx)
		case f.Type.Kind() == reflect.Slice:
		default:
			out = append(out, field{yaml: y, flag: strings.ReplaceAll(y, "_", "-"), env: "FILA_" + strings.ToUpper(y), help: f.Tag.Get("help"), index: idx})
		}
	}
	return out
}

// Load builds the configuration from defaults, the file named by --config (or FILA_CONFIG), the
// environment (lookupEnv, as os.LookupEnv) and args (without the program name). An empty FILA_*
// variable counts as unset, except FILA_BOOTSTRAP_API_KEY: set empty, it is refused (a secret
// that failed to reach the environment must not start a server without authentication). Flags are GNU style (--name value,
// --name=value; booleans may be bare), parsed by spf13/pflag like the fila CLI's. --help writes
// the usage to usage and returns ErrHelp; a mistake in the command line is one line of error that
// points to --help.
func Load(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Config, error) {
	getenv := func(k string) string { v, _ := lookupEnv(k); return v }
	cfg := Default()
	v := reflect.ValueOf(&cfg).Elem()
	fs, flagVals := newFlagSet(v, getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			writeUsage(usage, fs)
			return cfg, ErrHelp
		}
		return cfg, commandLineError(err, args)
	}
	if version, _ := fs.GetBool("version"); version {
		return cfg, ErrVersion
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (settings are flags: see fila-server --help)", fs.Arg(0))
	}
	if configPath, _ := fs.GetString("config"); configPath != "" {
		if err := loadFile(&cfg, configPath); err != nil {
			return cfg, err
		}
	}
	cfg.BootstrapAPIKey, cfg.BootstrapAPIKeySet = lookupEnv("FILA_BOOTSTRAP_API_KEY")
	for _, f := range fields() {
		if val := getenv(f.env); val != "" {
			if err := set(v.FieldByIndex(f.index), val); err != nil {
				return cfg, fmt.Errorf("%s: %w", f.env, err)
			}
		}
	}
	for _, f := range fields() {
		if fs.Changed(f.flag) {
			if err := set(v.FieldByIndex(f.index), flagVals[f.flag].s); err != nil {
				return cfg, fmt.Errorf("--%s: %w", f.flag, err)
			}
		}
	}
	return cfg, cfg.Validate()
}

// newFlagSet declares --config, --version and one flag per setting of v. A setting's flag only
// records its text: it is parsed after the file and the environment are applied, so the error
// names the flag and flags win.
func newFlagSet(v reflect.Value, getenv func(string) string) (*pflag.FlagSet, map[string]*flagValue) {
	fs := pflag.NewFlagSet("fila-server", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.String("config", getenv("FILA_CONFIG"), "YAML configuration file (env FILA_CONFIG)")
	fs.Bool("version", false, "print the version, commit and Go version, and exit")
	flagVals := map[string]*flagValue{}
	for _, f := range fields() {
		fv := v.FieldByIndex(f.index)
		val := &flagValue{kind: flagType(fv)}
		flagVals[f.flag] = val
		fl := fs.VarPF(val, f.flag, "", fmt.Sprintf("%s (env %s, default %q)", f.help, f.env, fmt.Sprint(fv.Interface())))
		if val.kind == "bool" {
			fl.NoOptDefVal = "true"
		}
	}
	return fs, flagVals
}

func writeUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintln(w, "Usage: fila-server [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The Fila broker. Settings come from the defaults, then --config FILE (YAML keys as in the")
	fmt.Fprintln(w, "flag names with _ for -, nested under rift: for --rift-*), then FILA_* environment variables,")
	fmt.Fprintln(w, "then flags. Sizes take a unit (64MiB, 1GiB, 500KB), durations one too (30s, 5m).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Other commands (each with its own --help):")
	fmt.Fprintln(w, "  fila-server check --data-dir DIR                  verify a stopped server's data directory (or a backup)")
	fmt.Fprintln(w, "  fila-server restore --from BACKUP --data-dir DIR  copy a backup (fila backup create) into a new data directory")
	fmt.Fprintln(w, "  fila-server healthcheck [--http-addr HOST:PORT]   ask a running server's /readyz and /healthz")
	fmt.Fprintln(w, "  fila-server dev-certs DIR                         write a development CA and certificates")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flags:")
	fmt.Fprint(w, fs.FlagUsagesWrapped(100))
}

// commandLineError turns a pflag error into one line that points to --help.
func commandLineError(err error, args []string) error {
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown shorthand flag") {
		for _, a := range args {
			if len(a) > 2 && a[0] == '-' && a[1] != '-' {
				msg = fmt.Sprintf("unknown flag %s: long flags take two dashes (--%s)", a, strings.TrimPrefix(a, "-"))
				break
			}
		}
	}
	return fmt.Errorf("%s (see fila-server --help)", msg)
}

func loadFile(cfg *Config, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// flagType is the type name --help shows for a setting.
func flagType(v reflect.Value) string {
	switch v.Interface().(type) {
	case Bytes:
		return "size"
	case time.Duration:
		return "duration"
	}
	return v.Kind().String()
}

// set parses s into a settings field.
func set(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
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
	case uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer of 0 or more", s)
		}
		v.SetUint(n)
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

// flagValue holds a flag's text until the file and environment are applied.
type flagValue struct {
	s    string
	kind string
}

func (f *flagValue) String() string     { return f.s }
func (f *flagValue) Set(s string) error { f.s = s; return nil }
func (f *flagValue) Type() string       { return f.kind }
