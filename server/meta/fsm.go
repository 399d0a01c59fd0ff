package meta

import (
	"encoding/binary"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
)

// Reconciler hears what the node should host. The FSM calls it on the apply goroutine, after the
// change is visible in the Catalog, in log order; it must not wait for the meta group (a proposal
// would wait for the very goroutine that calls it), and should hand slow work (opening a Raft
// group) to a goroutine of its own.
type Reconciler interface {
	// Assign says that a queue group exists as a says: it was created, or its definitions or
	// placement changed, or a Restore replaced the state (which tells every group). A node hosts
	// the group when a.Has(its ID). The same assignment may come more than once.
	Assign(a Assignment)
	// Drop says that the queue group of queue was deleted, with every message of both queues.
	Drop(queue string)
}

// ConfigWatcher is an optional ability of a Reconciler, found by type assertion: it hears each
// runtime config entry that is set, on the apply goroutine, after the change. A Restore replaces
// the whole config without calling it; read Catalog.Config then.
type ConfigWatcher interface {
	ConfigSet(key, value string)
}

// DrainWatcher is an optional ability of a Reconciler, found by type assertion: it hears each
// drain that is started or cancelled (SetDraining), on the apply goroutine, after the change. A
// Restore replaces the members without calling it; read Catalog.Nodes then.
type DrainWatcher interface {
	DrainSet(id NodeID, draining bool)
}

// Config configures an FSM.
type Config struct {
	// Self is this node's ID ("local", raftgroup's default, when empty). It hosts the groups
	// placed while no member is known; a single node that records itself as a member (PutNode)
	// must use this ID, or its groups move to the node it names.
	Self NodeID
	// Reconciler hears of every change of a queue group; nil for none.
	Reconciler Reconciler
}

// FSM is the meta group's raft.FSM. Apply validates and carries out the commands of one log entry;
// Snapshot and Restore write and read the catalog as snapshot frames. Read the state through
// Catalog.
type FSM struct {
	cat *Catalog
	rec Reconciler
}

var _ raft.FSM = (*FSM)(nil)

// New returns an FSM with an empty catalog.
func New(c Config) *FSM {
	if c.Self == "" {
		c.Self = "local"
	}
	return &FSM{cat: newCatalog(c.Self), rec: c.Reconciler}
}

// Catalog returns the state, for reading.
func (f *FSM) Catalog() *Catalog { return f.cat }

// Apply applies one meta entry: a sequence of meta commands, in order. Its response is nil, or
// the error of the first command that failed, which ends the entry: a *Refused when the state
// refused it (it changed nothing, and every node refused it alike), another error when the entry
// does not decode. Commands before it stay applied; a proposer that needs all or nothing
// proposes one validated command per entry.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	var ch changes
	f.cat.mu.Lock()
	err := eachFrame(l.Data, func(fr queuelog.Frame) error { return f.cat.apply(fr, &ch) })
	f.cat.mu.Unlock()
	f.tell(&ch)
	if err != nil {
		return err
	}
	return nil
}

// changes is what an entry changed, for the Reconciler.
type changes struct {
	groups  []string        // the groups touched, in the order of their first change
	existed map[string]bool // whether each existed before
	config  [][2]string     // config entries set, in order
	drains  []Node          // drains started or cancelled, in order (ID and Draining)
	removed []NodeID        // members removed, in order
	// throttles: owners set, in order
	throttles []throttleChange
}

// touch notes that group is about to change; c.mu is held.
func (ch *changes) touch(c *Catalog, group string) {
	if _, ok := ch.existed[group]; ok {
		return
	}
	if ch.existed == nil {
		ch.existed = map[string]bool{}
	}
	q, ok := c.queues[group]
	ch.existed[group] = ok && q.DLQOf == ""
	ch.groups = append(ch.groups, group)
}

// tell hands the changes to the Reconciler.
func (f *FSM) tell(ch *changes) {
	if f.rec == nil {
		return
	}
	for _, name := range ch.groups {
		if a, ok := f.cat.Assignment(name); ok && a.Name() == name {
			f.rec.Assign(a)
		} else if ch.existed[name] {
			f.rec.Drop(name)
		}
	}
	if w, ok := f.rec.(ConfigWatcher); ok {
		for _, kv := range ch.config {
			w.ConfigSet(kv[0], kv[1])
		}
	}
	if w, ok := f.rec.(DrainWatcher); ok {
		for _, n := range ch.drains {
			w.DrainSet(n.ID, n.Draining)
		}
	}
	if w, ok := f.rec.(MemberWatcher); ok {
		for _, id := range ch.removed {
			w.MemberRemoved(id)
		}
	}
	if w, ok := f.rec.(ThrottleWatcher); ok {
		for _, t := range ch.throttles {
			w.ThrottleOwnerSet(t.name, t.owner)
		}
	}
}

// eachFrame calls fn with each command of a log entry, in order, and stops at its first error.
// Byte fields of a command alias entry.
func eachFrame(entry []byte, fn func(queuelog.Frame) error) error {
	for off := 0; off < len(entry); {
		if len(entry)-off < queuelog.LengthSize {
			return fmt.Errorf("meta: entry truncated at byte %d", off)
		}
		n := int(binary.BigEndian.Uint32(entry[off:]))
		off += queuelog.LengthSize
		if n < queuelog.HeaderSize || n > len(entry)-off {
			return fmt.Errorf("meta: frame length %d at byte %d exceeds the entry", n, off)
		}
		f, err := queuelog.Decode(queuelog.Opcode(entry[off]), entry[off+1:off+n])
		if err != nil {
			return fmt.Errorf("meta: command at byte %d: %w", off, err)
		}
		if err := fn(f); err != nil {
			return err
		}
		off += n
	}
	return nil
}
