package stream

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/filamq/fila/generated/riftstore"
	"github.com/filamq/fila/server/rift/subject"
)

// Limits of a consumer's configuration and of one fetch.
const (
	MaxAckWait       = time.Hour
	MaxAckPendingCap = 65536
	MaxFetch         = 256
	// scanBudget bounds how many records one fetch examines for a filter, so a consumer whose filter
	// matches little cannot hold its lock over a whole large stream; the cursor keeps the progress.
	scanBudget = 65536
	// MaxConsumersPerOwner bounds the durable consumers one identity has on one stream: they are
	// never deleted, so without a bound an identity could make the store and the server's memory
	// grow for good, one CONSUMER_OPEN at a time.
	MaxConsumersPerOwner = 1024
)

// ownerKey names an identity's consumers on one stream.
type ownerKey struct{ stream, owner string }

// ConsumerConfig is what CONSUMER_OPEN carries. Reopening a consumer must repeat it exactly.
type ConsumerConfig struct {
	Filter        string // subject pattern; "" = every record of the stream
	StartSequence uint64 // deliver records with sequence >= StartSequence; 0 = from the first retained
	AckWait       time.Duration
	MaxAckPending int
}

// Delivery is one record handed to a consumer. Payload is owned by the caller.
type Delivery struct {
	Sequence        uint64
	TimestampMillis uint64
	DeliveryCount   uint32
	Subject         string
	Reply           string
	Payload         []byte
}

type pending struct {
	count       uint32
	deliveredAt uint64 // Unix ms
}

// consumer is one durable consumer; mu orders its state changes and their writes.
type consumer struct {
	st           *stream
	owner, name  string
	cfg          ConsumerConfig
	key, pprefix []byte
	mu           sync.Mutex
	cursor       uint64
	pending      map[uint64]pending
	ownerPending *atomic.Int64 // shared by the owner's consumers of the stream
	maxOwner     int64
}

// ownerCounter returns the pending counter of owner on stream; s.cmu is held.
func (s *Store) ownerCounter(stream, owner string) *atomic.Int64 {
	k := ownerKey{stream, owner}
	n := s.pendingOf[k]
	if n == nil {
		n = new(atomic.Int64)
		s.pendingOf[k] = n
	}
	return n
}

func (c *ConsumerConfig) validate() error {
	if c.Filter != "" {
		if err := subject.ValidPattern(c.Filter); err != nil {
			return fmt.Errorf("%w: filter %q: %v", ErrInvalid, c.Filter, err)
		}
	}
	if c.AckWait < time.Millisecond || c.AckWait > MaxAckWait {
		return fmt.Errorf("%w: ack wait must be 1-3,600,000 ms", ErrInvalid)
	}
	if c.MaxAckPending < 1 || c.MaxAckPending > MaxAckPendingCap {
		return fmt.Errorf("%w: max ack pending must be 1-65,536", ErrInvalid)
	}
	return nil
}

func (c *ConsumerConfig) record(cursor uint64) *riftstore.ConsumerRecord {
	return &riftstore.ConsumerRecord{Filter: c.Filter, StartSequence: c.StartSequence,
		AckWaitMs: uint32(c.AckWait / time.Millisecond), MaxAckPending: uint32(c.MaxAckPending), Cursor: cursor}
}

// OpenConsumer creates the consumer (owner, stream, name), or resumes it when it exists with the
// same configuration; a different configuration is an error.
func (s *Store) OpenConsumer(owner, name, consumerName string, cfg ConsumerConfig) error {
	st, err := s.stream(name)
	if err != nil {
		return err
	}
	if err := subject.ValidName(consumerName); err != nil {
		return fmt.Errorf("%w: consumer %q: %v", ErrInvalid, consumerName, err)
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	key := consumerKey(name, owner, consumerName)
	s.cmu.Lock()
	if c, ok := s.consumers[string(key)]; ok {
		s.cmu.Unlock()
		if c.cfg != cfg {
			return fmt.Errorf("%w: consumer %s exists with a different configuration", ErrInvalid, consumerName)
		}
		return nil
	}
	if st.gone.Load() {
		s.cmu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	if s.owned[ownerKey{name, owner}] >= MaxConsumersPerOwner {
		s.cmu.Unlock()
		return fmt.Errorf("%w: %s has %d consumers on stream %s, the most there may be", ErrInvalid, owner, MaxConsumersPerOwner, name)
	}
	c := &consumer{st: st, owner: owner, name: consumerName, cfg: cfg, key: key,
		pprefix: pendingPrefix(name, owner, consumerName), cursor: max(cfg.StartSequence, 1), pending: map[uint64]pending{},
		ownerPending: s.ownerCounter(name, owner), maxOwner: int64(s.opts.MaxOwnerPending)}
	c.mu.Lock()
	s.consumers[string(key)] = c
	s.owned[ownerKey{name, owner}]++
	s.cmu.Unlock()
	b := st.db.NewBatch()
	defer b.Close()
	b.Set(key, encode(cfg.record(c.cursor)), nil)
	return commit(st.db, b, st.cfg.Durability, &c.mu)
}

func (s *Store) consumer(owner, name, consumerName string) (*consumer, error) {
	if _, err := s.stream(name); err != nil {
		return nil, err
	}
	s.cmu.Lock()
	c, ok := s.consumers[string(consumerKey(name, owner, consumerName))]
	s.cmu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %q on stream %s", ErrNotFound, consumerName, name)
	}
	return c, nil
}

// Fetch returns up to limit records without waiting: first deliveries whose ack wait has passed
// (delivery count + 1), then new records matching the filter, never more than MaxAckPending
// unacknowledged at once. It returns after the consumer's new state is durable.
func (s *Store) Fetch(owner, name, consumerName string, limit int) ([]Delivery, error) {
	if limit < 1 || limit > MaxFetch {
		return nil, fmt.Errorf("%w: fetch limit must be 1-256", ErrInvalid)
	}
	c, err := s.consumer(owner, name, consumerName)
	if err != nil {
		return nil, err
	}
	now := uint64(max(s.now().UnixMilli(), 0))
	b := c.st.db.NewBatch()
	defer b.Close()
	c.mu.Lock()
	if c.st.gone.Load() {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	out, err := c.redeliver(b, now, limit)
	if err == nil {
		out, err = c.deliverNew(b, now, limit, out)
	}
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if b.Empty() {
		c.mu.Unlock()
		return out, nil
	}
	return out, commit(c.st.db, b, c.st.cfg.Durability, &c.mu)
}

// redeliver collects the deliveries whose ack wait has passed, in sequence order; c.mu is held.
func (c *consumer) redeliver(b *pebble.Batch, now uint64, limit int) ([]Delivery, error) {
	wait := uint64(c.cfg.AckWait / time.Millisecond)
	var due []uint64
	for seq, p := range c.pending {
		if p.deliveredAt+wait <= now {
			due = append(due, seq)
		}
	}
	slices.Sort(due)
	var out []Delivery
	for _, seq := range due {
		if len(out) == limit {
			break
		}
		rec, ok, err := c.st.readRecord(recordKey(nil, c.st.cfg.Name, seq))
		if err != nil {
			return nil, err
		}
		pk := pendingKey(c.pprefix, seq)
		if !ok { // retention removed it: nothing left to deliver
			delete(c.pending, seq)
			c.ownerPending.Add(-1)
			b.Delete(pk, nil)
			continue
		}
		p := pending{count: c.pending[seq].count + 1, deliveredAt: now}
		c.pending[seq] = p
		b.Set(pk, encode(&riftstore.PendingRecord{DeliveryCount: p.count, DeliveredAt: now}), nil)
		out = append(out, delivery(seq, p.count, rec))
	}
	return out, nil
}

// deliverNew appends first deliveries from the cursor on; c.mu is held.
func (c *consumer) deliverNew(b *pebble.Batch, now uint64, limit int, out []Delivery) ([]Delivery, error) {
	if len(out) >= limit || c.full() {
		return out, nil
	}
	lo := recordKey(nil, c.st.cfg.Name, c.cursor)
	_, hi := recordBounds(c.st.cfg.Name)
	it, err := c.st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	start := c.cursor
	for ok, n := it.First(), 0; ok && n < scanBudget; ok, n = it.Next(), n+1 {
		seq := seqOf(it.Key())
		c.cursor = seq + 1
		var rec riftstore.StreamRecord
		if err := decode(it.Value(), &rec); err != nil {
			it.Close()
			return nil, err
		}
		if c.cfg.Filter != "" && !subject.Match(c.cfg.Filter, rec.Subject) {
			continue
		}
		rec.Payload = append([]byte(nil), rec.Payload...)
		c.pending[seq] = pending{count: 1, deliveredAt: now}
		c.ownerPending.Add(1)
		b.Set(pendingKey(c.pprefix, seq), encode(&riftstore.PendingRecord{DeliveryCount: 1, DeliveredAt: now}), nil)
		out = append(out, delivery(seq, 1, rec))
		if len(out) >= limit || c.full() {
			break
		}
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	if c.cursor != start {
		b.Set(c.key, encode(c.cfg.record(c.cursor)), nil)
	}
	return out, nil
}

// full reports whether the consumer may take no new delivery: its max_ack_pending, or its
// owner's bound on the stream (Options.MaxOwnerPending), is reached. c.mu is held.
func (c *consumer) full() bool {
	return len(c.pending) >= c.cfg.MaxAckPending || c.ownerPending.Load() >= c.maxOwner
}

func delivery(seq uint64, count uint32, rec riftstore.StreamRecord) Delivery {
	return Delivery{Sequence: seq, TimestampMillis: rec.TimestampMillis, DeliveryCount: count,
		Subject: rec.Subject, Reply: rec.Reply, Payload: rec.Payload}
}

// Ack acknowledges seq. Acknowledging an already-acknowledged sequence succeeds; a sequence never
// delivered to this consumer is an error.
func (s *Store) Ack(owner, name, consumerName string, seq uint64) error {
	c, err := s.consumer(owner, name, consumerName)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.st.gone.Load() {
		c.mu.Unlock()
		return fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	if _, ok := c.pending[seq]; ok {
		delete(c.pending, seq)
		c.ownerPending.Add(-1)
		b := c.st.db.NewBatch()
		defer b.Close()
		b.Delete(pendingKey(c.pprefix, seq), nil)
		return commit(c.st.db, b, c.st.cfg.Durability, &c.mu)
	}
	defer c.mu.Unlock()
	if seq == 0 || seq < c.cfg.StartSequence || seq >= c.cursor {
		return fmt.Errorf("%w: sequence %d was never delivered to consumer %s", ErrInvalid, seq, consumerName)
	}
	// Below the cursor and not pending: acknowledged already, unless the filter skipped it.
	rec, ok, err := c.st.readRecord(recordKey(nil, name, seq))
	if err != nil {
		return err
	}
	if ok && c.cfg.Filter != "" && !subject.Match(c.cfg.Filter, rec.Subject) {
		return fmt.Errorf("%w: sequence %d was never delivered to consumer %s", ErrInvalid, seq, consumerName)
	}
	return nil
}

// loadConsumers reads every consumer of st and its pending deliveries.
func (s *Store) loadConsumers(st *stream) error {
	lo := append(append([]byte{kindConsumer}, st.cfg.Name...), 0)
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		parts := splitNUL(it.Key()[len(lo):])
		if len(parts) != 2 {
			return fmt.Errorf("stream %s: corrupt consumer key %q", st.cfg.Name, it.Key())
		}
		var rec riftstore.ConsumerRecord
		if err := decode(it.Value(), &rec); err != nil {
			return err
		}
		c := &consumer{st: st, owner: parts[0], name: parts[1], key: append([]byte(nil), it.Key()...),
			pprefix: pendingPrefix(st.cfg.Name, parts[0], parts[1]), cursor: rec.Cursor, pending: map[uint64]pending{},
			ownerPending: s.ownerCounter(st.cfg.Name, parts[0]), maxOwner: int64(s.opts.MaxOwnerPending),
			cfg: ConsumerConfig{Filter: rec.Filter, StartSequence: rec.StartSequence,
				AckWait: time.Duration(rec.AckWaitMs) * time.Millisecond, MaxAckPending: int(rec.MaxAckPending)}}
		if err := c.loadPending(); err != nil {
			return err
		}
		s.consumers[string(c.key)] = c
		s.owned[ownerKey{st.cfg.Name, c.owner}]++
	}
	return nil
}

func (c *consumer) loadPending() error {
	it, err := c.st.db.NewIter(&pebble.IterOptions{LowerBound: c.pprefix, UpperBound: prefixEnd(c.pprefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		var p riftstore.PendingRecord
		if err := decode(it.Value(), &p); err != nil {
			return err
		}
		c.pending[seqOf(it.Key())] = pending{count: p.DeliveryCount, deliveredAt: p.DeliveredAt}
		c.ownerPending.Add(1)
	}
	return nil
}

func splitNUL(b []byte) []string {
	var out []string
	for {
		i := slices.Index(b, 0)
		if i < 0 {
			return append(out, string(b))
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
}
