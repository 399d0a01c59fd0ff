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

	ch       chan Message
	bytes    atomic.Int64
	maxBytes int64
	acct     *membudget.Account // nil: only the subscription's own bounds
	slots    int64              // memory of ch's slots, held in acct while s lives

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
	select {
	case s.ch <- m:
		return true
	default:
		s.bytes.Add(-int64(len(m.Payload)))
		s.acct.Release(messageMemory(m))
		s.fail(ErrSlowConsumer)
		return false
	}
}

// queuedMessageOverhead is what a queued message costs beyond its bytes, in an Account: its
// payload's allocation rounding and the subject's and reply's headers.
const queuedMessageOverhead = 64

// messageMemory is what m costs while it waits in a subscription's queue (its slot is counted
// with the queue).
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
		s.acct.Release(s.slots)
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

// C returns the channel messages arrive on. A receiver must call Received(m) for every message it
// takes from C, so that the byte bound is released.
func (s *Subscription) C() <-chan Message { return s.ch }

// Received releases m's bytes from the queue bound (see C).
func (s *Subscription) Received(m Message) {
	s.bytes.Add(-int64(len(m.Payload)))
	s.acct.Release(messageMemory(m))
}

// Drain discards the messages still queued, releasing their memory; the receiver of an ended
// subscription that will not read them calls it.
func (s *Subscription) Drain() {
	for {
		select {
		case m := <-s.ch:
			s.Received(m)
		default:
			return
		}
	}
}

// TryNext returns a queued message without waiting.
func (s *Subscription) TryNext() (Message, bool) {
	select {
	case m := <-s.ch:
		s.Received(m)
		return m, true
	default:
		return Message{}, false
	}
}

// Next waits for the next message. Messages queued before the subscription ended are still
// returned; after them Next returns the reason it ended, or ctx's error.
func (s *Subscription) Next(ctx context.Context) (Message, error) {
	if m, ok := s.TryNext(); ok {
		return m, nil
	}
	select {
	case m := <-s.ch:
		s.Received(m)
		return m, nil
	case <-s.done:
		if m, ok := s.TryNext(); ok {
			return m, nil
		}
		return Message{}, s.err
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}
