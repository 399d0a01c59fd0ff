package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// FuzzLoad loads an arbitrary YAML file with arbitrary flags (separated by newlines; a --config
// among them is dropped: the file is the fuzzed one). Load must not panic; what it accepts must
// be valid, and written back as YAML must load to the same settings; a size must print and parse
// to itself.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(riftYAML), "--rift-max-streams\n64")
	f.Add([]byte("listen: 0.0.0.0:1\nmax_frame_size: 1MiB\nhandshake_timeout: 3s\nfsync: false\n"), "--pprof")
	f.Add([]byte("max_frame_size: 1.5 GiB\nmemory_budget: -1\n"), "--max-inflight=7")
	f.Add([]byte("rift: {identities: [{name: a, token: b, publish: ['>']}]}\n"), "--log-level\ndebug")
	f.Add([]byte("a: &a [*a, *a]\n"), "")
	f.Add([]byte("listen: [1, 2]\n"), "--help")
	f.Add([]byte{}, "--max-frame-size\n99999999999999999999")
	f.Add([]byte("node_id: 2\ncluster_listen: :7000\ninitial_cluster: 1=a:7000,2=b:7000,3=c:7000\n"), "--replication\n5")
	f.Add([]byte("node_id: 4\n"), "--join\na:7000\n--cluster-listen\n:7000\n--advertise\nd:5555")
	f.Fuzz(func(t *testing.T, file []byte, line string) {
		path := filepath.Join(t.TempDir(), "fila.yaml")
		if err := os.WriteFile(path, file, 0o600); err != nil {
			t.Fatal(err)
		}
		var args []string
		for _, a := range strings.Split(line, "\n") {
			if a != "" && !strings.HasPrefix(a, "--config") {
				args = append(args, a)
			}
		}
		args = append(args, "--config", path)
		noEnv := func(string) (string, bool) { return "", false }
		cfg, err := Load(args, noEnv, &bytes.Buffer{})
		if err != nil {
			if errors.Is(err, ErrHelp) || errors.Is(err, ErrVersion) {
				return
			}
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("Load failed without saying why")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load accepted settings that do not validate: %v", err)
		}
		out, err := yaml.Marshal(&cfg)
		if err != nil {
			t.Fatalf("the loaded settings do not marshal: %v", err)
		}
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		again, err := Load([]string{"--config", path}, noEnv, &bytes.Buffer{})
		if err != nil {
			t.Fatalf("the loaded settings written back do not load: %v\n%s", err, out)
		}
		if diff := cmp.Diff(cfg, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("the loaded settings written back load differently (-first +second):\n%s", diff)
		}
		for _, b := range []Bytes{cfg.MaxFrameSize, cfg.MaxReassembly, cfg.MemoryBudget, cfg.BodyCacheBytes, cfg.Rift.QueueBytes} {
			var back Bytes
			if err := back.UnmarshalText([]byte(b.String())); err != nil || back != b {
				t.Fatalf("size %d prints as %q, which parses to %d (%v)", int(b), b.String(), int(back), err)
			}
		}
	})
}
