package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ErrKeyNotFound is what Get and GetUint64 return for a key never set. Its text is exactly
// "not found": hashicorp/raft recognises a missing key only by comparing err.Error() with that
// string (NewRaft and HasExistingState for CurrentTerm, requestVote for LastVoteTerm and
// LastVoteCand), so this error is never wrapped and cannot name the group.
var ErrKeyNotFound = errors.New("not found")

// Set stores val under key, durably (see Options.NoSync).
func (s *Store) Set(key, val []byte) error {
	k := s.stableKey(key)
	if err := s.db.WriteStable(func(p *pebble.DB) error { return p.Set(k, val, s.wo) }); err != nil {
		return fmt.Errorf("raftstore: group %q: set %q: %w", s.prefix, key, err)
	}
	return nil
}

// Get returns a copy of the value under key, or ErrKeyNotFound. A value set empty comes back as
// an empty, non-nil slice.
func (s *Store) Get(key []byte) (out []byte, err error) {
	err = s.db.Read(func(p *pebble.DB) error {
		val, closer, err := p.Get(s.stableKey(key))
		if errors.Is(err, pebble.ErrNotFound) {
			return ErrKeyNotFound
		}
		if err != nil {
			return fmt.Errorf("raftstore: group %q: get %q: %w", s.prefix, key, err)
		}
		defer closer.Close()
		out = append([]byte{}, val...)
		return nil
	})
	return out, err
}

// SetUint64 stores val under key as 8 big-endian bytes, durably (see Options.NoSync).
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the number under key, or 0 and ErrKeyNotFound.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("%w: group %q: stable key %q holds %d bytes, not a uint64", ErrCorrupt,
			s.prefix, key, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// stableKey returns P 's' <key>.
func (s *Store) stableKey(key []byte) []byte {
	k := make([]byte, 0, len(s.prefix)+1+len(key))
	return append(append(append(k, s.prefix...), kindStable), key...)
}

// SetUnsynced stores val under key without an fsync of its own, failing at once while the
// database refuses writes: it becomes durable with the next synced write (Pebble's log keeps
// the order of writes), or a power failure loses it. For what a restart can do without.
func (s *Store) SetUnsynced(key, val []byte) error {
	k := s.stableKey(key)
	if err := s.db.Write(func(p *pebble.DB) error { return p.Set(k, val, pebble.NoSync) }); err != nil {
		return fmt.Errorf("raftstore: group %q: set %q: %w", s.prefix, key, err)
	}
	return nil
}
