// Package broker is Fila's queue service: the layer between the FIBP transport and the pure
// engine. It owns one actor per queue (see actor.go), the storage, the runtime configuration and
// the message IDs. Its methods take decoded FIBP requests and produce FIBP results; the transport
// only frames them.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

const dlqSuffix = ".dlq"

// Sink carries frames to one consumer's connection. The transport implements it.
type Sink interface {
	// Send queues an encoded frame without blocking. onWritten, when not nil, is called once the
	// frame has reached the socket. Send returns false when the connection is gone or too far
	// behind; the subscription then ends.
	Send(frame []byte, onWritten func()) bool
}

// Events receives broker events (Rift publishes them on rift.events.…). Methods must not block.
type Events interface {
	QueueCreated(queue string)
	QueueDeleted(queue string)
	DeadLettered(queue string, id engine.MsgID)
}

type noEvents struct{}

func (noEvents) QueueCreated(string)               {}
func (noEvents) QueueDeleted(string)               {}
func (noEvents) DeadLettered(string, engine.MsgID) {}

// Options configures a Broker. Zero fields take the defaults shown.
type Options struct {
	DataDir string // required
	// Sync makes every commit fsync before it is acknowledged (default true via DefaultOptions).
	Sync bool
	// InboxSize bounds each queue's request inbox; a full inbox answers ChannelFull (4096).
	InboxSize int
	// BodyCacheBytes bounds the memory all queues together spend on recent message bodies (64 MiB).
	BodyCacheBytes int
	// RetryAfterMs is the back-off suggested with ChannelFull (100).
	RetryAfterMs int
	// SettleSyncDelay is how long a round holding only acks, nacks and lease extensions waits
	// for a later round's fsync to cover it before it fsyncs on its own (500µs; negative: at
	// once). Consumers rarely wait on those answers, and an fsync started for them would delay
	// the next enqueue's by a whole fsync.
	SettleSyncDelay time.Duration
	Clock           func() time.Time      // time.Now
	Logger          *slog.Logger          // slog.Default()
	Registry        prometheus.Registerer // metrics are registered here when not nil
	Events          Events
	Storage         storage.Options
}

// DefaultSettleSyncDelay is Options.SettleSyncDelay's default.
const DefaultSettleSyncDelay = 500 * time.Microsecond

// DefaultOptions returns the production defaults for a data directory.
func DefaultOptions(dataDir string) Options {
	return Options{DataDir: dataDir, Sync: true}
}

// Broker is the queue service. Its methods are safe for concurrent use.
type Broker struct {
	opts    Options
	db      *storage.DB
	log     *slog.Logger
	clock   func() time.Time
	ids     *idGen
	metrics *metrics
	events  Events

	cacheBytes atomic.Int64 // bytes in every queue's body cache

	adminMu  sync.Mutex // serializes queue creation, deletion and config writes
	mu       sync.RWMutex
	actors   map[string]*actor
	config   map[string]string // runtime config, including the known keys below
	defaults Defaults
	closed   bool
}

// ErrClosed is returned by calls on a closed broker.
var ErrClosed = errors.New("broker: closed")

// Open opens the store in o.DataDir and recovers every queue.
func Open(o Options) (*Broker, error) {
	if o.DataDir == "" {
		return nil, errors.New("broker: no data directory")
	}
	if o.InboxSize <= 0 {
		o.InboxSize = 4096
	}
	if o.BodyCacheBytes <= 0 {
		o.BodyCacheBytes = 64 << 20
	}
	if o.RetryAfterMs <= 0 {
		o.RetryAfterMs = 100
	}
	if o.SettleSyncDelay == 0 {
		o.SettleSyncDelay = DefaultSettleSyncDelay
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Events == nil {
		o.Events = noEvents{}
	}
	db, err := storage.Open(o.DataDir, o.Storage)
	if err != nil {
		return nil, err
	}
	b := &Broker{
		opts: o, db: db, log: o.Logger, clock: o.Clock, ids: newIDGen(), events: o.Events,
		metrics: newMetrics(o.Registry), actors: map[string]*actor{}, defaults: DefaultDefaults(),
	}
	if err := b.recover(); err != nil {
		db.Close()
		return nil, err
	}
	return b, nil
}

// recover loads the runtime config and every queue with its messages.
func (b *Broker) recover() error {
	cfg, err := b.db.Configs()
	if err != nil {
		return fmt.Errorf("broker: recover config: %w", err)
	}
	b.config = cfg
	for k, v := range cfg {
		if key, ok := knownConfig[k]; ok {
			if err := key.apply(&b.defaults, v); err != nil {
				b.log.Warn("ignoring a stored config value", "key", k, "value", v, "err", err)
			}
		}
	}
	defs, err := b.db.Queues()
	if err != nil {
		return fmt.Errorf("broker: recover queues: %w", err)
	}
	start, total := time.Now(), 0
	for _, def := range defs {
		a := newActor(b, def)
		if err := a.recover(); err != nil {
			return fmt.Errorf("broker: recover queue %q: %w", def.Name, err)
		}
		total += a.eng.Len()
		b.actors[def.Name] = a
		go a.run()
	}
	b.log.Info("recovered", "queues", len(defs), "messages", total, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// Close stops every queue and closes the store. Leases stay stored and expire normally.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	actors := make([]*actor, 0, len(b.actors))
	for _, a := range b.actors {
		actors = append(actors, a)
	}
	b.mu.Unlock()
	for _, a := range actors {
		close(a.stop)
	}
	for _, a := range actors {
		<-a.done
	}
	return b.db.Close()
}

// actor returns the actor of a queue, or nil.
func (b *Broker) actor(name string) *actor {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.actors[name]
}

// queueNames returns every queue name, sorted.
func (b *Broker) queueNames() []string {
	b.mu.RLock()
	defer b.mu.RUnlock()
	names := make([]string, 0, len(b.actors))
	for n := range b.actors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// engineConfig resolves a queue definition's zero fields against the broker defaults.
func (b *Broker) engineConfig(def *store.QueueRecord) engine.Config {
	b.mu.RLock()
	d := b.defaults
	b.mu.RUnlock()
	c := engine.Config{
		VisibilityTimeoutMs: def.VisibilityTimeoutMs,
		MaxAttempts:         def.MaxAttempts,
		Backoff:             engine.Backoff(def.Backoff),
		BackoffInitialMs:    def.BackoffInitialMs,
		BackoffMaxMs:        def.BackoffMaxMs,
		Quantum:             d.Quantum,
	}
	if c.VisibilityTimeoutMs == 0 {
		c.VisibilityTimeoutMs = d.VisibilityTimeoutMs
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.Backoff == engine.BackoffDefault {
		c.Backoff = d.Backoff
	}
	if c.BackoffInitialMs == 0 {
		c.BackoffInitialMs = d.BackoffInitialMs
	}
	if c.BackoffMaxMs == 0 {
		c.BackoffMaxMs = d.BackoffMaxMs
	}
	if c.Backoff == engine.BackoffExponential && c.BackoffMaxMs < c.BackoffInitialMs {
		c.BackoffMaxMs = c.BackoffInitialMs
	}
	return c
}

// validName reports whether a queue name is acceptable: 1..255 bytes, no control characters,
// no whitespace.
func validName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f })
}
