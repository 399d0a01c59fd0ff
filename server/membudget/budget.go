// Package membudget accounts the memory that clients make the server hold. Every connection has
// an Account with a bound of its own, and every Account draws from one server-wide Budget, so
// that neither one client nor many together can make the server hold more than it was given.
// Memory clients leave behind them has an Account too: the broker's, for the deduplication
// identities its queues remember, is opened without a cut and never cut (TryReserve).
//
// Holders reserve bytes before they allocate and release them when they let go; every
// reservation is released by whoever made it. A nil *Budget and a nil *Account count nothing and
// refuse nothing: that is how accounting is turned off.
package membudget

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Scope says which bound a reservation reached.
type Scope uint8

const (
	ScopeConnection Scope = iota + 1 // the Account's own bound
	ScopeServer                      // the server-wide Budget
)

func (s Scope) String() string {
	switch s {
	case ScopeConnection:
		return "connection"
	case ScopeServer:
		return "server"
	default:
		return fmt.Sprintf("Scope(%d)", uint8(s))
	}
}

// FullError reports a reservation refused because it would take a bound past its limit.
type FullError struct {
	Scope Scope
	Need  int64 // bytes asked for
	Used  int64 // bytes held under the bound before the request
	Limit int64 // the bound
}

func (e *FullError) Error() string {
	return fmt.Sprintf("membudget: %d bytes more would pass the %s memory bound (%d of %d bytes held)", e.Need, e.Scope, e.Used, e.Limit)
}

// Retryable reports whether the same reservation can succeed once held memory is released: it
// fits the bound on its own.
func (e *FullError) Retryable() bool { return e.Need <= e.Limit }

// Budget is the server-wide bound. Its methods are safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64

	mu       sync.Mutex
	accounts map[*Account]struct{}
}

// New returns a Budget of limit bytes (limit > 0).
func New(limit int64) *Budget {
	return &Budget{limit: limit, accounts: map[*Account]struct{}{}}
}

// Limit returns the budget's bound in bytes (0 for a nil Budget).
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used returns the bytes held by every Account.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Open returns a new Account bounded by limit bytes and by the budget. cut is called (once, at
// most) when the budget is full and this Account holds the most: the holder must then let go of
// what it holds, normally by closing its connection. An Account opened with a nil cut is never
// picked. A nil Budget returns a nil Account.
func (b *Budget) Open(limit int64, cut func()) *Account {
	if b == nil {
		return nil
	}
	a := &Account{b: b, limit: limit, cut: cut}
	b.mu.Lock()
	b.accounts[a] = struct{}{}
	b.mu.Unlock()
	return a
}

// overfull cuts the Account that holds the most, unless one cut earlier still holds memory: its
// release is on its way, and cutting another would punish a holder for someone else's use. It
// reports whether from is one that was cut.
func (b *Budget) overfull(from *Account) bool {
	top := b.pickCut()
	if top != nil && top.cut != nil {
		top.cut() // outside b.mu: closing a TLS connection may write
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return from.wasCut
}

// pickCut marks and returns the Account to cut, or nil.
func (b *Budget) pickCut() *Account {
	b.mu.Lock()
	defer b.mu.Unlock()
	var top *Account
	for a := range b.accounts {
		if a.cut == nil { // a holder that cannot be cut lets go on its own (see TryReserve)
			continue
		}
		if a.wasCut {
			if a.used.Load() > 0 {
				return nil
			}
			continue
		}
		if top == nil || a.used.Load() > top.used.Load() {
			top = a
		}
	}
	if top == nil || top.used.Load() == 0 {
		return nil
	}
	top.wasCut = true
	return top
}

// Account is one holder's share of a Budget, normally one connection's. Its methods are safe for
// concurrent use.
type Account struct {
	b      *Budget
	limit  int64
	used   atomic.Int64
	cut    func()
	wasCut bool // guarded by b.mu
}

// headroomShare: past a full budget, holders that were not cut may take this part of the budget
// more while the cut holders let go of theirs (1/8).
const headroomShare = 8

// Reserve takes n bytes from both bounds, or none and a *FullError when either would pass its
// limit. When the server-wide budget is full, the Account holding the most is cut; the others
// may go on into a headroom of an eighth of the budget while it lets go, so that one holder's use
// does not refuse the others.
func (a *Account) Reserve(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if u := a.used.Add(n); u > a.limit {
		a.used.Add(-n)
		return &FullError{Scope: ScopeConnection, Need: n, Used: u - n, Limit: a.limit}
	}
	if u := a.b.used.Add(n); u > a.b.limit {
		if !a.b.overfull(a) && u <= a.b.limit+a.b.limit/headroomShare {
			return nil
		}
		a.b.used.Add(-n)
		a.used.Add(-n)
		return &FullError{Scope: ScopeServer, Need: n, Used: u - n, Limit: a.b.limit}
	}
	return nil
}

// TryReserve takes n bytes from both bounds only if both have room for them: it cuts no one and
// takes no headroom. It suits a holder opened without a cut (Open with nil), which the budget
// never picks to cut: one that refuses its own growth when memory is short (deduplication
// identities, say) rather than make connections pay for it.
func (a *Account) TryReserve(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if u := a.used.Add(n); u > a.limit {
		a.used.Add(-n)
		return &FullError{Scope: ScopeConnection, Need: n, Used: u - n, Limit: a.limit}
	}
	if u := a.b.used.Add(n); u > a.b.limit {
		a.b.used.Add(-n)
		a.used.Add(-n)
		return &FullError{Scope: ScopeServer, Need: n, Used: u - n, Limit: a.b.limit}
	}
	return nil
}

// Hold takes n bytes that are already owed (an answer to a request that was accepted): only the
// Account's own bound refuses them. Past the server-wide budget they are counted anyway and the
// Account holding the most is cut.
func (a *Account) Hold(n int64) error {
	if a == nil || n <= 0 {
		return nil
	}
	if u := a.used.Add(n); u > a.limit {
		a.used.Add(-n)
		return &FullError{Scope: ScopeConnection, Need: n, Used: u - n, Limit: a.limit}
	}
	if a.b.used.Add(n) > a.b.limit {
		a.b.overfull(a)
	}
	return nil
}

// Release gives back n bytes reserved or held earlier.
func (a *Account) Release(n int64) {
	if a == nil || n <= 0 {
		return
	}
	a.used.Add(-n)
	a.b.used.Add(-n)
}

// Used returns the bytes the Account holds.
func (a *Account) Used() int64 {
	if a == nil {
		return 0
	}
	return a.used.Load()
}

// Limit returns the Account's own bound (0 for a nil Account).
func (a *Account) Limit() int64 {
	if a == nil {
		return 0
	}
	return a.limit
}

// Close removes the Account from its budget. What it still holds is released by its holders as
// they let go.
func (a *Account) Close() {
	if a == nil {
		return
	}
	a.b.mu.Lock()
	delete(a.b.accounts, a)
	a.b.mu.Unlock()
}

// Grow and Shrink let an Account serve as a wire.BufferBudget (a frame reader's or a
// reassembler's buffers): Grow reserves, Shrink releases.
func (a *Account) Grow(n int) error { return a.Reserve(int64(n)) }
func (a *Account) Shrink(n int)     { a.Release(int64(n)) }
