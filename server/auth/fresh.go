package auth

// Freshness (docs/cluster.md, "Auth freshness"). A node of a cluster holds a copy of the keys and
// ACLs, which the meta group's leader changes; a node cut off from that leader would go on
// accepting a key revoked meanwhile. Its store is told how to find out whether its copy is
// current, and the edges refuse authenticated requests (the bootstrap key, which comes from the
// node's own configuration, excepted) while it is not. A single node's store has no such test:
// it is always current.

// SetFreshness gives the store the test of whether its copy is current: fresh reports whether
// this node can confirm it is (it must be cheap and safe for concurrent use: every authenticated
// request calls it). It is set once, before the store is used.
func (s *Store) SetFreshness(fresh func() bool) { s.fresh.Store(&fresh) }

// Fresh reports whether this node can confirm its copy of the keys and ACLs is current; always
// true without a test (a single node).
func (s *Store) Fresh() bool {
	f := s.fresh.Load()
	return f == nil || (*f)()
}

// Bootstrap reports whether p is the bootstrap key, which freshness does not apply to.
func (p *Principal) Bootstrap() bool { return p != nil && p.rec.ID == BootstrapID }

// MayGoStale reports whether the store has a freshness test (a node of a cluster), so that
// holders of a Principal look again from time to time even when nothing changes.
func (s *Store) MayGoStale() bool { return s.fresh.Load() != nil }
