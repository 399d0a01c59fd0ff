package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const threeNodes = "1=10.0.0.1:7000,2=10.0.0.2:7000,3=10.0.0.3:7000"

// The names: flags, variables and YAML keys of the cluster settings.
func TestClusterSettingsByFlagEnvAndFile(t *testing.T) {
	cfg, err := Load([]string{"--node-id", "2", "--cluster-listen", "0.0.0.0:7000", "--initial-cluster", threeNodes,
		"--advertise", "fila-2.example:5555", "--replication", "5"}, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 2 || cfg.ClusterListen != "0.0.0.0:7000" || cfg.InitialCluster != threeNodes || cfg.Advertise != "fila-2.example:5555" ||
		cfg.Replication != 5 || !cfg.Clustered() {
		t.Fatalf("flags: %+v", cfg)
	}
	cfg, err = Load(nil, env(map[string]string{"FILA_NODE_ID": "4", "FILA_CLUSTER_LISTEN": ":7000", "FILA_JOIN": "10.0.0.1:7000",
		"FILA_ADVERTISE": "10.0.0.4:5555", "FILA_REPLICATION": "1"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 4 || cfg.ClusterListen != ":7000" || cfg.Join != "10.0.0.1:7000" || cfg.Advertise != "10.0.0.4:5555" || cfg.Replication != 1 {
		t.Fatalf("environment: %+v", cfg)
	}
	path := filepath.Join(t.TempDir(), "fila.yaml")
	yaml := "node_id: 3\ncluster_listen: 10.0.0.3:7000\ninitial_cluster: " + threeNodes + "\nreplication: 3\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err = Load([]string{"--config", path}, env(nil), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	want := []Member{{1, "10.0.0.1:7000"}, {2, "10.0.0.2:7000"}, {3, "10.0.0.3:7000"}}
	if diff := cmp.Diff(want, cfg.InitialMembers()); cfg.NodeID != 3 || diff != "" {
		t.Fatalf("file: node %d, members (-want +got):\n%s", cfg.NodeID, diff)
	}
}

func TestSingleNodeByDefault(t *testing.T) {
	cfg, err := Load(nil, env(nil), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Clustered() || cfg.NodeID != 0 || cfg.Replication != 3 || cfg.InitialMembers() != nil {
		t.Fatalf("defaults: %+v", cfg)
	}
}

// Each bad input is refused with one line naming it.
func TestBadClusterSettings(t *testing.T) {
	node1 := []string{"--node-id", "1", "--cluster-listen", ":7000"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"node ID not in the list", []string{"--node-id", "4", "--cluster-listen", ":7000", "--initial-cluster", threeNodes},
			"initial_cluster: node_id 4 is not in it (it lists 1, 2, 3)"},
		{"two nodes with one ID", append(node1, "--initial-cluster", "1=a:7000,2=b:7000,2=c:7000"),
			"initial_cluster: two nodes have ID 2 (2=b:7000 and 2=c:7000)"},
		{"two nodes with one address", append(node1, "--initial-cluster", "1=a:7000,2=b:7000,3=a:7000"),
			"initial_cluster: nodes 1 and 3 have one address a:7000"},
		{"join and initial cluster", append(node1, "--initial-cluster", threeNodes, "--join", "10.0.0.2:7000"),
			"initial_cluster and join exclude each other"},
		{"even founders", append(node1, "--initial-cluster", "1=a:7000,2=b:7000"), "initial_cluster: 2 founding members; give 1, 3 or 5"},
		{"entry without ID", append(node1, "--initial-cluster", "1=a:7000,b:7000,3=c:7000"), `initial_cluster: entry 2 "b:7000" is not ID=HOST:PORT`},
		{"ID zero", append(node1, "--initial-cluster", "0=a:7000"), `the node ID "0" is not an integer of 1 or more`},
		{"address without port", append(node1, "--initial-cluster", "1=a"), `initial_cluster: "1=a": "a" is not HOST:PORT`},
		{"address of every interface", append(node1, "--initial-cluster", "1=0.0.0.0:7000"), "is every interface"},
		{"node ID not a number", []string{"--node-id", "one"}, `--node-id: "one" is not an integer of 0 or more`},
		{"negative node ID", []string{"--node-id", "-1"}, `--node-id: "-1" is not an integer of 0 or more`},
		{"cluster setting without node ID", []string{"--initial-cluster", threeNodes, "--join", "a:1"},
			"initial_cluster, join: a cluster setting needs node_id"},
		{"node without cluster_listen", []string{"--node-id", "1", "--initial-cluster", "1=a:7000"}, "cluster_listen: node 1 needs it"},
		{"bad cluster_listen", []string{"--node-id", "1", "--cluster-listen", "7000", "--join", "a:7000"}, `cluster_listen: "7000" is not HOST:PORT`},
		{"bad join", append(node1, "--join", "a:0"), `join: "a:0": port 0 cannot be dialled`},
		{"bad advertise", append(node1, "--join", "a:1", "--advertise", ":5555"), `advertise: ":5555" has no host`},
		{"replication 0", []string{"--replication", "0"}, "replication: must be 1 or more"},
		{"cluster TLS without its CA", append(node1, "--join", "a:1", "--cluster-tls-cert", "n.pem", "--cluster-tls-key", "n-key.pem"),
			"cluster_tls_cert, cluster_tls_key and cluster_tls_ca: give all three"},
		{"cluster TLS on a single node", []string{"--cluster-tls-ca", "ca.pem"}, "cluster_tls_ca: a cluster setting needs node_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, env(nil), &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load(%q) = %v, want an error saying %q", tc.args, err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("one bad input, several lines:\n%v", err)
			}
		})
	}
}

// A restart needs neither initial_cluster nor join: the data directory knows the cluster (the
// server checks that it does).
func TestNodeMayStartWithoutFoundersOrJoin(t *testing.T) {
	if _, err := Load([]string{"--node-id", "1", "--cluster-listen", "127.0.0.1:7000"}, env(nil), &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
}

func TestParseInitialClusterOrdersByID(t *testing.T) {
	m, err := ParseInitialCluster(" 3=c:1 , 1=a:1,2=[::1]:7000")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := FormatMembers(m), "1=a:1,2=[::1]:7000,3=c:1"; got != want {
		t.Fatalf("FormatMembers = %q, want %q", got, want)
	}
}

// FuzzParseInitialCluster: what parses formats to a list that parses to the same members.
func FuzzParseInitialCluster(f *testing.F) {
	for _, s := range []string{threeNodes, "1=a:1", "1=a:1,1=a:1,2=b:2", "5=[::1]:9,4=x:1,3=y:1,2=z:1,1=w:1", "=,=", "18446744073709551615=h:65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseInitialCluster(s)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("refused without saying why")
			}
			return
		}
		again, err := ParseInitialCluster(FormatMembers(m))
		if err != nil || !cmp.Equal(m, again) {
			t.Fatalf("%q parses to %v, formatted %q, which parses to %v (%v)", s, m, FormatMembers(m), again, err)
		}
	})
}
