// Package throttle is the broker's subscriber-declared throttles (throttling.md): declarations
// and their validation, global named throttles shared by subscriptions of every queue, effective
// limits, and per-key buckets that count deliveries in sliding windows.
//
// It is deterministic and reads no clock: every time is an argument (Unix milliseconds). Its
// state is the leader's memory, never the queue log: a delivery is counted at the moment it is
// made (Take), and nacks, expiries and acks give nothing back. A server that stops cleanly saves
// its registry (Save) and the next loads it (Load, persist.go); a registry told that a previous
// process may have counted deliveries it does not know of (Restarted, after a crash) starts every
// bucket full for its throttle's largest window. The buckets' memory is bounded and shared fairly between
// holders and their throttles (share.go); memory.go counts it as the heap holds it.
//
// # Using it
//
//	reg := throttle.NewRegistry(0)                          // one per broker
//	sub, err := reg.DeclareAs(keyID, "orders", decls)       // at Consume; ErrInvalid, ErrConflict, ErrFull
//	t := sub.Throttles()[0]
//	g, has := t.Key().Group(&subject)                       // a message's bucket: its key's group,
//	b := throttle.BucketKey{Group: g, Missing: !has}        // or (t.Policy()) shared or unthrottled
//	ok, retryAt := reg.Take(now, []throttle.Ref{{T: t, B: b}}) // before delivering: room? count it
//	sub.Close()                                             // when the subscription ends
//
// # Exactness
//
// Take counts a delivery only when every bucket it names has room under every effective limit,
// and a window counts (conservatively) every delivery that may still be inside it, so no bucket
// ever holds more than N deliveries in any window of W (see window).
//
// # Ownership, and the cluster
//
// A Registry is the owner of its throttles' buckets on one node. In a cluster one node owns each
// throttle, and package grant (server/throttle/grant) is the protocol by which queue leaders
// elsewhere borrow tokens from it. A grant is not counted like deliveries at the time it is made:
// its tokens may be spent until the lease ends, so the owner counts them at the lease's end (or
// when they are settled), which a Registry (whose times only move forward) cannot; the owner's
// side of a cluster throttle is grant.Owner.
package throttle
