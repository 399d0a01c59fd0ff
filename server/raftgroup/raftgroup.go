// Package raftgroup runs one Raft group of the node on hashicorp/raft: its log and stable store
// in the node's Pebble database (server/raftstore), its snapshots in a directory of its own, and
// its transport. A node without peers runs every group as a cluster of one, through the same
// code as a cluster: proposals are appended to the log, fsynced, committed and applied to the
// group's state machine before their futures return.
//
// # The caller's duties
//
//   - Give every group stores of its own (storage.Store hands them out).
//   - Propose only while this node leads: AwaitRole (or Lead, for a group of this node alone)
//     waits until the role is known and, leading, every entry already in the log is applied;
//     Watch tells when the role may have changed.
//   - Shut the group down before closing the database.
package raftgroup

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// Config describes one group.
type Config struct {
	// Store is the group's log and stable store (server/raftstore on the node's Pebble, or a
	// test twin); Snapshots its snapshot store.
	Store     raftstore.LogStableStore
	Snapshots raft.SnapshotStore
	// LocalID names this node in the group's configuration ("local" when empty).
	LocalID raft.ServerID
	// Transport carries the group's messages to its peers; nil means a node without peers
	// (an in-memory transport nobody else reaches).
	Transport raft.Transport
	// Logger receives hashicorp/raft's logs (warnings and errors only when nil).
	Logger hclog.Logger
	// Peers is the group's first configuration when it has no state yet: its voters, this node
	// among them. Empty means this node alone.
	Peers []raft.Server
	// SnapshotCheck is how often raft looks whether its own snapshot schedule (AutoSnapshot) is
	// due (defaultSnapshotCheck when 0).
	SnapshotCheck time.Duration
	// HeartbeatTimeout is how long a follower waits for its leader before it stands for election
	// (default 5 s: a single node has nobody to hear from, and its idle leader wakes once per
	// this interval). A group with a Transport paces heartbeats by role (pace.go): its leader
	// sends one every fifth to two fifths of this.
	HeartbeatTimeout time.Duration
	// CommitTimeout is how long a leader with nothing new to send waits before it tells each
	// follower its commit index again in an empty AppendEntries (raft's CommitTimeout; 50 ms when
	// 0). It is how soon a follower applies the last entries of a burst, and the steady traffic
	// of an awake group: one such request per follower every one to two of it.
	CommitTimeout time.Duration
	// DeferElection: a group that this Open bootstraps (no state yet) stands for election only
	// after deferTimeouts heartbeat timeouts instead of at once, leaving its first election to
	// the replica meant to lead it, which does not defer (and may need a second attempt when it
	// stood before the others had opened the group). A group with state elects at once whatever
	// this says: a restart or a wake wants a leader soon, wherever it lands.
	DeferElection bool
	// Join starts a group with no state yet empty, outside any configuration, instead of
	// bootstrapping it: this node's member was added by the group's leader (AddNonvoter), which
	// sends it the log or a snapshot.
	Join bool
}

// Timing of a group. A single node's lease and heartbeat checks have nothing to check, so they
// are kept rare: an idle leader wakes once per LeaderLeaseTimeout.
const (
	defaultHeartbeatTimeout = 5 * time.Second
	defaultSnapshotCheck    = 30 * time.Second
	deferTimeouts           = 4 // a deferred first election waits this many heartbeat timeouts
	electionTimeouts        = 2 // a candidate's election timeout, in heartbeat timeouts
	defaultCommitTimeout    = 50 * time.Millisecond
	never                   = 1 << 62 // a snapshot threshold no log reaches
	applyTimeout            = 0       // proposals wait for the log, not for a clock
	trailingLogs            = 64
	retainSnapshots         = 2
)

// Group is one running Raft group.
type Group struct {
	r     *raft.Raft
	store raftstore.LogStableStore
	cache *logCache // the latest entries of a group with peers (logcache.go); nil otherwise
	trans raft.Transport
	hb    time.Duration
	brk   *breaker // a log entry raft could not read (guard.go)
	id    raft.ServerID
	// unpace stops the heartbeat pacing by role (pace.go) of a group with peers; nil otherwise.
	unpace func()
}

// Err returns why the group broke (a log entry it could not read), or nil.
func (g *Group) Err() error { return g.brk.failure() }

// Open starts the group on fsm, restoring its latest snapshot. A group with no state yet is
// bootstrapped as a cluster of this node alone.
func Open(c Config, fsm raft.FSM) (*Group, error) {
	if c.LocalID == "" {
		c.LocalID = "local"
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Warn, Output: os.Stderr})
	}
	store, snaps := c.Store, c.Snapshots
	if store == nil || snaps == nil {
		return nil, errors.New("raftgroup: a group needs a log store and a snapshot store")
	}
	trans := c.Transport
	if trans == nil {
		_, trans = raft.NewInmemTransport(raft.ServerAddress(c.LocalID))
	}
	conf := config(c)
	if err := verifyCovered(store, snaps); err != nil {
		return nil, err
	}
	existing, err := raft.HasExistingState(store, store, snaps)
	if err != nil {
		return nil, fmt.Errorf("raftgroup: %w", err)
	}
	var hold time.Duration // a deferred election's wait
	if c.DeferElection && !existing && !c.Join {
		hold = deferTimeouts * conf.LeaderLeaseTimeout
		conf.HeartbeatTimeout, conf.ElectionTimeout = hold, hold // raft wants election ≥ heartbeat
	}
	if !existing && !c.Join {
		boot := raft.Configuration{Servers: c.Peers}
		if len(boot.Servers) == 0 {
			boot.Servers = []raft.Server{{ID: c.LocalID, Address: trans.LocalAddr()}}
		}
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, boot); err != nil {
			return nil, fmt.Errorf("raftgroup: bootstrap: %w", err)
		}
	}
	brk := &breaker{}
	var cache *logCache
	raftStore := store
	if c.Transport != nil {
		// A group with peers reads back every entry it stores (logcache.go); a single node's
		// group reads only what it replays at start-up.
		cache = newLogCache(store, logCacheEntries, logCacheBytes, nodeBudget)
		raftStore = cache
	}
	gs := newGuardStore(raftStore, brk)
	// NewRaft reads the log past the snapshot only for its configuration entries: light reads.
	// The goroutines it starts could read only as a follower (terms) until this node leads, an
	// election timeout later; the entries applied and sent to followers are read in full.
	gs.light.Store(true)
	r, err := newRaft(conf, guardFSM{fsm: fsm, b: brk}, gs, snaps, trans)
	gs.light.Store(false)
	if err != nil {
		return nil, fmt.Errorf("raftgroup: %w", err)
	}
	if err := brk.failure(); err != nil {
		// raft's restore read every entry past the snapshot, through the guard: one it could
		// not read stops the start.
		_ = r.Shutdown().Error()
		return nil, err
	}
	g := &Group{r: r, store: store, cache: cache, trans: trans, hb: conf.LeaderLeaseTimeout, brk: brk, id: c.LocalID}
	if hold == 0 {
		g.elect()
	}
	if c.Transport != nil {
		g.unpace = g.paceByRole(g.hb, hold)
	}
	return g, nil
}

// Verify reads every stored entry of a group's log once: raft panics on an entry it cannot read
// (its goroutine, the process with it), while this returns an error that says which entry and
// why (Pebble's errors name the damaged file). A start that does not open a group (it
// hibernates) verifies its log with it. Open needs no separate pass: raft's restore reads every
// entry past the snapshot through the guard (guard.go), and Open reads the few before it.
func Verify(store raftstore.LogStableStore) error { return verifyUpTo(store, math.MaxUint64) }

// verifyCovered reads the entries the latest snapshot covers, the ones raft's restore does not
// read (the log keeps trailingLogs of them behind a snapshot, for followers).
func verifyCovered(store raftstore.LogStableStore, snaps raft.SnapshotStore) error {
	metas, err := snaps.List()
	if err != nil || len(metas) == 0 {
		return nil // raft's restore reads the whole log (or fails on the snapshot store itself)
	}
	return verifyUpTo(store, metas[0].Index)
}

// verifyUpTo reads every stored entry of the log up to index upTo.
func verifyUpTo(store raftstore.LogStableStore, upTo uint64) error {
	first, err := store.FirstIndex()
	if err != nil {
		return err
	}
	last, err := store.LastIndex()
	if err != nil {
		return err
	}
	var l raft.Log
	for i := first; i != 0 && i <= min(last, upTo); i++ {
		if err := store.GetLog(i, &l); err != nil && !errors.Is(err, raft.ErrLogNotFound) {
			return fmt.Errorf("raftgroup: log entry %d cannot be read: %w", i, err)
		}
	}
	return nil
}

// newRaft is raft.NewRaft, with its panics (a log entry that cannot be read while it restores)
// returned as errors: a damaged store stops the group's start with an error, not the process.
func newRaft(conf *raft.Config, fsm raft.FSM, store raftstore.LogStableStore, snaps raft.SnapshotStore,
	trans raft.Transport) (r *raft.Raft, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("restoring the group: %v", p)
		}
	}()
	return raft.NewRaft(conf, fsm, store, store, snaps, trans)
}

func config(c Config) *raft.Config {
	hb := c.HeartbeatTimeout
	if hb == 0 {
		hb = defaultHeartbeatTimeout
	}
	conf := raft.DefaultConfig()
	conf.LocalID = c.LocalID
	conf.Logger = c.Logger
	conf.HeartbeatTimeout = 2 * hb // lowered to hb at once by elect
	conf.ElectionTimeout = electionTimeouts * hb
	conf.LeaderLeaseTimeout = hb
	conf.CommitTimeout = c.CommitTimeout
	if conf.CommitTimeout == 0 {
		conf.CommitTimeout = defaultCommitTimeout
	}
	conf.BatchApplyCh = true
	conf.MaxAppendEntries = 256
	// Snapshots are taken by the caller (Snapshot) at points it chooses, until it turns raft's
	// own schedule on (AutoSnapshot); raft looks every SnapshotCheck whether one is due.
	conf.SnapshotThreshold = never
	conf.SnapshotInterval = c.SnapshotCheck
	if conf.SnapshotInterval == 0 {
		conf.SnapshotInterval = defaultSnapshotCheck
	}
	conf.TrailingLogs = trailingLogs
	conf.NoSnapshotRestoreOnStart = false
	return conf
}

// elect makes the node stand for election at once instead of after a heartbeat timeout (a
// single node would otherwise wait one out at every start): lowering the heartbeat timeout to
// its configured value wakes the follower loop, which finds no leader contact and starts the
// election.
func (g *Group) elect() {
	rc := g.r.ReloadableConfig()
	rc.HeartbeatTimeout = g.hb
	_ = g.r.ReloadConfig(rc)
}

// Leader reports whether this node leads the group now.
func (g *Group) Leader() bool { return g.r.State() == raft.Leader }

// Term is the group's current Raft term.
func (g *Group) Term() uint64 { return g.r.CurrentTerm() }

// ErrShutdown is returned by a group that was shut down.
var ErrShutdown = raft.ErrRaftShutdown

// Lead waits until this node leads the group and has applied every entry in its log, at most
// timeout.
func (g *Group) Lead(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for g.r.State() != raft.Leader {
		if g.r.State() == raft.Shutdown {
			return ErrShutdown
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raftgroup: no leadership after %v", timeout)
		}
		select {
		case <-g.r.LeaderCh():
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := g.r.Barrier(time.Until(deadline)).Error(); err != nil {
		return fmt.Errorf("raftgroup: barrier: %w", err)
	}
	return g.Err()
}

// AwaitRole waits, at most timeout, until this node's role in the group is settled: it leads
// and has applied every entry in its log (true), or it follows a leader it knows (false). A
// group of this node alone always leads.
func (g *Group) AwaitRole(timeout time.Duration) (leader bool, err error) {
	deadline := time.Now().Add(timeout)
	alone := g.alone()
	for {
		switch g.r.State() {
		case raft.Leader:
			if err := g.Barrier(time.Until(deadline)); err != nil {
				if g.r.State() != raft.Leader {
					continue // deposed while waiting: look again
				}
				return false, err
			}
			return true, g.Err()
		case raft.Shutdown:
			return false, ErrShutdown
		case raft.Follower:
			// The state and the leader are read apart: a node that won an election between
			// the two reads would look like a follower of itself. A follower's answer stands
			// only when it still follows once the leader it knows was read.
			if addr, _ := g.r.LeaderWithID(); addr != "" && !alone && g.r.State() == raft.Follower {
				return false, g.Err()
			}
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("raftgroup: no leader after %v", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// alone reports whether this node is the group's only voter: such a group has no leader but
// this node, whatever else raft says between its reads.
func (g *Group) alone() bool {
	f := g.r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	servers := f.Configuration().Servers
	return len(servers) == 1 && servers[0].Suffrage == raft.Voter && servers[0].ID == g.id
}

// Barrier waits, at most timeout, until every entry before it is applied; only the leader can.
func (g *Group) Barrier(timeout time.Duration) error {
	if err := g.r.Barrier(max(timeout, time.Millisecond)).Error(); err != nil {
		return fmt.Errorf("raftgroup: barrier: %w", err)
	}
	return nil
}

// Watch returns a channel that receives a value whenever this node's role in the group may have
// changed (its Raft state or the leader it knows), and a function that stops the watch. Values
// coalesce: the receiver looks at the current role (Leader, Term), not at what was sent. The
// channel is closed once the watch is stopped.
func (g *Group) Watch() (<-chan struct{}, func()) {
	obs := make(chan raft.Observation, 16)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.RaftState, raft.LeaderObservation:
			return true
		}
		return false
	})
	g.r.RegisterObserver(o)
	changed, quit := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(changed)
		for {
			select {
			case <-obs:
				select {
				case changed <- struct{}{}:
				default:
				}
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return changed, func() {
		once.Do(func() {
			g.r.DeregisterObserver(o)
			close(quit)
		})
	}
}

// AutoSnapshot turns raft's own snapshot schedule on (a snapshot once the log holds entries
// entries past the last one, looked at every Config.SnapshotCheck) or off (entries 0: the caller
// snapshots, Snapshot). A follower has nobody else to snapshot its state machine and truncate its
// log; a leader's caller chooses its points.
func (g *Group) AutoSnapshot(entries uint64) error {
	rc := g.r.ReloadableConfig()
	rc.SnapshotThreshold = entries
	if entries == 0 {
		rc.SnapshotThreshold = never
	}
	return g.r.ReloadConfig(rc)
}

// AwaitApplied waits, at most timeout, until this node has applied the entry at index.
func (g *Group) AwaitApplied(index uint64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for g.r.AppliedIndex() < index {
		if g.r.State() == raft.Shutdown {
			return ErrShutdown
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raftgroup: entry %d not applied here after %v", index, timeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// LeaderID names the group's leader as this node knows it ("" while it knows none).
func (g *Group) LeaderID() raft.ServerID {
	_, id := g.r.LeaderWithID()
	return id
}

// TransferLeadership hands the leadership to another voter of the group (to: "" lets raft pick
// the most up-to-date one) and waits until it has taken over or the transfer failed.
func (g *Group) TransferLeadership(to raft.ServerID, addr raft.ServerAddress) error {
	var f raft.Future
	if to == "" {
		f = g.r.LeadershipTransfer()
	} else {
		f = g.r.LeadershipTransferToServer(to, addr)
	}
	return f.Error()
}

// Propose appends data to the log. The future returns once the entry is durable and applied
// (Response is the state machine's answer), or failed.
func (g *Group) Propose(data []byte) raft.ApplyFuture { return g.r.Apply(data, applyTimeout) }

// Snapshot takes a snapshot now and truncates the log behind it. The state machine's Snapshot
// runs on raft's apply goroutine; the caller must not change the state until Snapshot returns.
func (g *Group) Snapshot() error {
	err := g.r.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// Stats reports the log's extent, for deciding when to snapshot.
func (g *Group) Stats() (first, last uint64) {
	first, _ = g.store.FirstIndex()
	last, _ = g.store.LastIndex()
	return first, last
}

// Shutdown stops the group; its state stays in the store.
func (g *Group) Shutdown() error {
	if g.unpace != nil {
		g.unpace()
	}
	err := g.r.Shutdown().Error()
	if g.cache != nil {
		g.cache.reset()
	}
	if c, ok := g.trans.(io.Closer); ok {
		_ = c.Close()
	}
	return err
}

// Store is the group's log and stable store (it outlives Shutdown).
func (g *Group) Store() raftstore.LogStableStore { return g.store }
