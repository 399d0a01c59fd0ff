// Package bus is Rift's in-process subject broker: subscriptions (plain and queue groups) on
// patterns with '*' and '>', publication, and request/reply through private inboxes.
//
// Delivery is at most once. A publication goes to every plain subscription whose pattern matches
// and to exactly one member of each matching queue group (rotating); a publication nobody matches
// is discarded. Each subscription has a bounded queue (messages and bytes): a publisher never
// waits for a subscriber, and a subscriber whose queue is full is ended with ErrSlowConsumer while
// everyone else carries on.
//
// The bus checks no permissions: callers (the QUIC listener, plugins, the service layer) do.
package bus

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/server/rift/subject"

	"github.com/filamq/fila/server/membudget"
)

// Errors.
var (
	ErrSlowConsumer = errors.New("slow consumer: subscription queue full")
	ErrClosed       = errors.New("bus: closed")
	ErrUnsubscribed = errors.New("bus: unsubscribed")
	ErrNoResponders = errors.New("no responders")
	ErrTimeout      = errors.New("request timed out")
)

// Message is one publication. Subject and Reply are immutable strings; Payload belongs to the bus
// once published and is shared, read-only, by every receiver.
type Message struct {
	Subject string
	Reply   string
	Payload []byte
}

// Options bounds every subscription's queue. Zero fields take the defaults shown.
type Options struct {
	QueueMsgs  int // messages waiting per subscription (8,192)
	QueueBytes int // payload bytes waiting per subscription (64 MiB)
}

// Bus is the subject broker. Its methods are safe for concurrent use.
type Bus struct {
	opts Options

	mu     sync.RWMutex
	index  subject.Index[*Subscription]
	closed bool

	groups map[string]*group // queue groups by name, while they have members
	// requests holds the inbox of every Request waiting for its reply (inbox subject → *waiter):
	// a reply goes straight to its waiter. A subscription per request would take the write lock
	// twice and make every Publisher match its subject again.
	requests sync.Map
	done     chan struct{} // closed by Close
	scratch  sync.Pool     // *[]*Subscription for Publish
	gen      atomic.Uint64 // changes (under mu) whenever the index or closed does

	published, delivered, slow atomic.Uint64 // see Counters
}

// Counters are the bus's running totals since it started.
type Counters struct {
	Published     uint64 // publications, whether anyone received them or not
	Delivered     uint64 // messages handed to subscriptions (a publication counts once per receiver)
	SlowConsumers uint64 // subscriptions ended because their queue was full
}

// Counters returns the running totals.
func (b *Bus) Counters() Counters {
	return Counters{Published: b.published.Load(), Delivered: b.delivered.Load(), SlowConsumers: b.slow.Load()}
}

// New returns an empty bus.
func New(o Options) *Bus {
	if o.QueueMsgs <= 0 {
		o.QueueMsgs = 8192
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 64 << 20
	}
	b := &Bus{opts: o, groups: map[string]*group{}, done: make(chan struct{})}
	b.scratch.New = func() any { s := make([]*Subscription, 0, 16); return &s }
	return b
}

// SubOptions overrides the bus's queue bounds for one subscription.
type SubOptions struct {
	QueueMsgs, QueueBytes int
	// Account, when set, holds the subscription's queue in memory (the slots of its ring as it
	// grows, and every queued message with its overhead) beside the other subscriptions of one
	// connection: a message the account refuses ends the subscription as a slow consumer.
	Account *membudget.Account
}

// Subscribe registers a subscription on pattern (validated here); queue names its queue group,
// "" for none.
func (b *Bus) Subscribe(pattern, queue string) (*Subscription, error) {
	return b.SubscribeWith(pattern, queue, SubOptions{})
}

// SubscribeWith is Subscribe with per-subscription queue bounds.
func (b *Bus) SubscribeWith(pattern, queue string, o SubOptions) (*Subscription, error) {
	if err := subject.ValidPattern(pattern); err != nil {
		return nil, err
	}
	if o.QueueMsgs <= 0 {
		o.QueueMsgs = b.opts.QueueMsgs
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = b.opts.QueueBytes
	}
	s := &Subscription{
		bus: b, Pattern: pattern, Queue: queue, acct: o.Account,
		q: newQueue(o.QueueMsgs, o.Account), maxBytes: int64(o.QueueBytes), done: make(chan struct{}),
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.index.Insert(pattern, s)
	b.gen.Add(1)
	if queue != "" {
		g := b.groups[queue]
		if g == nil {
			g = &group{}
			b.groups[queue] = g
		}
		g.members++
		s.group = g
	}
	return s, nil
}

// group is a queue group's rotation state, shared by its members.
type group struct {
	next    atomic.Uint32
	members int // guarded by Bus.mu
}

// Subscriptions returns the number of live subscriptions.
func (b *Bus) Subscriptions() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.index.Len()
}

// Publish delivers a message to the live subscriptions matching subj (a valid literal subject)
// and returns how many received it. The bus copies payload when anyone receives it, so the caller
// keeps ownership of its slice.
func (b *Bus) Publish(subj, reply string, payload []byte) (int, error) {
	sp := b.scratch.Get().(*[]*Subscription)
	defer func() { clear(*sp); *sp = (*sp)[:0]; b.scratch.Put(sp) }()
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return 0, ErrClosed
	}
	matches := b.index.Match(*sp, subj)
	*sp = matches
	b.mu.RUnlock()
	return b.deliver(matches, subj, reply, payload), nil
}

// deliver gives a copy of payload to matches (which it modifies) and returns how many took it.
func (b *Bus) deliver(matches []*Subscription, subj, reply string, payload []byte) int {
	b.published.Add(1)
	w := b.waiter(subj)
	if len(matches) == 0 && w == nil {
		return 0
	}
	m := Message{Subject: subj, Reply: reply, Payload: append([]byte(nil), payload...)}
	n := 0
	if w != nil && w.answered.CompareAndSwap(false, true) { // later replies only go to subscriptions
		w.reply <- m
		n++
	}
	for i, s := range matches {
		if s == nil {
			continue // a group member already handled
		}
		if s.Queue == "" {
			if s.offer(m) {
				n++
			}
			continue
		}
		if b.deliverGroup(matches[i:], m) {
			n++
		}
	}
	b.delivered.Add(uint64(n))
	return n
}

// Publisher publishes for one sequential caller, such as a publisher stream. It remembers the
// subscriptions matching the last subject it published to, for as long as no subscription is
// added or removed, so that a stream publishing to the same subject again and again matches it
// once. It is not safe for concurrent use.
type Publisher struct {
	b       *Bus
	subj    string
	gen     uint64
	valid   bool
	matches []*Subscription
	scratch []*Subscription
}

// Publisher returns a new Publisher.
func (b *Bus) Publisher() *Publisher { return &Publisher{b: b} }

// Publish is Bus.Publish.
func (p *Publisher) Publish(subj, reply string, payload []byte) (int, error) {
	b := p.b
	if !p.valid || subj != p.subj || b.gen.Load() != p.gen {
		b.mu.RLock()
		if b.closed {
			b.mu.RUnlock()
			return 0, ErrClosed
		}
		clear(p.matches)
		p.gen, p.subj, p.valid = b.gen.Load(), subj, true
		p.matches = b.index.Match(p.matches[:0], subj)
		b.mu.RUnlock()
	}
	p.scratch = append(p.scratch[:0], p.matches...)
	n := b.deliver(p.scratch, subj, reply, payload)
	clear(p.scratch)
	return n, nil
}

// deliverGroup gives m to one member of the group of members[0], trying the next member when the
// chosen one refuses, and nils every member of that group in members.
func (b *Bus) deliverGroup(members []*Subscription, m Message) bool {
	group, rot := members[0].Queue, members[0].group
	var pick [16]*Subscription
	g := pick[:0]
	for j, s := range members {
		if s != nil && s.Queue == group {
			g = append(g, s)
			members[j] = nil
		}
	}
	start := int(rot.next.Add(1))
	for k := range g {
		if g[(start+k)%len(g)].offer(m) {
			return true
		}
	}
	return false
}

// remove takes s out of the index.
func (b *Bus) remove(s *Subscription) {
	b.mu.Lock()
	if b.index.Remove(s.Pattern, s) {
		b.gen.Add(1)
		if s.group != nil {
			if s.group.members--; s.group.members == 0 {
				delete(b.groups, s.Queue)
			}
		}
	}
	b.mu.Unlock()
}

// Close ends every subscription with ErrClosed and refuses further use.
func (b *Bus) Close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	close(b.done)
	b.gen.Add(1)
	subs := b.index.All(nil)
	b.index = subject.Index[*Subscription]{}
	b.mu.Unlock()
	for _, s := range subs {
		s.end(ErrClosed)
	}
}

// Request publishes payload to subj with a fresh private inbox as its reply subject and returns
// the first reply. It fails with ErrNoResponders when nobody received the request and ErrTimeout
// when no reply came within timeout.
//
// The reply goes to the waiting Request and, like any publication, to the subscriptions matching
// the inbox (an identity allowed to subscribe to _INBOX.> sees it too).
func (b *Bus) Request(ctx context.Context, subj string, payload []byte, timeout time.Duration) (Message, error) {
	inbox := NewInbox()
	w := &waiter{reply: make(chan Message, 1)}
	b.requests.Store(inbox, w)
	defer b.requests.Delete(inbox)
	n, err := b.Publish(subj, inbox, payload)
	if err != nil {
		return Message{}, err
	}
	if n == 0 {
		return Message{}, ErrNoResponders
	}
	timer := time.NewTimer(timeout) // cheaper than a context with a deadline, on every request
	defer timer.Stop()
	select {
	case m := <-w.reply:
		return m, nil
	case <-timer.C:
		err = ErrTimeout
	case <-b.done:
		err = ErrClosed
	case <-ctx.Done():
		err = ctx.Err()
		if errors.Is(err, context.DeadlineExceeded) {
			err = ErrTimeout
		}
	}
	if !w.answered.CompareAndSwap(false, true) {
		// A replier claimed the request at the same moment (its Publish counts the reply as
		// delivered): the reply wins, so that a delivered reply is never also a failed request.
		return <-w.reply, nil
	}
	return Message{}, err
}

// inboxPrefix starts every inbox subject NewInbox returns.
const inboxPrefix = "_INBOX."

// A waiter is a Request waiting for its first reply.
type waiter struct {
	answered atomic.Bool  // the outcome is decided: a replier handed its reply over, or the Request gave up
	reply    chan Message // (capacity 1) the first reply
}

// waiter returns the Request waiting on inbox subject subj, or nil.
func (b *Bus) waiter(subj string) *waiter {
	if !strings.HasPrefix(subj, inboxPrefix) {
		return nil
	}
	if v, ok := b.requests.Load(subj); ok {
		return v.(*waiter)
	}
	return nil
}

var inboxEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewInbox returns a fresh private inbox subject, _INBOX.<26 random base32 characters>.
func NewInbox() string {
	var r [16]byte
	rand.Read(r[:])
	return inboxPrefix + inboxEncoding.EncodeToString(r[:])
}
