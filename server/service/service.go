package service

import "github.com/filamq/fila/server/auth"

// Service is the queue service the edges call: the local broker implements it, and so can a
// router that sends each request to the node leading its queue. Every method is safe for
// concurrent use. Unless said otherwise, a non-nil *Error fails the whole call.
type Service interface {
	Queues
	Admin
	Keys
}

// Queues is the hot path. Its requests are batches answered through a callback, which runs
// once, on another goroutine, when every item is durable or has failed: one *Error fails the
// whole request (a full inbox: CodeChannelFull with a back-off), otherwise there is one result
// per item, in request order.
type Queues interface {
	// Enqueue stores msgs. It owns msgs from the call on and copies every payload before it
	// returns, so the memory the payloads point into may be reused by the caller then; headers
	// and strings are kept.
	Enqueue(msgs []Message, done func([]EnqueueResult, *Error))
	// Ack acknowledges leased messages. The caller may reuse items as soon as Ack returns.
	Ack(items []AckItem, done func([]Code, *Error))
	// Nack fails leased messages (retry or dead-letter). The caller may reuse items as soon as
	// Nack returns.
	Nack(items []NackItem, done func([]Code, *Error))
	// ExtendLease moves lease expiries. The caller may reuse items as soon as ExtendLease
	// returns.
	ExtendLease(items []ExtendItem, done func([]ExtendResult, *Error))
	// Subscribe starts a subscription: sink.Subscribed is called before it returns and before
	// any delivery. It ends with the handle's Unsubscribe, when a Deliver returns false, or when
	// the service ends it (sink.Ended).
	Subscribe(req SubscribeRequest, sink Sink) (Subscription, *Error)
}

// Subscription is the handle of a live subscription. Its methods never block, and do nothing
// once the subscription has ended.
type Subscription interface {
	// Credit grants the consumer n more deliveries (ignored when the server manages the window).
	Credit(n uint32)
	// Unsubscribe ends the subscription. Its leases stay and expire normally; the sink hears
	// nothing more of it (no Ended), though a Deliver already under way may still arrive.
	Unsubscribe()
}

// Sink carries one subscription's events to its consumer's connection: the edge makes one per
// subscription, holding whatever it needs to address its consumer (the session: the Consume's
// request ID). Its methods must not block.
type Sink interface {
	// Subscribed is called once, before any Deliver, when the subscription has started.
	Subscribed(consumerID string)
	// Deliver hands over a batch of deliveries. ds and the slice it is backed by are the
	// service's again once Deliver returns (the sink encodes or copies what it needs); Headers
	// and Payload are shared with the service's body cache and must never be changed. onWritten,
	// when not nil, is called once the batch has reached the socket. Deliver returns false when
	// the connection is gone or too far behind; the subscription then ends.
	Deliver(ds []Delivery, onWritten func()) bool
	// Ended is called once when the service ends the subscription by itself (its queue was
	// deleted; e says why), after its last Deliver. It is not called after Unsubscribe. It may
	// be called after a Deliver that returned false (the queue can be deleted before that
	// subscription is dropped), so a sink must take Ended for a subscription it has given up on.
	Ended(e *Error)
}

// Admin is the queue and cluster administration. Each call returns when it has taken effect.
type Admin interface {
	// CreateQueue creates a queue (and its dead-letter queue).
	CreateQueue(spec QueueSpec) *Error
	// DeleteQueue deletes a queue, its dead-letter queue and their messages, ending their
	// subscriptions (Sink.Ended); of a dead-letter queue alone it deletes the messages.
	DeleteQueue(queue string) *Error
	// UpdateQueue changes a queue's mutable settings.
	UpdateQueue(u QueueUpdate) *Error
	// GetStats returns a queue's live counters.
	GetStats(queue string) (QueueStats, *Error)
	// Definition returns a queue's definition.
	Definition(queue string) (QueueDefinition, *Error)
	// ListQueues lists every queue with its headline counters, by name.
	ListQueues() []QueueSummary
	// Redrive moves up to count (0: all) dead-lettered messages of dlq, oldest first, back to
	// its queue, running on_enqueue again on those reclassify names.
	Redrive(dlq string, count uint64, reclassify Reclassify) (RedriveResult, *Error)
	// ListConfig lists the runtime config entries whose key begins with prefix.
	ListConfig(prefix string) []ConfigEntry
	// GetConfig returns a runtime config value (CodeInvalidConfigValue for an unset key).
	GetConfig(key string) (string, *Error)
	// SetConfig sets a runtime config value.
	SetConfig(key, value string) *Error
	// SetRebalancing enables, pauses (for pauseMs) or disables rebalancing.
	SetRebalancing(mode RebalancingMode, pauseMs uint64) *Error
	// GetClusterStatus describes the cluster as this node sees it.
	GetClusterStatus() ClusterStatus
	// Routes answers which of queues this node serves (all queues when queues is empty), or
	// CodeQueueNotFound for the first that does not exist.
	Routes(queues []string) ([]string, *Error)
	// GetThrottleStats describes a throttle across every queue with its top most-waiting
	// buckets (CodeThrottleNotFound when no live subscription declares it).
	GetThrottleStats(name string, top uint32) (ThrottleStats, *Error)
	// GetThrottleBucket describes one bucket of a throttle: the missing-key bucket, or the one
	// of values.
	GetThrottleBucket(name string, missing bool, values []string) (ThrottleBucket, *Error)
}

// Keys is the API keys and their ACLs (security.md).
type Keys interface {
	// Auth returns the API keys and ACLs, to authenticate and authorize with. Callers read it;
	// it changes only through the methods below.
	Auth() *auth.Store
	// CreateAPIKey creates a key named name, expiring at expiresAtMs (Unix ms, 0 = never).
	CreateAPIKey(name string, expiresAtMs uint64, superadmin bool) (APIKeyCreated, *Error)
	// RevokeAPIKey revokes a key.
	RevokeAPIKey(id string) *Error
	// ListAPIKeys lists the keys.
	ListAPIKeys() []auth.Record
	// SetACL replaces a key's permissions.
	SetACL(id string, acl []auth.Permission) *Error
	// GetACL returns a key and its permissions.
	GetACL(id string) (auth.Record, *Error)
}
