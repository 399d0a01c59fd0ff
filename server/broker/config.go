package broker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/lua/sandbox"
	"github.com/filamq/fila/server/engine"
)

// Defaults are the broker-wide values that a zero in CreateQueue stands for, and the scheduler
// quantum. They are runtime configuration: SetConfig changes them live, and queues created with
// zeros follow.
type Defaults struct {
	VisibilityTimeoutMs uint64
	MaxAttempts         uint32
	Backoff             engine.Backoff
	BackoffInitialMs    uint64
	BackoffMaxMs        uint64
	DedupWindowMs       uint64
	ReclaimGraceMs      uint64
	Quantum             uint32
	LuaTimeoutMs        uint64
	LuaCallStackSize    uint64
	LuaRegistryMaxSize  uint64
	LuaMaxStringBytes   uint64
	LuaMaxCallBytes     uint64
	ReclassifyMs        uint64
	// ReclassifyMaxMs caps the backoff between a parked message's tries.
	ReclassifyMaxMs uint64
	// LuaRequestBudgetMs bounds the on_enqueue time of the Enqueue requests a queue runs
	// together; LuaReclassifyBudgetMs the time of one reclassification pass (scriptbudget.go).
	LuaRequestBudgetMs    uint64
	LuaReclassifyBudgetMs uint64
	// ParkDeadLetterAfter is the failed tries after which a parked message is dead-lettered, for
	// queues created with 0 (0 here: never).
	ParkDeadLetterAfter uint32
	// DedupMaxIdentities and DedupMaxPerQueue bound the deduplication identities remembered by
	// the node and by one queue (dedupbudget.go).
	DedupMaxIdentities uint64
	DedupMaxPerQueue   uint64
	// Limits are the queue limits of queues without queue.<name>.* keys (queuelimits.go).
	Limits QueueLimits
}

// DefaultDefaults returns concepts.md's server defaults.
func DefaultDefaults() Defaults {
	e := engine.DefaultConfig()
	lua := sandbox.DefaultLimits()
	return Defaults{
		VisibilityTimeoutMs:   e.VisibilityTimeoutMs,
		MaxAttempts:           e.MaxAttempts,
		Backoff:               e.Backoff,
		BackoffInitialMs:      e.BackoffInitialMs,
		BackoffMaxMs:          e.BackoffMaxMs,
		DedupWindowMs:         5 * 60 * 1000,
		ReclaimGraceMs:        10 * 1000,
		Quantum:               e.Quantum,
		LuaTimeoutMs:          10,
		LuaCallStackSize:      uint64(lua.CallStackSize),
		LuaRegistryMaxSize:    uint64(lua.RegistryMaxSize),
		LuaMaxStringBytes:     uint64(lua.MaxStringBytes),
		LuaMaxCallBytes:       uint64(lua.MaxCallBytes),
		ReclassifyMs:          60 * 1000,
		ReclassifyMaxMs:       60 * 60 * 1000,
		LuaRequestBudgetMs:    100,
		LuaReclassifyBudgetMs: 50,
		ParkDeadLetterAfter:   10,
		DedupMaxIdentities:    8_000_000,
		DedupMaxPerQueue:      2_000_000,
		Limits:                DefaultQueueLimits(),
	}
}

// configKey is a runtime config key the broker understands: it validates values and applies them.
type configKey struct {
	doc   string
	get   func(d *Defaults) string
	apply func(d *Defaults, v string) error
}

func uintKey(doc string, min, max uint64, field func(d *Defaults) *uint64) configKey {
	return configKey{
		doc: doc,
		get: func(d *Defaults) string { return strconv.FormatUint(*field(d), 10) },
		apply: func(d *Defaults, v string) error {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil || n < min || n > max {
				return fmt.Errorf("want an integer from %d to %d", min, max)
			}
			*field(d) = n
			return nil
		},
	}
}

func uint32Key(doc string, min uint32, field func(d *Defaults) *uint32) configKey {
	return configKey{
		doc: doc,
		get: func(d *Defaults) string { return strconv.FormatUint(uint64(*field(d)), 10) },
		apply: func(d *Defaults, v string) error {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32)
			if err != nil || uint32(n) < min {
				return fmt.Errorf("want an integer from %d to %d", min, uint32(1<<32-1))
			}
			*field(d) = uint32(n)
			return nil
		},
	}
}

const day = 24 * 60 * 60 * 1000

// knownConfig lists the keys the broker validates and applies: the one registry of them (a
// feature that adds a key adds it here; SetConfig's refusal, ListConfig and the docs follow).
// Under the broker's own namespaces (brokerNamespaces) only these keys are accepted, and keys
// under lua.env. (hooks.EnvPrefix), which scripts read with fila.get; any other key outside
// them is stored as given.
var knownConfig = map[string]configKey{
	"defaults.visibility_timeout_ms": uintKey("lease duration of queues created with 0", 1, 12*60*60*1000, func(d *Defaults) *uint64 { return &d.VisibilityTimeoutMs }),
	"defaults.max_attempts":          uint32Key("deliveries before dead-lettering", 1, func(d *Defaults) *uint32 { return &d.MaxAttempts }),
	"defaults.backoff": {
		doc: "retry backoff: none, fixed or exponential",
		get: func(d *Defaults) string { return d.Backoff.String() },
		apply: func(d *Defaults, v string) error {
			var b engine.Backoff
			if err := b.UnmarshalText([]byte(strings.TrimSpace(v))); err != nil || b == engine.BackoffDefault {
				return fmt.Errorf("want none, fixed or exponential")
			}
			d.Backoff = b
			return nil
		},
	},
	"defaults.backoff_initial_ms":     uintKey("first retry delay", 1, day, func(d *Defaults) *uint64 { return &d.BackoffInitialMs }),
	"defaults.backoff_max_ms":         uintKey("largest exponential retry delay", 1, 7*day, func(d *Defaults) *uint64 { return &d.BackoffMaxMs }),
	"defaults.dedup_window_ms":        uintKey("how long deduplication identities are remembered", 1, MaxDedupWindowMs, func(d *Defaults) *uint64 { return &d.DedupWindowMs }),
	"defaults.park_dead_letter_after": uint32Key("failed reclassification tries before a parked message is dead-lettered (0: never)", 0, func(d *Defaults) *uint32 { return &d.ParkDeadLetterAfter }),
	"defaults.reclaim_grace_ms":       uintKey("fast queues' reclaim grace after a restart", 1, day, func(d *Defaults) *uint64 { return &d.ReclaimGraceMs }),
	"scheduler.quantum":               uint32Key("DRR quantum: deficit per weight unit per round", 1, func(d *Defaults) *uint32 { return &d.Quantum }),
	"lua.timeout_ms":                  uintKey("time budget of one script call", 1, 10_000, func(d *Defaults) *uint64 { return &d.LuaTimeoutMs }),
	"lua.call_stack_size":             uintKey("nested calls a script may make", 16, 100_000, func(d *Defaults) *uint64 { return &d.LuaCallStackSize }),
	"lua.registry_max_size":           uintKey("values a script's stack may hold", 1024, 16<<20, func(d *Defaults) *uint64 { return &d.LuaRegistryMaxSize }),
	"lua.max_string_bytes":            uintKey("longest string a library function (string.rep, format, gsub, table.concat, ...) may make", 1024, 1<<30, func(d *Defaults) *uint64 { return &d.LuaMaxStringBytes }),
	"lua.max_call_bytes":              uintKey("bytes the library functions may allocate in one script call, together", 64<<10, 1<<30, func(d *Defaults) *uint64 { return &d.LuaMaxCallBytes }),
	"lua.reclassify_interval_ms":      uintKey("how often parked messages are reclassified; a message's first retry waits this long", 1, day, func(d *Defaults) *uint64 { return &d.ReclassifyMs }),
	"lua.reclassify_max_interval_ms": uintKey("longest wait between two tries of one parked message (the wait doubles from lua.reclassify_interval_ms)", 1, 7*day,
		func(d *Defaults) *uint64 { return &d.ReclassifyMaxMs }),
	"lua.request_budget_ms": uintKey("on_enqueue time a queue spends on the Enqueue requests it runs together; later messages are refused ChannelFull (parked on a parking queue)", 1, 60_000,
		func(d *Defaults) *uint64 { return &d.LuaRequestBudgetMs }),
	"lua.reclassify_budget_ms": uintKey("time one reclassification pass may spend; the next pass goes on where it stopped", 1, 60_000,
		func(d *Defaults) *uint64 { return &d.LuaReclassifyBudgetMs }),
	"dedup.max_identities": uintKey("deduplication identities the node remembers; past it a message with an identity is refused ChannelFull", 1, 1<<40,
		func(d *Defaults) *uint64 { return &d.DedupMaxIdentities }),
	"defaults.max_depth": uintKey("messages a queue may hold (ready, delayed, in flight and parked; not its dead-letter queue); past it defaults.depth_policy applies (0: no limit)", 0, 1<<40,
		func(d *Defaults) *uint64 { return &d.Limits.MaxDepth }),
	"defaults.depth_policy": policyKey("what a full queue does with a new message: reject (ChannelFull) or dead_letter_oldest",
		func(d *Defaults) *DepthPolicy { return &d.Limits.Policy }),
	"defaults.retention_ms": uintKey("how long a queue keeps a message after accepting it; older ones are dead-lettered as expired (0: for ever)", 0, MaxRetentionMs,
		func(d *Defaults) *uint64 { return &d.Limits.RetentionMs }),
	"defaults.max_delay_ms": uintKey("longest delay_ms an Enqueue may ask for; a longer one is refused InvalidConfigValue", 1, MaxDelayMs,
		func(d *Defaults) *uint64 { return &d.Limits.MaxDelayMs }),
	"dedup.max_identities_per_queue": uintKey("deduplication identities one queue remembers; past it a message with an identity is refused ChannelFull", 1, 1<<40,
		func(d *Defaults) *uint64 { return &d.DedupMaxPerQueue }),
}

// MaxDedupWindowMs is the longest deduplication window (7 days): CreateQueue, UpdateQueue and
// defaults.dedup_window_ms refuse a longer one.
const MaxDedupWindowMs = 7 * day

// knownKeys returns the known keys, sorted.
func knownKeys() []string {
	keys := make([]string, 0, len(knownConfig))
	for k := range knownConfig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// currentDefaults returns the broker defaults under the lock.
func (b *Broker) currentDefaults() Defaults {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.defaults
}

// brokerNamespaces are the key prefixes the broker reserves: SetConfig refuses a key under them
// that is not in knownConfig, so a typo does not pass for a setting, except under
// hooks.EnvPrefix (lua.env.): the values an operator publishes to scripts (fila.get), and the
// per-queue limits queue.<name>.<setting> (queuelimits.go).
var brokerNamespaces = []string{"defaults.", "scheduler.", "lua.", "dedup.", queueKeyPrefix}

// unknownKeyError reports a key under a broker namespace that the broker does not know, with
// the valid keys of that namespace; nil for a known key or a key outside the namespaces.
func unknownKeyError(k string) *Error {
	if _, known := knownConfig[k]; known || strings.HasPrefix(k, hooks.EnvPrefix) {
		return nil
	}
	if strings.HasPrefix(k, queueKeyPrefix) {
		return queueKeyError(k, "") // the value is checked with queueKeyError(k, value)
	}
	for _, ns := range brokerNamespaces {
		if !strings.HasPrefix(k, ns) {
			continue
		}
		var valid []string
		for _, key := range knownKeys() {
			if strings.HasPrefix(key, ns) {
				valid = append(valid, key)
			}
		}
		return errorf(CodeInvalidConfigValue, "unknown config key %q: the keys under %s are %s", k, ns, strings.Join(valid, ", "))
	}
	return nil
}
