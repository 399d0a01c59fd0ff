package auth

import (
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// BootstrapID is the key ID of the bootstrap key.
const BootstrapID = "bootstrap"

// Principal is an authenticated key as a connection sees it: an immutable snapshot of its record
// at one Store generation. A nil *Principal is the anonymous caller of a server without
// authentication, and may do everything.
type Principal struct {
	rec Record
}

// ID is the key ID.
func (p *Principal) ID() string { return p.rec.ID }

// Superadmin reports whether the key may do everything (always true for nil).
func (p *Principal) Superadmin() bool { return p == nil || p.rec.Superadmin }

// Expired reports whether the key is past its expiry at nowMs (never for nil).
func (p *Principal) Expired(nowMs int64) bool { return p != nil && p.rec.Expired(nowMs) }

// Expires reports whether the key has an expiry at all.
func (p *Principal) Expires() bool { return p != nil && p.rec.ExpiresAt != 0 }

// Allowed reports whether the key may do kind on queue (on the throttle of that name, for Throttle).
func (p *Principal) Allowed(kind Kind, queue string) bool {
	if p.Superadmin() {
		return true
	}
	for _, perm := range p.rec.ACL {
		if perm.Kind == kind && Match(perm.Pattern, queue) {
			return true
		}
	}
	return false
}

// Any reports whether the key has some permission on queue (what ListQueues shows); a throttle
// permission names throttles, not queues.
func (p *Principal) Any(queue string) bool {
	if p.Superadmin() {
		return true
	}
	for _, perm := range p.rec.ACL {
		if perm.Kind.OnQueues() && Match(perm.Pattern, queue) {
			return true
		}
	}
	return false
}

// Store is the set of API keys and their ACLs. The meta group's state machine changes it (Put,
// Revoke, SetACL, Replace) only as committed commands say; everything else reads. Safe for
// concurrent use.
type Store struct {
	mu        sync.RWMutex
	keys      map[string]*Principal // by ID
	byHash    map[Hash]*Principal
	bootstrap *Principal // nil: authentication is off
	gen       atomic.Uint64
	changed   chan struct{}               // closed (and replaced) when gen moves
	fresh     atomic.Pointer[func() bool] // nil: always current (fresh.go)
}

// NewStore returns an empty store with authentication off.
func NewStore() *Store {
	return &Store{keys: map[string]*Principal{}, byHash: map[Hash]*Principal{}, changed: make(chan struct{})}
}

// Changed returns a channel that is closed at the next change of a key or ACL, so that holders
// of a Principal that send no request (a consumer) hear of a revocation at once.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// moved advances the generation and wakes Changed's waiters; s.mu is held.
func (s *Store) moved() {
	s.gen.Add(1)
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetBootstrap turns authentication on with the operator's bootstrap superadmin secret.
func (s *Store) SetBootstrap(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bootstrap = &Principal{rec: Record{ID: BootstrapID, Name: BootstrapID, Hash: HashOf(secret), Superadmin: true}}
	s.moved()
}

// Enabled reports whether authentication is on.
func (s *Store) Enabled() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.bootstrap != nil
}

// Gen is the store's generation: it changes whenever a key or ACL does, so that a connection
// holding a Principal knows when to look its key up again.
func (s *Store) Gen() uint64 { return s.gen.Load() }

// Authenticate returns the key whose secret is secret (expiry is the caller's to check, with its
// clock). The secret's hash selects the key, and is then compared with the stored one in
// constant time; neither step's timing depends on the secret's bytes, only on its hash.
func (s *Store) Authenticate(secret string) (*Principal, bool) {
	if secret == "" {
		return nil, false
	}
	h := HashOf(secret)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.bootstrap != nil && s.bootstrap.rec.Hash.Equal(h) {
		return s.bootstrap, true
	}
	p, ok := s.byHash[h]
	if !ok || !p.rec.Hash.Equal(h) {
		return nil, false
	}
	return p, true
}

// Lookup returns the current state of key id: false when it was revoked (or never existed).
func (s *Store) Lookup(id string) (*Principal, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if id == BootstrapID && s.bootstrap != nil {
		return s.bootstrap, true
	}
	p, ok := s.keys[id]
	return p, ok
}

// Get returns a copy of key id's record.
func (s *Store) Get(id string) (Record, bool) {
	p, ok := s.Lookup(id)
	if !ok {
		return Record{}, false
	}
	r := p.rec
	r.ACL = slices.Clone(r.ACL)
	return r, true
}

// List returns every key's record (the bootstrap key is not one: it lives in configuration), by
// ID.
func (s *Store) List() []Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Record, 0, len(s.keys))
	for _, p := range s.keys {
		r := p.rec
		r.ACL = slices.Clone(r.ACL)
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Len counts the stored keys (the bootstrap key is not one).
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.keys)
}

// Put adds or replaces a key (a replaced key keeps the ACL given in r).
func (s *Store) Put(r Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(r)
	s.moved()
}

func (s *Store) putLocked(r Record) {
	if old, ok := s.keys[r.ID]; ok {
		delete(s.byHash, old.rec.Hash)
	}
	p := &Principal{rec: r}
	s.keys[r.ID] = p
	s.byHash[r.Hash] = p
}

// Revoke deletes a key; false when there is none.
func (s *Store) Revoke(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.keys[id]
	if !ok {
		return false
	}
	delete(s.keys, id)
	delete(s.byHash, p.rec.Hash)
	s.moved()
	return true
}

// SetACL replaces a key's ACL; false when there is no such key.
func (s *Store) SetACL(id string, acl []Permission) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.keys[id]
	if !ok {
		return false
	}
	r := p.rec
	r.ACL = slices.Clone(acl)
	s.putLocked(r)
	s.moved()
	return true
}

// Replace replaces every key (a snapshot's restore); the bootstrap key stays.
func (s *Store) Replace(recs []Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys, s.byHash = map[string]*Principal{}, map[Hash]*Principal{}
	for _, r := range recs {
		s.putLocked(r)
	}
	s.moved()
}
