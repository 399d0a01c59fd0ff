// Package broker is Fila's queue service (server/service's Service): the layer between the pure
// engine and what serves clients — the FIBP session, and fila-server's HTTP admin API (browsing,
// deleting and purging messages, backups). It runs this node's part of the cluster: the meta
// group, whose state (server/meta) every node applies and whose changes the node registry
// (server/registry) turns into local replicas of queue groups; and one actor per local replica
// (actor.go), which runs the group's leader runtime while this node leads it and follows
// otherwise (roles.go). It also owns the storage, the runtime configuration's effects and the
// message IDs. Its API speaks domain types (types.go, admintypes.go, browse.go) and hands
// deliveries to a Sink; it knows nothing of FIBP frames or HTTP, which server/session and
// fila-server convert to and from these types. docs/cluster.md draws the packages and how a
// replica changes role.
package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/lua/hooks"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/meta"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
	"github.com/filamq/fila/server/raftstore"
	"github.com/filamq/fila/server/registry"
	"github.com/filamq/fila/server/storage"
	"github.com/filamq/fila/server/throttle"
)

const dlqSuffix = ".dlq"

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
	// Sync makes every append to a queue's log fsync before it is acknowledged (default true via
	// DefaultOptions).
	Sync bool
	// InboxSize bounds each queue's request inbox; a full inbox answers ChannelFull (4096).
	InboxSize int
	// MaxQueues bounds the queues of the node, dead-letter queues not counted: CreateQueue
	// beyond it answers ChannelFull with a message saying so (DefaultMaxQueues).
	MaxQueues int
	// ThrottleMemory bounds the state of every throttle bucket together, shared fairly between
	// the holders of throttles and their throttles; past it the throttles over their shares give
	// way, or a delivery that needs a new bucket waits (throttle.DefaultMaxMemory when 0).
	ThrottleMemory int64
	// IdleTimeout is how long a queue group goes without requests before it hibernates: its
	// goroutines and Raft group stop until the next request or due change (hibernate.go).
	// Zero means DefaultIdleTimeout; negative never hibernates.
	IdleTimeout time.Duration
	// BodyCacheBytes bounds the memory all queues together spend on recent message bodies (64 MiB).
	BodyCacheBytes int
	// RetryAfterMs is the back-off suggested with ChannelFull (100).
	RetryAfterMs int
	Clock        func() time.Time // time.Now
	// NewTimer makes the timer each queue arms at its next self-driven change (a delay or a lease
	// ending): time.NewTimer by default; tests give timers that follow their fake Clock.
	NewTimer func(d time.Duration) Timer
	Logger   *slog.Logger          // slog.Default()
	Registry prometheus.Registerer // the server-wide metrics are registered here when not nil; the per-queue ones are NewCollector's
	Events   Events
	Storage  storage.Options
	// Store replaces the Pebble store in DataDir (tests: storage.Mem, whose DataDir is unused).
	Store storage.Store
	// MemoryBudget is the server's memory budget (memory_budget), which the deduplication
	// identities the queues remember are counted in (dedupbudget.go); nil counts nothing.
	MemoryBudget *membudget.Budget
	// Allocator gives the queues' big buffers memory outside the Go heap (engine.Config.Alloc;
	// fila-server's is an offheap.Allocator, whose lifetime is its); nil keeps them on the Go heap.
	Allocator engine.Allocator
	// BootstrapAPIKey, when set, turns API-key authentication on with this superadmin secret
	// (at least 32 characters; see keys.go). It lives in configuration, never in the log.
	BootstrapAPIKey string
	// Cluster places the node in a cluster (cluster.go); the zero value is a single node.
	Cluster Cluster
}

// Timer is a queue's wake-up timer, as Options.NewTimer makes it. Reset and Stop follow
// time.Timer (Go 1.23 semantics: no value is left in C after either).
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

func newRealTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// DefaultOptions returns the production defaults for a data directory.
func DefaultOptions(dataDir string) Options {
	return Options{DataDir: dataDir, Sync: true}
}

// Broker is the queue service. Its methods are safe for concurrent use.
type Broker struct {
	opts    Options
	db      storage.Store
	layout  storage.Layout // db's, when it has one: told each group's stored messages after a round
	log     *slog.Logger
	clock   func() time.Time
	ids     *idGen
	metrics *metrics
	events  Events
	hooks   *hooks.Runtime // runs every queue's Lua hooks

	meta      *meta.FSM        // this node's copy of the meta state (meta.go); replaced under b.mu with metaGroup
	metaHooks *metaHooks       // meta's hooks into the broker (meta.go)
	peers     peers            // the members' addresses told to the network (join.go)
	metaGroup *raftgroup.Group // nil after a failed write stopped it (storagehealth.go); changed under adminMu and mu
	metaIndex *atomic.Uint64   // the last entry the meta state machine applied (restart.go)
	reg       *registry.Registry[*actor]
	fwd       *forwarder    // hands requests for queues other nodes lead to them (forward.go); nil on a single node
	drain     *drainer      // hands this node's leaderships away while it drains (drain.go); nil on a single node
	rebal     *rebalancer   // evens out the queue groups' leaderships while this node leads the meta group (rebalance.go); nil on a single node
	members   *memberWorker // carries out this node's share of removals (membership.go); nil on a single node

	stopWatch, watchDone chan struct{} // watchStorage
	storageStuck         chan struct{} // closed by watchStorage once the store is stuck
	metaStopped          atomic.Bool   // the meta group was stopped after a failed write (storagehealth.go)

	cacheBytes atomic.Int64 // bytes in every queue's body cache
	dedup      dedupBudget  // the identities every queue remembers (dedupbudget.go)
	queueRates rateSamples  // the queue list's rates over the last minute (keystats.go)

	started  int64        // Unix ms of the start
	sleepers *sleepers    // wakes hibernating groups when something comes due
	awake    atomic.Int64 // actors whose goroutine runs

	throttles    *throttle.Registry // every throttle declared by a live subscription, shared by the actors
	throttleFile throttleState      // what the data directory's throttles file says (throttle_restart.go)
	ct           *clusterThrottles  // throttles counted by their owner node (throttlecluster.go); nil on a single node

	adminMu sync.Mutex // serializes config and key writes, and the meta group's reopening
	// undropped names the deleted queue groups whose data could not be removed (under mu).
	undropped map[string]bool
	mu        sync.RWMutex
	config    map[string]string        // runtime config, including the known keys below
	limits    map[string]limitOverride // the queue.<name>.* keys of config, parsed (queuelimits.go)
	defaults  Defaults
	closed    bool
}

// queueRef is where a queue lives: its group's actor and its lane there.
type queueRef struct {
	a    *actor
	lane queuegroup.Lane
}

// name is the queue's name (fixed for the group's life, so any goroutine may read it).
func (r queueRef) name() string { return r.a.lanes[r.lane].name }

// ErrClosed is returned by calls on a closed broker.
var ErrClosed = errors.New("broker: closed")

// Open opens the store in o.DataDir, starts the meta group and every queue group, and replays
// their logs.
func Open(o Options) (*Broker, error) {
	if o.DataDir == "" && o.Store == nil {
		return nil, errors.New("broker: no data directory")
	}
	if o.InboxSize <= 0 {
		o.InboxSize = 4096
	}
	if o.MaxQueues <= 0 {
		o.MaxQueues = DefaultMaxQueues
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.BodyCacheBytes <= 0 {
		o.BodyCacheBytes = 64 << 20
	}
	if o.RetryAfterMs <= 0 {
		o.RetryAfterMs = 100
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.NewTimer == nil {
		o.NewTimer = newRealTimer
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Events == nil {
		o.Events = noEvents{}
	}
	db := o.Store
	if db == nil {
		o.Storage.NoSync = !o.Sync
		if o.Storage.Logger == nil {
			o.Storage.Logger = o.Logger
		}
		if err := storage.CheckWritable(o.DataDir); err != nil {
			return nil, err
		}
		d, err := storage.Open(o.DataDir, o.Storage)
		if err != nil {
			return nil, err
		}
		db = d
	}
	b := &Broker{
		opts: o, db: db, log: o.Logger, clock: o.Clock, ids: newIDGen(), events: o.Events,
		metrics: newMetrics(o.Registry), defaults: DefaultDefaults(),
		throttles: throttle.NewRegistry(o.ThrottleMemory),
		stopWatch: make(chan struct{}), watchDone: make(chan struct{}), storageStuck: make(chan struct{}),
		undropped: map[string]bool{},
		started:   o.Clock().UnixMilli(), sleepers: newSleepers(o.Clock),
	}
	b.layout, _ = db.(storage.Layout)
	if b.clustered() {
		b.fwd = newForwarder(b)
		b.drain = newDrainer(b)
		b.rebal = newRebalancer(b)
		b.members = newMemberWorker(b)
		b.ct = newClusterThrottles(b)
	}
	b.dedup.open(o.MemoryBudget)
	b.openThrottles()
	go b.sleepers.run(o.NewTimer)
	b.hooks = hooks.NewRuntime(b.defaults.luaLimits(), b.configValue)
	b.reg = registry.New[*actor](b.nodeID(), replicaHost{b}, catalogSource{b}, o.Logger)
	f, h, err := b.newMeta()
	if err != nil {
		b.sleepers.close()
		db.Close()
		return nil, err
	}
	b.meta, b.metaHooks = f, h
	if err := b.recover(); err != nil {
		b.shutdownGroups()
		b.sleepers.close()
		db.Close()
		return nil, err
	}
	if o.Registry != nil {
		o.Registry.MustRegister(b.storageMetrics()...)
		o.Registry.MustRegister(b.dedupGauge())
		if b.rebal != nil {
			o.Registry.MustRegister(b.rebal.moves)
		}
	}
	go b.watchStorage()
	if b.drain != nil {
		go b.drain.run()
		b.drain.poke() // a node restarted while draining hands away what it was elected to lead
	}
	if b.rebal != nil {
		go b.rebal.run()
	}
	if b.ct != nil {
		go b.ct.run() // throttleannounce.go
	}
	if b.members != nil {
		go b.members.run()
	}
	return b, nil
}

// openGroup starts the Raft group of queue name on fsm; replicas are its members when it has no
// state yet (none: this node alone).
func (b *Broker) openGroup(name string, fsm raft.FSM, replicas []meta.NodeID) (*raftgroup.Group, error) {
	logs, snaps, err := b.db.QueueLog(name, queuegroup.Bodies{})
	if err != nil {
		return nil, err
	}
	if q, ok := fsm.(*queueFSM); ok {
		snaps = q.attach(logs, snaps)
	}
	// A replica placed by a removal starts empty and is sent its state (membership.go).
	return b.startGroup(name, logs, snaps, fsm, replicas, b.joiningHere(name))
}

// startGroup starts a Raft group on this node's stores for it.
func (b *Broker) startGroup(name string, logs raftstore.LogStableStore, snaps raft.SnapshotStore, fsm raft.FSM,
	replicas []meta.NodeID, join bool) (*raftgroup.Group, error) {
	c := raftgroup.Config{Store: logs, Snapshots: snaps, Logger: b.raftLogger(), LocalID: raft.ServerID(b.nodeID()),
		Peers: b.groupPeers(name, replicas), HeartbeatTimeout: b.opts.Cluster.HeartbeatTimeout,
		SnapshotCheck: followerSnapshotCheck, Join: join, CommitTimeout: commitTimeoutOf(name),
		DeferElection: !b.leadsFirst(name, replicas)}
	if net := b.opts.Cluster.Network; net != nil {
		t, err := net.Transport(name)
		if err != nil {
			return nil, err
		}
		c.Transport = t
	}
	return raftgroup.Open(c, fsm)
}

func (b *Broker) raftLogger() hclog.Logger {
	// Warnings are routine here (every group "times out" into its first election at once).
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Error, Output: os.Stderr})
}

// recover starts the meta group, then every queue group it assigns this node that has no current
// stored summary or something due (the others are registered asleep: hibernate.go), hands them
// to the node registry, and deletes the groups of queues whose deletion a crash interrupted.
func (b *Broker) recover() error {
	g, err := b.openMeta(b.meta)
	if err != nil {
		return fmt.Errorf("broker: meta group: %w", err)
	}
	b.setMetaGroup(g)
	b.awaitMetaCurrent(g) // restart.go
	if g.Leader() {
		if err := b.recordMembers(); err != nil {
			b.log.Warn("recording the cluster's members failed", "err", err)
		}
	}
	cat := b.meta.Catalog()
	b.config = cat.Config()
	for k, v := range b.config {
		if key, ok := knownConfig[k]; ok {
			if err := key.apply(&b.defaults, v); err != nil {
				b.log.Warn("ignoring a stored config value", "key", k, "value", v, "err", err)
			}
		}
	}
	b.limits = limitOverrides(b.config)
	b.hooks.SetLimits(b.defaults.luaLimits())
	start, total := time.Now(), 0
	assigned := cat.AssignmentsFor(b.nodeID())
	actors := make([]*actor, len(assigned))
	for i, asg := range assigned {
		actors[i] = newActor(b, asg.Queue, asg.DeadLetter)
		actors[i].replicas = asg.Replicas
	}
	opened, asleep, err := b.sleepAll(actors, b.clock().UnixMilli())
	if err != nil {
		return err
	}
	assigned, actors, opened, later := b.openLater(assigned, actors, opened) // restart.go
	if err := openAll(opened); err != nil {
		return err
	}
	for _, a := range opened {
		if a.leading {
			total += a.st.Lane(0).Len() + a.st.Lane(1).Len()
		}
		a.start()
	}
	b.reg.Start(assigned, actors)
	b.metaHooks.live.Store(true)
	if b.opts.Cluster.Network != nil {
		// A cluster node's meta state may still be catching up (it follows a leader whose log
		// it has not all applied yet): what it applied before the hooks went live is reconciled
		// now, and nothing is deleted as an orphan on a catalog that may lack the group.
		for _, a := range b.catalog().Assignments() {
			b.reg.Assign(a)
		}
	} else if err := b.dropOrphans(cat); err != nil {
		return err
	}
	b.log.Info("recovered", "queues", len(actors)+later, "asleep", asleep, "opened_later", later, "messages_opened", total,
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// openMeta starts the meta group on fsm and waits until its role is known (a single node: until
// it leads); a cluster's leader records the founding members.
func (b *Broker) openMeta(fsm *meta.FSM) (*raftgroup.Group, error) {
	logs, snaps, err := b.db.MetaLog()
	if err != nil {
		return nil, err
	}
	var members []meta.NodeID
	for _, n := range b.opts.Cluster.Members {
		members = append(members, n.ID)
	}
	// A node that joined starts its member of the meta group empty; the leader sends it the log
	// (join.go).
	g, err := b.startGroup(MetaGroup, logs, snaps, b.watchMetaApplied(b.metaFSM(fsm), snaps), members, b.joined())
	if err != nil {
		return nil, err
	}
	if _, err := g.AwaitRole(leadTimeout); err != nil {
		_ = g.Shutdown()
		return nil, err
	}
	if b.clustered() {
		// A follower of the meta group snapshots by itself, as a queue group's does: nobody
		// else would truncate its log, which every admin change lengthens (and every start
		// replays). Its leader snapshots where proposeMeta chooses too.
		if err := g.AutoSnapshot(followerSnapshotEntries); err != nil {
			_ = g.Shutdown()
			return nil, err
		}
	}
	return g, nil
}

// eachAtOnce calls fn(i) for every i below n, at most limit calls at a time, and returns their
// errors by i.
func eachAtOnce(n, limit int, fn func(i int) error) []error {
	sem := make(chan struct{}, limit)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fn(i)
		})
	}
	wg.Wait()
	return errs
}

// openAll opens the groups of actors, several at once.
func openAll(actors []*actor) error {
	errs := eachAtOnce(len(actors), 16, func(i int) error {
		if err := actors[i].open(); err != nil {
			return fmt.Errorf("broker: recover queue %q: %w", actors[i].name, err)
		}
		return nil
	})
	for i, err := range errs {
		if err == nil && actors[i].g != nil {
			continue
		}
		for _, a := range actors {
			if a.g != nil {
				_ = a.g.Shutdown()
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// dropOrphans deletes the stored groups the meta state no longer assigns this node (a crash
// between a DeleteQueue's commit and the removal of its data).
func (b *Broker) dropOrphans(cat *meta.Catalog) error {
	stored, err := b.db.Queues()
	if err != nil {
		return err
	}
	for _, name := range stored {
		if a, ok := cat.Assignment(name); ok && a.Name() == name && a.Has(b.nodeID()) {
			continue
		}
		b.log.Info("removing the data of a deleted queue", "queue", name)
		if err := b.dropData(name); err != nil {
			return err
		}
	}
	return nil
}

// dropData deletes a stopped queue group's log, bodies and snapshots.
func (b *Broker) dropData(name string) error { return b.db.DropQueue(name) }

// proposeMeta commits meta commands as one entry and waits until they are applied here. The
// caller holds adminMu. A node that does not lead the meta group hands the entry to the one that
// does (Network.ProposeMeta) and waits until it has applied the entry itself.
func (b *Broker) proposeMeta(cmds ...queuelog.Frame) error {
	applied, err := b.proposeMetaThen(cmds...)
	if err != nil {
		return err
	}
	return applied()
}

// proposeMetaThen is proposeMeta in two steps: it commits the commands, under adminMu, and
// returns the wait until this node has applied them, which the caller may run after releasing
// adminMu. On the meta leader the commit is the wait (it applied the entry when its proposal
// returns); a follower waits for its copy of the meta log, a commit-index round later, and
// creations through a follower, one at a time, waited that long each (12 queues a second).
func (b *Broker) proposeMetaThen(cmds ...queuelog.Frame) (applied func() error, err error) {
	none := func() error { return nil }
	g, err := b.metaGroupForWrite()
	if err != nil {
		return nil, err
	}
	var entry []byte
	for _, c := range cmds {
		entry = queuelog.AppendFrame(entry, c)
	}
	if net := b.opts.Cluster.Network; net != nil && !g.Leader() {
		leader := g.LeaderID()
		if leader == "" {
			return nil, errNoMetaLeader
		}
		index, err := net.ProposeMeta(meta.NodeID(leader), entry)
		if err != nil {
			return nil, err
		}
		return func() error { return b.awaitMetaApplied(g, index) }, nil
	}
	return none, b.proposeHere(g, entry)
}

// proposeHere commits entry through g, which this node leads, and snapshots the meta log when it
// has grown long.
func (b *Broker) proposeHere(g *raftgroup.Group, entry []byte) error {
	f := g.Propose(entry)
	if err := f.Error(); err != nil {
		if !leadershipLost(err) {
			b.metaFailed()
		}
		return err
	}
	if err, ok := f.Response().(error); ok {
		return err
	}
	if first, last := g.Stats(); last-first > snapshotEntries {
		if err := g.Snapshot(); err != nil {
			b.log.Warn("meta snapshot failed", "err", err)
		}
	}
	return nil
}

// Close stops every queue and closes the store. Leases stay in the logs and expire normally.
// When the store is stuck, or gets stuck meanwhile, Close returns ErrStorageStuck without
// waiting for the queues whose writes are blocked inside it (they never return): the process
// must then exit, and its next start replays the log.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.stopWatch)
	<-b.watchDone
	halted := make(chan struct{})
	go func() {
		b.shutdownGroups()
		close(halted)
	}()
	if err := b.awaitUnlessStuck(halted); err != nil {
		return err
	}
	b.saveThrottles() // the queues have stopped: no delivery is counted any more
	b.sleepers.close()
	b.dedup.close()
	return b.db.Close()
}

// ErrStorageStuck is what Close returns when the store is stuck (StorageStuck).
var ErrStorageStuck = errors.New("broker: the store is stuck; the queues whose writes are blocked in it were left running")

// awaitUnlessStuck waits until done is closed, or returns ErrStorageStuck once the store is stuck.
func (b *Broker) awaitUnlessStuck(done <-chan struct{}) error {
	for {
		h := b.db.Health()
		if h.Stuck {
			return ErrStorageStuck
		}
		select {
		case <-done:
			return nil
		case <-h.Changed:
		}
	}
}

// shutdownGroups stops the registry, every actor and the meta group.
func (b *Broker) shutdownGroups() {
	replicas, _ := b.reg.Close()
	actors := make([]*actor, 0, len(replicas))
	for _, a := range replicas {
		actors = append(actors, a)
	}
	for _, a := range actors {
		a.halt()
	}
	for _, a := range actors {
		<-a.done
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if g := b.metaGroupNow(); g != nil {
		_ = g.Shutdown()
		b.setMetaGroup(nil)
	}
}

// lookup returns where a queue lives (a nil actor when this node has no replica of it).
func (b *Broker) lookup(name string) queueRef {
	ref, ok := b.reg.Lookup(name)
	if !ok {
		return queueRef{}
	}
	r := queueRef{a: ref.Replica, lane: queuegroup.LaneQueue}
	if ref.DeadLetter {
		r.lane = queuegroup.LaneDeadLetter
	}
	return r
}

// queueNames returns the name of every queue this node has a replica of, sorted.
func (b *Broker) queueNames() []string { return b.reg.Names() }

// actors returns the actor of every local replica.
func (b *Broker) actors() map[string]*actor { return b.reg.Replicas() }

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
		Alloc:               b.opts.Allocator,
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

// validName reports whether a new queue's name is acceptable: 1..255 bytes of UTF-8, no
// whitespace, no * (the ACL glob character), no control or bidi-override characters. Queues of an
// older store are not checked again: they load and work as before.
func validName(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	return utf8.ValidString(name) && !strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == '*' || auth.Unsafe(r) })
}
