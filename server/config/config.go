// Package config holds fila-server's settings: embedded defaults, overridden by a YAML file,
// then FILA_* environment variables, then command-line flags (load.go). A setting is declared
// once, as a field with yaml and help tags; its flag, variable and --help line follow from them.
package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/filamq/fila/server/broker"
)

// Config is every setting of fila-server.
type Config struct {
	Listen     string `yaml:"listen" help:"FIBP listen address"`
	DataDir    string `yaml:"data_dir" help:"directory holding the broker's data"`
	HTTPListen string `yaml:"http_listen" help:"metrics and health address (/metrics, /healthz); empty disables"`
	// BackupDir is where POST /api/v1/backup writes backups (cmd/fila-server backup.go).
	BackupDir         string `yaml:"backup_dir" help:"directory under which POST /api/v1/backup (fila backup create) writes each backup, in a directory of its own; empty refuses backups. On data_dir's file system a backup hard-links the store's immutable files instead of copying them"`
	BackupAllowRemote bool   `yaml:"backup_allow_remote" help:"with authentication off, accept POST /api/v1/backup from addresses other than loopback (with authentication on it needs a superadmin API key from any address)"`
	AddrFile          string `yaml:"addr_file" help:"once the server is ready, write the addresses it listens on to this file (JSON: fibp, rift, http), replacing it atomically; for tests and scripts that listen on port 0"`
	LogLevel          string `yaml:"log_level" help:"debug, info, warn or error"`
	LogFormat         string `yaml:"log_format" help:"text or json"`
	Fsync             bool   `yaml:"fsync" help:"fsync every acknowledged change (group-committed); false trades durability for speed"`
	PProf             bool   `yaml:"pprof" help:"serve Go profiles under /debug/pprof/ on http_listen"`
	Salvage           bool   `yaml:"salvage" help:"start on a data directory whose WAL is damaged by dropping what follows the damage (the original file is kept, the loss logged); without it such a start stops with an error naming the file"`

	MetricsTopKeys   int `yaml:"metrics_top_keys" help:"fairness keys per queue with their own fila_queue_fairness_key_ready series (the largest backlogs); bounds the label cardinality"`
	MetricsMaxQueues int `yaml:"metrics_max_queues" help:"queues (a dead-letter queue counts as one) with per-queue series of their own, chosen at every scrape: those holding the most messages, then the most enqueued since the start; the others are summed into series labelled queue *others"`

	TLSCert     string `yaml:"tls_cert" help:"PEM certificate: serve FIBP over TLS"`
	TLSKey      string `yaml:"tls_key" help:"PEM private key for tls_cert"`
	TLSClientCA string `yaml:"tls_client_ca" help:"PEM CA bundle: require and verify client certificates (mTLS)"`

	// BootstrapAPIKeyFile or BootstrapAPIKey (environment only) turns API-key authentication on.
	BootstrapAPIKeyFile string `yaml:"bootstrap_api_key_file" help:"file holding the bootstrap superadmin API key (or env FILA_BOOTSTRAP_API_KEY); either turns authentication on"`
	BootstrapAPIKey     string `yaml:"-"` // from FILA_BOOTSTRAP_API_KEY only: a secret never goes in a flag or a file of settings
	BootstrapAPIKeySet  bool   `yaml:"-"` // FILA_BOOTSTRAP_API_KEY is set, even to nothing
	// InsecureNoAuth lets a data directory that holds API keys start without a bootstrap key,
	// with authentication off; without it such a start is refused (cmd/fila-server).
	InsecureNoAuth bool `yaml:"insecure_no_auth" help:"start with authentication off on a data directory that holds API keys (without it, such a start without a bootstrap key is refused): every client may then do everything; for recovery only"`

	MaxFrameSize     Bytes         `yaml:"max_frame_size" help:"largest accepted frame, advertised in HandshakeOk"`
	MaxReassembly    Bytes         `yaml:"max_reassembly" help:"largest body reassembled from continuation frames"`
	MaxConnections   int           `yaml:"max_connections" help:"concurrent client connections; at this limit the oldest connection of all still in its handshake gives its slot to the new one, and is closed unserved (handshaken connections are never evicted)"`
	MaxPerClient     int           `yaml:"max_connections_per_client" help:"concurrent connections from one client IP address; at this limit the address's oldest connection still in its handshake gives its slot to the new one (handshaken connections are never evicted)"`
	HandshakeTimeout time.Duration `yaml:"handshake_timeout" help:"time a new connection has to complete TLS and the FIBP Handshake"`
	MaxInflight      int           `yaml:"max_inflight" help:"requests awaiting an answer per connection"`
	MaxSubscriptions int           `yaml:"max_subscriptions" help:"subscriptions per connection; each counts 1 KiB against max_connection_memory and memory_budget while it lives"`
	QueueInbox       int           `yaml:"queue_inbox" help:"requests waiting per queue before ChannelFull"`
	MaxQueues        int           `yaml:"max_queues" help:"queues this node holds (each with its dead-letter queue); CreateQueue beyond it is refused"`
	QueueIdleTimeout time.Duration `yaml:"queue_idle_timeout" help:"time without requests after which an idle queue hibernates (no goroutine, its log closed) until the next request or due change"`
	BodyCacheBytes   Bytes         `yaml:"body_cache_bytes" help:"memory for recent message bodies, all queues together; older bodies stay on disk"`
	PingInterval     time.Duration `yaml:"ping_interval" help:"idle time before the server pings a client"`
	PongTimeout      time.Duration `yaml:"pong_timeout" help:"time a client has to answer a Ping"`
	ShutdownTimeout  time.Duration `yaml:"shutdown_timeout" help:"time to finish in-flight requests on SIGINT/SIGTERM, and then to close the stores (past that, the server exits 1 without closing them)"`

	MemoryBudget        Bytes         `yaml:"memory_budget" help:"memory all clients together may make the server hold (frame buffers, partial bodies, unanswered requests, queued answers and deliveries, Rift subscriber queues, deduplication identities: at most half); 0 = half the smallest of the process's own cgroup memory limit, GOMEMLIMIT and the machine's memory"`
	MaxConnectionMemory Bytes         `yaml:"max_connection_memory" help:"memory one client connection may make the server hold"`
	ReassemblyTimeout   time.Duration `yaml:"reassembly_timeout" help:"a body sent in continuation frames is dropped when no frame of it arrives for this long"`
	MemoryAccounting    bool          `yaml:"memory_accounting" help:"count client-held memory against memory_budget and max_connection_memory; false only to measure what the accounting costs"`

	// The cluster (cluster.go): without node_id the server is a single node and the other cluster
	// settings must be absent.
	NodeID         uint64 `yaml:"node_id" help:"this node's ID in a cluster, 1 or more (HandshakeOk's node_id); 0 runs a single node, and every other cluster setting needs one"`
	ClusterListen  string `yaml:"cluster_listen" help:"HOST:PORT where this node accepts the inter-node protocol (a cluster node needs it)"`
	InitialCluster string `yaml:"initial_cluster" help:"the founding members as ID=HOST:PORT,… (1, 3 or 5 of them, each at its cluster_listen address), the same list on each and this node among them; read only while data_dir is empty; excludes join"`
	Join           string `yaml:"join" help:"HOST:PORT: a node that is not a founding member joins the cluster through any member's inter-node address on its first start; a restart needs none (given, the member must be of the data directory's cluster); excludes initial_cluster"`
	Advertise      string `yaml:"advertise" help:"HOST:PORT: the FIBP address other nodes give clients for this node (leader_addr, route hints, GetClusterStatus); empty: the address listen is bound to"`
	Replication    int    `yaml:"replication" help:"replicas per queue group, capped by the cluster's size"`
	// ClusterHeartbeatTimeout is broker.Cluster.HeartbeatTimeout; a single node keeps raftgroup's.
	ClusterHeartbeatTimeout time.Duration `yaml:"cluster_heartbeat_timeout" help:"how long a cluster node's replica waits to hear from its group's leader before it stands for election (a leader's death is noticed 1 to 3 times this after it): shorter fails over sooner, and costs more heartbeats (a leader sends each follower one every fifth to two fifths of it)"`
	ClusterTLSCert          string        `yaml:"cluster_tls_cert" help:"PEM certificate this node presents to the other nodes, as server and as client (it needs both uses): mutual TLS on the inter-node link; with cluster_tls_key and cluster_tls_ca"`
	ClusterTLSKey           string        `yaml:"cluster_tls_key" help:"PEM private key for cluster_tls_cert"`
	ClusterTLSCA            string        `yaml:"cluster_tls_ca" help:"PEM CA bundle the other nodes' certificates must chain to (on the inter-node link only)"`

	Auth Auth `yaml:"auth"` // auth.go

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
		MetricsTopKeys:   broker.DefaultTopKeys,
		MetricsMaxQueues: broker.DefaultMetricsQueues,
		MaxFrameSize:     16 << 20,
		MaxReassembly:    64 << 20,
		MaxConnections:   10_000,
		MaxPerClient:     1000,
		HandshakeTimeout: 10 * time.Second,
		MaxInflight:      4096,
		MaxSubscriptions: 1024,
		QueueInbox:       4096,
		MaxQueues:        broker.DefaultMaxQueues,
		QueueIdleTimeout: broker.DefaultIdleTimeout,
		BodyCacheBytes:   64 << 20,
		PingInterval:     15 * time.Second,
		PongTimeout:      30 * time.Second,
		ShutdownTimeout:  10 * time.Second,

		MaxConnectionMemory: 256 << 20,
		ReassemblyTimeout:   30 * time.Second,
		MemoryAccounting:    true,

		Replication:             3,
		ClusterHeartbeatTimeout: 500 * time.Millisecond,

		Auth: DefaultAuth(),
		Rift: DefaultRift(),
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
	if c.MemoryBudget < 0 {
		errs = append(errs, errors.New("memory_budget: must not be negative (0 = the default)"))
	}
	if c.MaxFrameSize < 1024 {
		errs = append(errs, fmt.Errorf("max_frame_size: %v is below 1KiB", c.MaxFrameSize))
	}
	if c.BootstrapAPIKey != "" && c.BootstrapAPIKeyFile != "" {
		errs = append(errs, errors.New("bootstrap_api_key_file: FILA_BOOTSTRAP_API_KEY is set too; give one"))
	}
	if c.BootstrapAPIKeySet && strings.TrimSpace(c.BootstrapAPIKey) == "" {
		errs = append(errs, errors.New("FILA_BOOTSTRAP_API_KEY: is set but empty or white space only; give a key of at least 32 characters, or unset it"))
	}
	if c.InsecureNoAuth && (c.BootstrapAPIKey != "" || c.BootstrapAPIKeyFile != "") {
		errs = append(errs, errors.New("insecure_no_auth: a bootstrap key is configured too; give one or the other"))
	}
	for name, v := range map[string]int{"max_reassembly": int(c.MaxReassembly), "max_connections": c.MaxConnections, "max_connections_per_client": c.MaxPerClient,
		"max_inflight": c.MaxInflight, "metrics_top_keys": c.MetricsTopKeys, "metrics_max_queues": c.MetricsMaxQueues, "max_subscriptions": c.MaxSubscriptions, "queue_inbox": c.QueueInbox, "max_queues": c.MaxQueues, "body_cache_bytes": int(c.BodyCacheBytes),
		"max_connection_memory": int(c.MaxConnectionMemory)} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	for name, v := range map[string]time.Duration{"handshake_timeout": c.HandshakeTimeout, "ping_interval": c.PingInterval, "pong_timeout": c.PongTimeout, "shutdown_timeout": c.ShutdownTimeout,
		"reassembly_timeout": c.ReassemblyTimeout, "queue_idle_timeout": c.QueueIdleTimeout, "cluster_heartbeat_timeout": c.ClusterHeartbeatTimeout} {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive", name))
		}
	}
	if err := c.validateBackupDir(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validateCluster()...)
	errs = append(errs, c.Auth.validate()...)
	errs = append(errs, c.Rift.validate()...)
	return errors.Join(errs...)
}

// validateBackupDir refuses a backup_dir inside data_dir (or data_dir itself): a backup is to
// outlive the directory it copies.
func (c *Config) validateBackupDir() error {
	if c.BackupDir == "" || c.DataDir == "" {
		return nil
	}
	data, err1 := filepath.Abs(c.DataDir)
	backups, err2 := filepath.Abs(c.BackupDir)
	if err1 != nil || err2 != nil {
		return nil // the server reports the directory it cannot use
	}
	if rel, err := filepath.Rel(data, backups); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("backup_dir: %s is inside data_dir %s; give a directory outside it (on the same file system, backups are hard links and cost little space)", c.BackupDir, c.DataDir)
	}
	return nil
}

// BootstrapKey returns the bootstrap superadmin API key, from FILA_BOOTSTRAP_API_KEY or the
// bootstrap_api_key_file, without surrounding white space; empty means none is configured (a
// FILA_BOOTSTRAP_API_KEY set empty or to white space only, or an empty file, is an error).
func (c *Config) BootstrapKey() (string, error) {
	if c.BootstrapAPIKeyFile == "" {
		return strings.TrimSpace(c.BootstrapAPIKey), nil
	}
	data, err := os.ReadFile(c.BootstrapAPIKeyFile)
	if err != nil {
		return "", fmt.Errorf("bootstrap_api_key_file: %w", err)
	}
	key := strings.TrimSpace(string(data))
	if key == "" {
		return "", fmt.Errorf("bootstrap_api_key_file %s: the file is empty", c.BootstrapAPIKeyFile)
	}
	return key, nil
}
