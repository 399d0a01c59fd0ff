package broker

import (
	"sync/atomic"
	"time"

	"github.com/filamq/fila/server/raftgroup"
)

// Auth freshness (docs/cluster.md): a node of a cluster answers authenticated requests only while
// it can confirm its copy of the keys and ACLs is current — it leads the meta group, or it heard
// from the meta group's leader within Cluster.AuthMaxStaleness and has applied what that leader
// told it committed. The edges ask the key store (auth.Store.Fresh), which asks this.

// DefaultAuthMaxStaleness is Cluster.AuthMaxStaleness's default (auth.max_staleness_ms).
const DefaultAuthMaxStaleness = 5 * time.Second

// authFreshness tracks when the meta state was last confirmed current. Every authenticated
// request asks (fresh); the meta group is looked at only when the last confirmation is older than
// half the bound, so a request usually costs a clock read and an atomic load.
type authFreshness struct {
	bound      time.Duration
	confirm    func(now time.Time) (time.Time, bool) // the meta group's latest confirmation (raftgroup.Group.ConfirmedAt)
	now        func() time.Time
	confirmed  atomic.Int64 // unix nanoseconds of the last confirmation
	refreshing atomic.Bool  // one request refreshes while the last confirmation is still in bound
}

// newAuthFreshness tracks the meta group that group returns (nil while a failed write has it
// stopped).
func newAuthFreshness(bound time.Duration, group func() *raftgroup.Group) *authFreshness {
	if bound <= 0 {
		bound = DefaultAuthMaxStaleness
	}
	confirm := func(now time.Time) (time.Time, bool) {
		if g := group(); g != nil {
			return g.ConfirmedAt(now)
		}
		return time.Time{}, false
	}
	return &authFreshness{bound: bound, confirm: confirm, now: time.Now}
}

// fresh reports whether the meta state was confirmed current within the bound. A node that can
// no longer confirm it goes stale between half the bound and the bound after its last
// confirmation (the one it recorded last, which may be up to half the bound old).
func (a *authFreshness) fresh() bool {
	now := a.now()
	age := time.Duration(now.UnixNano() - a.confirmed.Load())
	if age <= a.bound/2 {
		return true
	}
	if age <= a.bound { // still in bound: one request refreshes, the others go on
		if !a.refreshing.CompareAndSwap(false, true) {
			return true
		}
		defer a.refreshing.Store(false)
	}
	a.refresh(now)
	return time.Duration(now.UnixNano()-a.confirmed.Load()) <= a.bound
}

// refresh records the meta group's latest confirmation, if it is later than the one recorded.
func (a *authFreshness) refresh(now time.Time) {
	at, ok := a.confirm(now)
	if !ok {
		return
	}
	for n := at.UnixNano(); ; {
		old := a.confirmed.Load()
		if n <= old || a.confirmed.CompareAndSwap(old, n) {
			return
		}
	}
}
