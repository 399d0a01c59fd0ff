// Package stream keeps Rift's durable streams and their consumers in Pebble.
//
// A stream is defined server-side, in the configuration (given to Open) or at run time (Create,
// Delete: see admin.go): a name, the subject patterns it accepts, retention (most messages, most
// bytes, oldest age; the oldest records go first), a payload limit and a durability:
//
//   - Fsync: Publish returns after the record is fsynced. Concurrent publishers share fsyncs:
//     each append enters Pebble's commit pipeline in sequence order and then waits for the WAL
//     sync that covers it (group commit).
//   - OS: Publish returns once the record is handed to Pebble's write-ahead log, without fsync;
//     it survives a process crash once the log writer has flushed (microseconds), not a power
//     loss.
//   - Memory: records live in an in-memory Pebble and vanish with the process.
//
// A stream created at run time keeps its definition in the durable database, so it is there again
// after a restart; deleting it drops its records and consumers.
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

// Errors. Every error a client may cause wraps ErrInvalid, ErrUnknownStream, ErrNotFound or
// ErrExists.
var (
	ErrUnknownStream = errors.New("unknown stream")
	ErrInvalid       = errors.New("invalid stream operation")
	ErrNotFound      = errors.New("unknown consumer")
	ErrExists        = errors.New("stream exists")
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
	// MaxStreams bounds how many streams there may be; Create refuses one more (DefaultMaxStreams).
	// Streams of the configuration count but are never refused.
	MaxStreams int
}

// DefaultMaxStreams is how many streams Create allows by default.
const DefaultMaxStreams = 1024

// DefaultMaxOwnerPending is four consumers' worth of the largest max_ack_pending.
const DefaultMaxOwnerPending = 4 * MaxAckPendingCap

// Store holds every stream. Its methods are safe for concurrent use.
type Store struct {
	opts Options
	disk *pebble.DB // nil without Options.Dir
	mem  *pebble.DB

	admin sync.Mutex              // orders Create and Delete
	cat   atomic.Pointer[catalog] // replaced whole by Create and Delete; read without a lock

	cmu       sync.Mutex
	consumers map[string]*consumer       // by consumerKey
	owned     map[ownerKey]int           // consumers of each owner on each stream (MaxConsumersPerOwner)
	pendingOf map[ownerKey]*atomic.Int64 // unacknowledged deliveries of each owner on each stream

	quit chan struct{}
	wg   sync.WaitGroup
}

// catalog is the set of streams at one moment. It is never changed once published.
type catalog struct {
	streams map[string]*stream
	names   []string // configuration order, then creation order
}

// stream is one stream's state; mu orders appends and retention.
type stream struct {
	cfg     Config
	db      *pebble.DB
	runtime bool        // created at run time (it has a definition record), not configured
	gone    atomic.Bool // deleted: set before the records go, under mu and every consumer's mu

	mu     sync.Mutex
	first  uint64 // lowest retained sequence; first == last+1 when empty
	meta   riftstore.StreamMeta
	keyBuf []byte
}

// Info describes a stream: its definition and a snapshot of its counters.
type Info struct {
	Name       string   `json:"name"`
	Subjects   []string `json:"subjects"`
	Durability string   `json:"durability"`
	MaxMsgs    int64    `json:"max_msgs"`
	MaxBytes   int64    `json:"max_bytes"`
	MaxAgeMs   int64    `json:"max_age_ms"`
	MaxPayload int      `json:"max_payload"`
	// Source is "config" for a stream of the configuration, "runtime" for one made by Create.
	Source        string `json:"source"`
	Messages      uint64 `json:"messages"`
	Bytes         uint64 `json:"bytes"`
	FirstSequence uint64 `json:"first_sequence"`
	LastSequence  uint64 `json:"last_sequence"`
	Consumers     int    `json:"consumers"`
}

// Open opens (creating if needed) the stores, validates cfgs, loads the streams created at run
// time, each stream's counters and consumers, and enforces retention once. A stream created at
// run time whose name cfgs now defines becomes the configured one (its definition is dropped, its
// records and consumers stay).
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
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if err := validate(cfgs); err != nil {
		return nil, err
	}
	s := &Store{opts: o, consumers: map[string]*consumer{}, owned: map[ownerKey]int{}, pendingOf: map[ownerKey]*atomic.Int64{}, quit: make(chan struct{})}
	s.cat.Store(&catalog{streams: map[string]*stream{}})
	if err := s.open(cfgs); err != nil {
		s.Close()
		return nil, err
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
		errs = append(errs, c.check()...)
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("stream %s: defined twice", c.Name))
		}
		seen[c.Name] = true
	}
	return errors.Join(errs...)
}

// MaxPayloadLimit is the protocol's payload limit, the largest MaxPayload.
const MaxPayloadLimit = 1 << 20

// check returns what is wrong with c.
func (c *Config) check() []error {
	var errs []error
	if err := subject.ValidName(c.Name); err != nil {
		errs = append(errs, fmt.Errorf("stream %q: %w", c.Name, err))
	}
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
	if c.MaxPayload > MaxPayloadLimit {
		errs = append(errs, fmt.Errorf("stream %s: max payload %d exceeds the protocol's %d", c.Name, c.MaxPayload, MaxPayloadLimit))
	}
	if c.Durability > Memory {
		errs = append(errs, fmt.Errorf("stream %s: unknown durability", c.Name))
	}
	return errs
}

// open opens the databases and loads the configured streams, then those created at run time.
func (s *Store) open(cfgs []Config) error {
	var err error
	if s.mem, err = pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}}); err != nil {
		return err
	}
	if s.opts.Dir != "" {
		if s.disk, err = pebble.Open(s.opts.Dir, &pebble.Options{Logger: quietLogger{}}); err != nil {
			return fmt.Errorf("stream: open %s: %w", s.opts.Dir, err)
		}
	}
	defs, err := s.definitions()
	if err != nil {
		return err
	}
	cat := s.cat.Load()
	for _, c := range cfgs {
		if _, ok := defs[c.Name]; ok {
			s.opts.Logger.Warn("rift stream created at run time is now defined in the configuration, which wins", "stream", c.Name)
			if err := s.disk.Delete(definitionKey(c.Name), pebble.Sync); err != nil {
				return err
			}
			delete(defs, c.Name)
		}
		if err := s.add(cat, c, false); err != nil {
			return err
		}
	}
	for _, c := range sortedDefinitions(defs) {
		if err := s.add(cat, c, true); err != nil {
			return err
		}
	}
	return nil
}

// add loads stream c and its consumers into cat (during Open, before cat is shared).
func (s *Store) add(cat *catalog, c Config, runtime bool) error {
	st, err := s.newStream(c, runtime)
	if err != nil {
		return err
	}
	if err := st.load(); err != nil {
		return err
	}
	cat.streams[c.Name] = st
	cat.names = append(cat.names, c.Name)
	return s.loadConsumers(st)
}

// newStream returns the stream of c in the database its durability says.
func (s *Store) newStream(c Config, runtime bool) (*stream, error) {
	st := &stream{cfg: c, db: s.mem, runtime: runtime}
	if c.Durability != Memory {
		if s.disk == nil {
			return nil, fmt.Errorf("stream %s: durable streams need a directory", c.Name)
		}
		st.db = s.disk
	}
	return st, nil
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

// Names returns the stream names: the configured ones in configuration order, then those created
// at run time. The caller must not change the slice.
func (s *Store) Names() []string { return s.cat.Load().names }

// Info describes a stream.
func (s *Store) Info(name string) (Info, error) {
	st, err := s.stream(name)
	if err != nil {
		return Info{}, err
	}
	c := st.cfg
	in := Info{Name: name, Subjects: c.Subjects, Durability: c.Durability.String(), MaxMsgs: c.MaxMsgs, MaxBytes: c.MaxBytes,
		MaxAgeMs: c.MaxAge.Milliseconds(), MaxPayload: c.MaxPayload, Source: "config"}
	if st.runtime {
		in.Source = "runtime"
	}
	st.mu.Lock()
	in.Messages, in.Bytes = st.meta.LastSequence+1-st.first, st.meta.Bytes
	in.FirstSequence, in.LastSequence = st.first, st.meta.LastSequence
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
	st, ok := s.cat.Load().streams[name]
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
	if st.gone.Load() {
		st.mu.Unlock()
		return 0, 0, fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
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
	cat := s.cat.Load()
	for _, name := range cat.names {
		st := cat.streams[name]
		b := st.db.NewBatch()
		st.mu.Lock()
		if st.gone.Load() {
			st.mu.Unlock()
			b.Close()
			continue
		}
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
