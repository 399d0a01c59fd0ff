// Package fila is the Go client of the Fila broker, speaking the Fila Binary Protocol (FIBP)
// over TCP or TLS.
//
// One Client is one connection, safe for concurrent use: requests from many goroutines are
// multiplexed by request ID, written by one writer goroutine that coalesces whatever is queued
// into one write, and answered through one reader goroutine.
//
//	c, err := fila.Dial(ctx, "127.0.0.1:5555", nil)
//	...
//	p := c.NewProducer(fila.ProducerOptions{})
//	id, err := p.Send(ctx, fila.Message{Queue: "orders", Payload: body})
//
//	cons, err := c.Consume(ctx, "orders", fila.ConsumeOptions{MaxUnacked: 64})
//	for {
//		d, err := cons.Next(ctx)
//		...
//		d.Ack(ctx)
//	}
//
// Errors reported by the broker are *Error values carrying the protocol's error code, message
// and metadata; errors.Is matches them against the sentinels (fila.ErrQueueNotFound, ...).
// Batch operations report one error per item.
//
// With Options.MaxReconnects set, a Client reconnects by itself when its connection drops
// (exponential backoff with jitter, over the seed addresses of DialSeeds): Producers resend
// unanswered frames, Consumers resubscribe, and calls made while disconnected wait within their
// context and then fail with a *ReconnectError (errors.Is ErrDisconnected). With
// Options.DialRetry, Dial itself waits the same way for a broker that is not up yet.
//
// In a cluster, DialCluster takes several nodes as seeds and returns a Cluster, which sends each
// Enqueue, Ack, Nack and ExtendLease to its queue's leader (learnt from route hints, NotLeader and
// GetRoutes), subscribes on the leader and moves a subscription to the new leader after a
// failover; NotLeader, NodeNotReady, AuthStateStale, ChannelFull and lost nodes are retried
// within Options.FailoverTimeout. The application sees redelivery, nothing else.
//
// Consumers keep the leases of unsettled deliveries alive, for at most
// ConsumeOptions.MaxLeaseExtension (one hour by default) after each delivery arrived.
//
// Frames are encoded and decoded only by the generated codecs in
// github.com/filamq/fila/generated/fibp. An application needs no import of them: the
// protocol's enumerations have names here (Ordering, Backoff, Reclassify, Code, ...), aliases
// of the generated types.
package fila
