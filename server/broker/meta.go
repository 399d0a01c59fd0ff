package broker

import (
	"errors"
	"sync/atomic"

	"github.com/filamq/fila/server/meta"
)

// The meta group is server/meta's state machine, which every node applies whole: the queue
// definitions and where each group lives, the runtime config, the API keys and their ACLs. The
// broker proposes meta commands (proposeMeta) and never decides what they do: applying a command
// decides, alike on every node, and tells this node what changed (metaHooks):
//
//   - a queue group that changed: the node registry (server/registry) reconciles the local
//     replica with the group's assignment — opening it (replicaHost.Open), updating its
//     definitions (actor.Update) or closing it and deleting its data (actor.Close);
//   - a runtime config entry that was set: the broker applies it (configSet).
//
// A proposer that needs the outcome here waits for the registry (awaitGroup).

// metaHooks passes what the meta state machine applies on to the broker, once live: the changes
// a meta group replays while it opens are already in the state the broker reads when it is open.
type metaHooks struct {
	b    *Broker
	live atomic.Bool
}

func (h *metaHooks) Assign(a meta.Assignment) {
	if h.live.Load() {
		h.b.reg.Assign(a)
	}
}

func (h *metaHooks) Drop(queue string) {
	if h.live.Load() {
		h.b.reg.Drop(queue)
	}
}

func (h *metaHooks) ConfigSet(key, value string) {
	if h.live.Load() {
		h.b.configSet(key, value)
	}
}

// newMeta returns a meta state machine for this node, with the bootstrap key in its key store,
// and the hooks to turn on once it has caught up.
func (b *Broker) newMeta() (*meta.FSM, *metaHooks, error) {
	h := &metaHooks{b: b}
	f := meta.New(meta.Config{Self: b.nodeID(), Reconciler: h})
	if b.opts.BootstrapAPIKey != "" {
		if err := setBootstrap(f.Catalog().Keys(), b.opts.BootstrapAPIKey); err != nil {
			return nil, nil, err
		}
	}
	if b.opts.Cluster.Network != nil { // a node of a cluster: its keys are current only as of the meta leader
		f.Catalog().Keys().SetFreshness(newAuthFreshness(b.opts.Cluster.AuthMaxStaleness, b.metaGroupNow).fresh)
	}
	return f, h, nil
}

// catalog is the meta state as this node has applied it.
func (b *Broker) catalog() *meta.Catalog {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.meta.Catalog()
}

// catalogSource reads the current catalog for the registry (the meta state machine is replaced
// when a failed write stopped the meta group and it reopens).
type catalogSource struct{ b *Broker }

func (s catalogSource) Assignment(queue string) (meta.Assignment, bool) {
	return s.b.catalog().Assignment(queue)
}

// refusal turns a failed meta proposal into the request's error: a command the meta state
// refused answers its code, anything else StorageError.
func (b *Broker) refusal(err error) *Error {
	var r *meta.Refused
	if !errors.As(err, &r) {
		return b.failure(err)
	}
	code := CodeInvalidConfigValue
	switch r.Code {
	case meta.CodeQueueExists:
		code = CodeQueueAlreadyExists
	case meta.CodeReservedName:
		code = CodeReservedQueueName
	case meta.CodeQueueNotFound:
		code = CodeQueueNotFound
	case meta.CodeTooManyQueues:
		code = CodeChannelFull
	case meta.CodeNodeNotFound:
		code = CodeNodeNotFound
	}
	return errorf(code, "%s", r.Message)
}
