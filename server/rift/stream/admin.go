package stream

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/filamq/fila/generated/riftstore"
)

// Create adds a stream at run time and returns its description. Its definition is written to the
// durable database (fsynced) before Create returns, so the stream is there again after a
// restart, empty when its durability is Memory. Creating a stream that exists with the same
// definition changes nothing (created is false); with another definition it is ErrExists. A
// new stream starts empty, whatever an earlier stream of that name left behind.
func (s *Store) Create(c Config) (in Info, created bool, err error) {
	if err := errors.Join(c.check()...); err != nil {
		return Info{}, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c.Subjects = slices.Clone(c.Subjects)
	c.MaxAge = c.MaxAge.Truncate(time.Millisecond) // as the definition keeps it
	s.admin.Lock()
	defer s.admin.Unlock()
	old := s.cat.Load()
	if st, ok := old.streams[c.Name]; ok {
		if !sameConfig(st.cfg, c) {
			return Info{}, false, fmt.Errorf("%w: %s, with another definition", ErrExists, c.Name)
		}
		in, err := s.Info(c.Name)
		return in, false, err
	}
	if len(old.names) >= s.opts.MaxStreams {
		return Info{}, false, fmt.Errorf("%w: there are %d streams, the most there may be", ErrInvalid, len(old.names))
	}
	st, err := s.newStream(c, true)
	if err != nil {
		return Info{}, false, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	st.first = 1
	if err := s.writeDefinition(st); err != nil {
		return Info{}, false, err
	}
	cat := &catalog{streams: maps.Clone(old.streams), names: slices.Clone(old.names)}
	cat.streams[c.Name] = st
	cat.names = insertRuntime(cat, c.Name)
	s.cat.Store(cat)
	in, err = s.Info(c.Name)
	return in, true, err
}

// insertRuntime returns cat.names with name placed among the streams created at run time, which
// follow the configured ones in name order (the order they load in after a restart).
func insertRuntime(cat *catalog, name string) []string {
	i := len(cat.names)
	for i > 0 {
		prev := cat.streams[cat.names[i-1]]
		if !prev.runtime || cat.names[i-1] < name {
			break
		}
		i--
	}
	return slices.Insert(cat.names, i, name)
}

func sameConfig(a, b Config) bool {
	return slices.Equal(a.Subjects, b.Subjects) && a.Durability == b.Durability && a.MaxMsgs == b.MaxMsgs &&
		a.MaxBytes == b.MaxBytes && a.MaxAge == b.MaxAge && a.MaxPayload == b.MaxPayload
}

// writeDefinition clears whatever an earlier stream of st's name left and writes st's definition
// (to the durable database, when there is one): in one fsynced batch when both are there.
func (s *Store) writeDefinition(st *stream) error {
	name := st.cfg.Name
	b := st.db.NewBatch()
	defer b.Close()
	if err := clearStream(b, name); err != nil {
		return err
	}
	if s.disk == nil {
		return b.Commit(pebble.Sync)
	}
	if st.db != s.disk {
		if err := b.Commit(pebble.Sync); err != nil {
			return err
		}
		b = s.disk.NewBatch()
		defer b.Close()
	}
	c := st.cfg
	def := riftstore.StreamDefinition{Subjects: c.Subjects, Durability: uint8(c.Durability), MaxMsgs: uint64(c.MaxMsgs),
		MaxBytes: uint64(c.MaxBytes), MaxAgeMs: uint64(c.MaxAge.Milliseconds()), MaxPayload: uint32(c.MaxPayload)}
	if err := b.Set(definitionKey(name), encode(&def), nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// clearStream adds to b the deletion of every key of stream name but its definition.
func clearStream(b *pebble.Batch, name string) error {
	for _, p := range streamPrefixes(name) {
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return err
		}
	}
	return b.Delete(metaKey(name), nil)
}

// Delete removes a stream created at run time with its records and consumers: once it returns,
// publishing to it, fetching from it and acknowledging on it fail with ErrUnknownStream, and its
// data is deleted durably. A stream of the configuration cannot be deleted (ErrInvalid): it
// would come back at the next start.
func (s *Store) Delete(name string) error {
	s.admin.Lock()
	defer s.admin.Unlock()
	old := s.cat.Load()
	st, ok := old.streams[name]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownStream, name)
	}
	if !st.runtime {
		return fmt.Errorf("%w: stream %s is defined in the configuration: remove it there", ErrInvalid, name)
	}
	cat := &catalog{streams: maps.Clone(old.streams), names: slices.DeleteFunc(slices.Clone(old.names), func(n string) bool { return n == name })}
	delete(cat.streams, name)
	s.cat.Store(cat)

	// gone is set first: whoever takes a lock below after us sees it and writes nothing; whoever
	// held it has entered its write into Pebble's pipeline ahead of the deletion.
	st.gone.Store(true)
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range s.dropConsumers(st) {
		c.mu.Lock() // waits for a write in progress
		c.pending = nil
		c.mu.Unlock()
	}
	b := st.db.NewBatch()
	defer b.Close()
	if s.disk != nil {
		if st.db != s.disk { // a memory stream: its definition goes first, durably
			if err := s.disk.Delete(definitionKey(name), pebble.Sync); err != nil {
				return err
			}
		} else if err := b.Delete(definitionKey(name), nil); err != nil {
			return err
		}
	}
	if err := clearStream(b, name); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// dropConsumers forgets st's consumers and returns them.
func (s *Store) dropConsumers(st *stream) []*consumer {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	var out []*consumer
	for k, c := range s.consumers {
		if c.st == st {
			out = append(out, c)
			delete(s.consumers, k)
		}
	}
	for k := range s.owned {
		if k.stream == st.cfg.Name {
			delete(s.owned, k)
		}
	}
	for k := range s.pendingOf {
		if k.stream == st.cfg.Name {
			delete(s.pendingOf, k)
		}
	}
	return out
}

// definitions reads the streams created at run time from the durable database.
func (s *Store) definitions() (map[string]Config, error) {
	defs := map[string]Config{}
	if s.disk == nil {
		return defs, nil
	}
	lo := []byte{kindDefinition}
	it, err := s.disk.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		var d riftstore.StreamDefinition
		if err := decode(it.Value(), &d); err != nil {
			return nil, err
		}
		c := Config{Name: string(it.Key()[1:]), Subjects: d.Subjects, Durability: Durability(d.Durability),
			MaxMsgs: int64(d.MaxMsgs), MaxBytes: int64(d.MaxBytes), MaxAge: time.Duration(d.MaxAgeMs) * time.Millisecond,
			MaxPayload: int(d.MaxPayload)}
		if err := errors.Join(c.check()...); err != nil {
			return nil, fmt.Errorf("stream: corrupt definition: %w", err)
		}
		defs[c.Name] = c
	}
	return defs, it.Error()
}

// sortedDefinitions returns defs in name order.
func sortedDefinitions(defs map[string]Config) []Config {
	out := make([]Config, 0, len(defs))
	for _, name := range slices.Sorted(maps.Keys(defs)) {
		out = append(out, defs[name])
	}
	return out
}
