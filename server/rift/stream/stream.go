// Package stream keeps Rift's durable streams and their consumers in Pebble.
//
// A stream is configured server-side: a name, the subject patterns it accepts, retention (most
// messages, most bytes, oldest age; the oldest records go first), a payload limit and a
// durability:
//
//   - Fsync: Publish returns after the record is fsynced. Concurrent publishers share fsyncs:
//     each append enters Pebble's commit pipeline in sequence order and then waits for the WAL
//     sync that covers it (group commit).
//   - OS: Publish returns once the record is handed to Pebble's write-ahead log, without fsync;
//     it survives a process crash once the log writer has flushed (microseconds), not a power
//     loss.
//   - Memory: records live in an in-memory Pebble and vanish with the process.
//
// Sequences start at 1 and never repeat (the last one is persisted with every append). Durable
// consumers are identified by (owner, stream, name): their cursor and unacknowledged deliveries
// are persisted with the stream's durability, so they survive a restart.
package stream

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/filamq/fila/generated/riftstore"
	"github.com/filamq/fila/server/rift/subject"
)

// Durability says when Publish returns.
type Durability uint8

const (
	Fsync  Durability = iota // after fsync (group-committed)
	OS                       // after the write is handed to the OS
	Memory                   // not persisted
)

// ParseDurability parses "fsync", "os" or "memory" ("" is fsync).
func ParseDurability(s string) (Durability, error) {
	switch s {
	case "", "fsync":
		return Fsync, nil
	case "os":
		return OS, nil
	case "memory":
		return Memory, nil
	}
	return 0, fmt.Errorf("durability %q is not fsync, os or memory", s)
}

func (d Durability) String() string {
	return [...]string{"fsync", "os", "memory"}[d]
}

// Config describes one stream.
type Config struct {
	Name       string
	Subjects   []string // patterns a published subject must match
	Durability Durability
	MaxMsgs    int64         // 0 = unlimited
	MaxBytes   int64         // 0 = unlimited (subject + reply + payload of the retained records)
	MaxAge     time.Duration // 0 = unlimited
	MaxPayload int           // 0 = the protocol limit, 1 MiB
}

// Errors. Every error a client may cause wraps ErrInvalid, ErrUnknownStream or ErrNotFound.
var (
	ErrUnknownStream = errors.New("unknown stream")
	ErrInvalid       = errors.New("invalid stream operation")
	ErrNotFound      = errors.New("unknown consumer")
	ErrClosed        = errors.New("stream: store closed")
)

// Options configures a Store. Zero fields take the defaults shown.
type Options struct {
	Dir           string           // where the durable Pebble lives; required when a stream is not Memory
	Clock         func() time.Time // time.Now
	Logger        *slog.Logger     // slog.Default()
	SweepInterval time.Duration    // how often max_age is enforced (1 s)
	// MaxOwnerPending bounds the unacknowledged deliveries of one identity's consumers on one
	// stream together (DefaultMaxOwnerPending): each is held in memory and on disk.
	MaxOwnerPending int
}

// DefaultMaxOwnerPending is four consumers' worth of the largest max_ack_pending.
const DefaultMaxOwnerPending = 4 * MaxAckPendingCap

// Store holds every configured stream. Its methods are safe for concurrent use.
type Store struct {
	opts    Options
	disk    *pebble.DB // nil when every stream is Memory
	mem     *pebble.DB
	streams map[string]*stream
	names   []string

	cmu       sync.Mutex
	consumers map[string]*consumer       // by consumerKey
	owned     map[ownerKey]int           // consumers of each owner on each stream (MaxConsumersPerOwner)
	pendingOf map[ownerKey]*atomic.Int64 // unacknowledged deliveries of each owner on each stream

	quit chan struct{}
	wg   sync.WaitGroup
}

// stream is one stream's state; mu orders appends and retention.
type stream struct {
	cfg Config
	db  *pebble.DB

	mu     sync.Mutex
	first  uint64 // lowest retained sequence; first == last+1 when empty
	meta   riftstore.StreamMeta
	keyBuf []byte
}

// Info is a snapshot of a stream's counters.
type Info struct {
	Name          string `json:"name"`
	Durability    string `json:"durability"`
	Messages      uint64 `json:"messages"`
	Bytes         uint64 `json:"bytes"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	Consumers     int    `json:"consumers"`
}

// Open opens (creating if needed) the stores, validates cfgs, loads each stream's counters and
// consumers, and enforces retention once.
func Open(o Options, cfgs []Config) (*Store, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Second
	}
	if o.MaxOwnerPending <= 0 {
		o.MaxOwnerPending = DefaultMaxOwnerPending
	}
	if err := validate(cfgs); err != nil {
		return nil, err
	}
	s := &Store{opts: o, streams: map[string]*stream{}, consumers: map[string]*consumer{}, owned: map[ownerKey]int{}, pendingOf: map[ownerKey]*atomic.Int64{}, quit: make(chan struct{})}
	var err error
	if s.mem, err = pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}}); err != nil {
		return nil, err
	}
	for _, c := range cfgs {
		if c.Durability != Memory && s.disk == nil {
			if o.Dir == "" {
				s.Close()
				return nil, errors.New("stream: durable streams need a directory")
			}
			if s.disk, err = pebble.Open(o.Dir, &pebble.Options{Logger: quietLogger{}}); err != nil {
				s.Close()
				return nil, fmt.Errorf("stream: open %s: %w", o.Dir, err)
			}
		}
	}
	for _, c := range cfgs {
		st := &stream{cfg: c, db: s.mem}
		if c.Durability != Memory {
			st.db = s.disk
		}
		if err := st.load(); err != nil {
			s.Close()
			return nil, err
		}
		s.streams[c.Name] = st
		s.names = append(s.names, c.Name)
		if err := s.loadConsumers(st); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.Sweep()
	s.wg.Add(1)
	go s.sweeper()
	return s, nil
}

func validate(cfgs []Config) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range cfgs {
		if err := subject.ValidName(c.Name); err != nil {
			errs = append(errs, fmt.Errorf("stream %q: %w", c.Name, err))
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("stream %s: defined twice", c.Name))
		}
		seen[c.Name] = true
		if len(c.Subjects) == 0 {
			errs = append(errs, fmt.Errorf("stream %s: needs at least one subject pattern", c.Name))
		}
		for _, p := range c.Subjects {
			if err := subject.ValidPattern(p); err != nil {
				errs = append(errs, fmt.Errorf("stream %s: subject %q: %w", c.Name, p, err))
			}
		}
		if c.MaxMsgs < 0 || c.MaxBytes < 0 || c.MaxAge < 0 || c.MaxPayload < 0 {
			errs = append(errs, fmt.Errorf("stream %s: limits must not be negative", c.Name))
		}
		if c.Durability > Memory {
			errs = append(errs, fmt.Errorf("stream %s: unknown durability", c.Name))
		}
	}
	return errors.Join(errs...)
}

// load reads the stream's counters and its first retained sequence.
func (st *stream) load() error {
	val, closer, err := st.db.Get(metaKey(st.cfg.Name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return err
	default:
		err = decode(val, &st.meta)
		closer.Close()
		if err != nil {
			return err
		}
	}
	st.first = st.meta.LastSequence + 1
	lo, hi := recordBounds(st.cfg.Name)
	it, err := st.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	if it.First() {
		st.first = seqOf(it.Key())
	}
	return it.Close()
}

// Close stops the sweeper and closes the databases.
func (s *Store) Close() error {
	select {
	case <-s.quit:
		return nil
	default:
	}
	close(s.quit)
	s.wg.Wait()
	var errs []error
	if s.disk != nil {
		errs = append(errs, s.disk.Close())
	}
	if s.mem != nil {
		errs = append(errs, s.mem.Close())
	}
	return errors.Join(errs...)
}

// Names returns the configured stream names in configuration order.
func (s *Store) Names() []string { return s.names }

// Info returns a stream's counters.
func (s *Store) Info(name string) (Info, error) {
	st, ok := s.streams[name]
	if !ok {
		return Info{}, fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	st.mu.Lock()
	in := Info{Name: name, Durability: st.cfg.Durability.String(), Messages: st.meta.LastSequence + 1 - st.first,
		Bytes: st.meta.Bytes, FirstSequence: st.first, LastSequence: st.meta.LastSequence}
	st.mu.Unlock()
	s.cmu.Lock()
	for _, c := range s.consumers {
		if c.st == st {
			in.Consumers++
		}
	}
	s.cmu.Unlock()
	return in, nil
}

func (s *Store) stream(name string) (*stream, error) {
	st, ok := s.streams[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	return st, nil
}

// Accepts reports whether the stream takes records published to subj.
func (st *stream) accepts(subj string) bool {
	for _, p := range st.cfg.Subjects {
		if subject.Match(p, subj) {
			return true
		}
	}
	return false
}

// Subjects returns the subject patterns of stream name.
func (s *Store) Subjects(name string) ([]string, error) {
	st, err := s.stream(name)
	if err != nil {
		return nil, err
	}
	return st.cfg.Subjects, nil
}

// Publish stores a record and returns its sequence and timestamp once the stream's durability
// boundary is reached. subj must be a valid literal subject. payload is copied.
func (s *Store) Publish(name, subj, reply string, payload []byte) (seq uint64, tsMillis uint64, err error) {
	st, err := s.stream(name)
	if err != nil {
		return 0, 0, err
	}
	if !st.accepts(subj) {
		return 0, 0, fmt.Errorf("%w: subject %q is not in stream %s", ErrInvalid, subj, name)
	}
	if max := st.cfg.MaxPayload; max > 0 && len(payload) > max {
		return 0, 0, fmt.Errorf("%w: payload of %d bytes exceeds stream %s's limit of %d", ErrInvalid, len(payload), name, max)
	}
	b := st.db.NewBatch()
	defer b.Close()
	st.mu.Lock()
	seq, tsMillis = st.append(b, s.now(), subj, reply, payload)
	if err := st.trim(b, s.now(), seq, recordSize(subj, reply, payload)); err != nil {
		st.mu.Unlock()
		return 0, 0, err
	}
	err = commit(st.db, b, st.cfg.Durability, &st.mu)
	return seq, tsMillis, err
}

// commit writes b to db with the given durability. mu (held by the caller) orders writes: it is
// released once b has entered Pebble's commit pipeline and before the fsync wait, so that
// concurrent committers share one fsync (group commit) while sequences stay in commit order.
func commit(db *pebble.DB, b *pebble.Batch, d Durability, mu sync.Locker) error {
	if d != Fsync {
		err := b.Commit(pebble.NoSync)
		mu.Unlock()
		return err
	}
	err := db.ApplyNoSyncWait(b, pebble.Sync)
	mu.Unlock()
	if err != nil {
		return err
	}
	return b.SyncWait()
}

func recordSize(subj, reply string, payload []byte) uint64 {
	return uint64(len(subj) + len(reply) + len(payload))
}

// append adds the next record to b and updates the counters; st.mu is held.
func (st *stream) append(b *pebble.Batch, now time.Time, subj, reply string, payload []byte) (uint64, uint64) {
	ts := uint64(max(now.UnixMilli(), 0))
	ts = max(ts, st.meta.LastTimestamp)
	st.meta.LastSequence++
	st.meta.LastTimestamp = ts
	st.meta.Bytes += recordSize(subj, reply, payload)
	st.keyBuf = recordKey(st.keyBuf[:0], st.cfg.Name, st.meta.LastSequence)
	rec := riftstore.StreamRecord{TimestampMillis: ts, Subject: subj, Reply: reply, Payload: payload}
	b.Set(st.keyBuf, encode(&rec), nil)
	return st.meta.LastSequence, ts
}

// trim deletes the oldest records while a retention limit is exceeded and writes the counters.
// newSeq/newSize describe a record appended to b but not yet committed (0 when none); st.mu is
// held.
func (st *stream) trim(b *pebble.Batch, now time.Time, newSeq, newSize uint64) error {
	c := st.cfg
	cutoff := uint64(0)
	if c.MaxAge > 0 {
		cutoff = uint64(max(now.Add(-c.MaxAge).UnixMilli(), 0))
	}
	for st.first <= st.meta.LastSequence {
		msgs := st.meta.LastSequence + 1 - st.first
		overCount := c.MaxMsgs > 0 && msgs > uint64(c.MaxMsgs)
		overBytes := c.MaxBytes > 0 && st.meta.Bytes > uint64(c.MaxBytes)
		if !overCount && !overBytes && cutoff == 0 {
			break
		}
		size, ts := newSize, uint64(now.UnixMilli())
		key := recordKey(nil, c.Name, st.first)
		if st.first != newSeq {
			var rec riftstore.StreamRecord
			val, closer, err := st.db.Get(key)
			if err != nil {
				return fmt.Errorf("stream %s: record %d: %w", c.Name, st.first, err)
			}
			err = decode(val, &rec)
			size, ts = recordSize(rec.Subject, rec.Reply, rec.Payload), rec.TimestampMillis
			closer.Close()
			if err != nil {
				return err
			}
		}
		if !overCount && !overBytes && ts >= cutoff {
			break
		}
		b.Delete(key, nil)
		st.meta.Bytes -= min(size, st.meta.Bytes)
		st.first++
	}
	return b.Set(metaKey(c.Name), encode(&st.meta), nil)
}

// Sweep enforces every stream's retention now (max_age also runs every SweepInterval).
func (s *Store) Sweep() {
	for _, name := range s.names {
		st := s.streams[name]
		b := st.db.NewBatch()
		st.mu.Lock()
		if err := st.trim(b, s.now(), 0, 0); err != nil {
			s.opts.Logger.Warn("rift stream retention failed", "stream", name, "err", err)
		}
		err := b.Commit(pebble.NoSync)
		st.mu.Unlock()
		b.Close()
		if err != nil {
			s.opts.Logger.Warn("rift stream retention failed", "stream", name, "err", err)
		}
	}
}

func (s *Store) sweeper() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

func (s *Store) now() time.Time { return s.opts.Clock() }

// readRecord returns the record at seq (ok false when retention removed it). The payload is a
// copy the caller owns.
func (st *stream) readRecord(key []byte) (riftstore.StreamRecord, bool, error) {
	var rec riftstore.StreamRecord
	val, closer, err := st.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, err
	}
	defer closer.Close()
	if err := decode(val, &rec); err != nil {
		return rec, false, err
	}
	rec.Payload = bytes.Clone(rec.Payload)
	return rec, true, nil
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	pebble.DefaultLogger.Fatalf(format, args...) // logs and exits: Pebble's contract
}
