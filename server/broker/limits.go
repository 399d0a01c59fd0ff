package broker

// DefaultMaxQueues is the default of Options.MaxQueues: the queues one node holds (each with its
// dead-letter queue), measured with tools/bench -only queues (docs/queue-log.md, Costs).
const DefaultMaxQueues = 10_000

// queueLimit refuses a new queue when the node holds MaxQueues. ChannelFull is the spec's code
// for a server that cannot take more; no retry time is suggested, since waiting does not help:
// deleting a queue or raising max_queues does. The caller holds adminMu.
func (b *Broker) queueLimit() *Error {
	n := b.catalog().Groups()
	if n < b.opts.MaxQueues {
		return nil
	}
	return errorf(CodeChannelFull, "this node holds its maximum of %d queues (max_queues); delete a queue or raise max_queues",
		b.opts.MaxQueues)
}
