package bus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/filamq/fila/server/membudget"
)

// Subscription receives the messages published to subjects matching Pattern. Its queue is bounded:
// when a publication finds it full, the subscription ends with ErrSlowConsumer.
type Subscription struct {
	bus     *Bus
	Pattern string
	Queue   string
	group   *group

	q        *queue
	bytes    atomic.Int64
	maxBytes int64
	acct     *membudget.Account // nil: only the subscription's own bounds

	once sync.Once
	done chan struct{}
	err  error // set before done is closed
}

// offer queues m without blocking; a full queue ends the subscription.
func (s *Subscription) offer(m Message) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	if s.bytes.Add(int64(len(m.Payload))) > s.maxBytes {
		s.bytes.Add(-int64(len(m.Payload)))
		s.fail(ErrSlowConsumer)
		return false
	}
	if s.acct.Reserve(messageMemory(m)) != nil {
		s.bytes.Add(-int64(len(m.Payload)))
		s.fail(ErrSlowConsumer)
		return false
	}
	if !s.q.push(m) {
		s.bytes.Add(-int64(len(m.Payload)))
		s.acct.Release(messageMemory(m))
		s.fail(ErrSlowConsumer)
		return false
	}
	return true
}

// queuedMessageOverhead is what a queued message costs beyond its bytes, in an Account: its
// payload's allocation rounding and the subject's and reply's headers.
const queuedMessageOverhead = 64

// messageMemory is what m costs while it waits in a subscription's queue (its slot is counted
// with the queue's ring).
func messageMemory(m Message) int64 {
	return int64(len(m.Payload) + len(m.Subject) + len(m.Reply) + queuedMessageOverhead)
}

// fail ends s with err and removes it from the bus.
func (s *Subscription) fail(err error) {
	if s.end(err) {
		if err == ErrSlowConsumer {
			s.bus.slow.Add(1)
		}
		s.bus.remove(s)
	}
}

// end records err and closes done; it reports whether this call ended s.
func (s *Subscription) end(err error) bool {
	ended := false
	s.once.Do(func() {
		s.err = err
		close(s.done)
		s.q.close()
		ended = true
	})
	return ended
}

// Unsubscribe ends s; messages still queued are dropped. It is safe to call more than once.
func (s *Subscription) Unsubscribe() { s.fail(ErrUnsubscribed) }

// Done is closed when s has ended; Err then says why.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Err returns why s ended (ErrSlowConsumer, ErrUnsubscribed, ErrClosed), or nil while it is live.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Ready returns a channel that holds a token whenever a message has been queued since the last
// token was taken: a receiver waits on it, then takes messages with TryNext until there are none
// (a token may come when the message it announced was already taken).
func (s *Subscription) Ready() <-chan struct{} { return s.q.ready }

// Rearm puts Ready's token back when messages are still queued: a receiver that stops taking
// them before TryNext says none are left calls it, so that its next wait wakes at once.
func (s *Subscription) Rearm() { s.q.rearm() }

// received releases m's bytes from the queue bound.
func (s *Subscription) received(m Message) {
	s.bytes.Add(-int64(len(m.Payload)))
	s.acct.Release(messageMemory(m))
}

// Drain discards the messages still queued, releasing their memory; the receiver of an ended
// subscription that will not read them calls it.
func (s *Subscription) Drain() {
	for {
		if _, ok := s.TryNext(); !ok {
			return
		}
	}
}

// TryNext returns a queued message without waiting.
func (s *Subscription) TryNext() (Message, bool) {
	m, ok := s.q.pop()
	if ok {
		s.received(m)
	}
	return m, ok
}

// Next waits for the next message. Messages queued before the subscription ended are still
// returned; after them Next returns the reason it ended, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	for {
		if m, ok := s.TryNext(); ok {
			return m, nil
		}
		select {
		case <-s.q.ready:
		case <-s.done:
			if m, ok := s.TryNext(); ok {
				return m, nil
			}
			return Message{}, s.err
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}
