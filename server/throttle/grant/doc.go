// Package grant is the token-grant protocol that keeps a throttle exact when its subscribers
// sit on several nodes (throttling.md, "Cluster"): one node owns a throttle's buckets (Owner);
// the queue leaders on other nodes (Borrower) ask it for small batches of tokens per bucket,
// spend one per delivery, and give back what they did not spend. It is pure and deterministic:
// no clock, no network, no goroutine. Every time is an argument (Unix milliseconds), and the
// messages (Request, Grant, Return) are values its caller carries between nodes.
//
// # The protocol
//
//   - A borrower that needs a token and holds none sends a Request (its sequence number, the
//     time it sent it by its own clock, how many tokens it wants, and the settlement of the grants
//     it finished). It has at most one Request out per bucket.
//   - The owner answers with a Grant of n ≤ want tokens and a lease (LeaseMs), or n = 0 and a
//     time to ask again. It counts the n tokens in the bucket at once, at the lease's end.
//   - The borrower spends a token of the grant on a delivery at any time t with
//     t ≤ sent + LeaseMs (its deadline: it measures the lease from when it asked, which is no
//     later than when the owner granted). It settles the grant (a Return: how many it did not
//     spend) when the grant is used up, when its deadline passes, or when it gives tokens back
//     unused; a grant answering a Request it no longer waits for is returned whole, unspent.
//   - On a Return the owner forgets the unspent tokens and moves the spent ones from the lease's
//     end back to the time the Return arrived (they were spent before it was sent). A Return that
//     never arrives costs nothing but rate: the tokens stay counted at the lease's end.
//   - The owner's own node delivers through Owner.Take, a grant of one token spent at once.
//   - A new owner (TakeOver, after the previous one failed or was replaced at `since`) issues no
//     token before since + LeaseMs + the largest window: every token of its predecessor was spent
//     by since + LeaseMs, so no window holding a token of the new owner holds one of the old.
//
// # The invariant and why it holds
//
// Invariant: for every effective limit (N, W) of a bucket and every time e, at most N deliveries,
// on all nodes together, happen at times in (e−W, e].
//
// The owner gives every token a record time r: a delivery made through Take, its time; a token of
// an outstanding grant, the grant's lease end E; a spent token of a settled grant,
// min(arrival of the Return, E). A token returned unspent is gone (it is never spent: the
// borrower drops it before it sends the Return). Two facts:
//
//  1. Coverage: a token issued at g and spent at t has g ≤ t ≤ r. (The grant arrives after it is
//     issued; t ≤ sent + LeaseMs ≤ g + LeaseMs = E; a Return is sent after the spends it settles.)
//     And r only ever moves earlier (from E to the Return's arrival), never later.
//  2. Admission: a batch of n tokens is issued at g only if, for every limit (N, W), the tokens
//     whose record time is after g − W number at most N − n (count, below).
//
// Take a window (e−W, e] and the deliveries in it, each spent from a token issued at some g ≤ t ≤ e
// with final record time r ≥ t > e − W. Let g* be the latest of those issue times. Every other
// token of the window was issued no later than g*, and its record time at g* was at least its final
// one, hence after e − W ≥ g* − W: the count at g* included it. So the window holds at most
// count + n ≤ N deliveries. Owners in turn: the tokens of an owner that took over at `since`
// are all issued after since + LeaseMs + W, their deliveries are too, and a window holding one of
// them starts after since + LeaseMs, when every token of the previous owners had been spent — so
// a window never mixes two owners' tokens, and each owner's alone is within N. This needs that the
// previous owner issue nothing after `since` (it crashed, or it had given the throttle up), and
// that the nodes' clocks run at the same rate (the leases are durations; no clock is compared
// across nodes).
//
// Limits change as subscriptions declare them and end (Owner.SetLimits: the owner enforces the
// effective limits of every node's declarations, which each Request carries). A limit binds the
// tokens issued while it is effective: a window holds at most N under a limit that was effective
// when the last of its tokens was issued (the proof above, with g* that issue). Tokens granted
// before a stricter limit was declared were admitted under the limits before it and may still be
// spent, for at most a lease. A limit whose window is longer than those the owner kept tokens for
// counts as full until its window holds only tokens the owner knows of.
//
// # Rate
//
// A token counts against the limit from its grant to its record time plus W. A saturated
// borrower spends its batch at once and settles it with its next Request, so a token counts for
// about W plus a round trip: a bucket saturated by several borrowers achieves about N/(W + RTT),
// and a little less while batches grow (simulated, 100 per second, three borrowers: 100% of N/W
// at 1–2 ms each way, 93% at 20–40 ms). The borrower adapts its batch (Borrower):
// it doubles when a grant is used up before half its lease, and halves when a grant expires
// unspent; the owner never grants more than a share of the limit at once (Config.MaxGrantShare),
// so that one borrower cannot hold the room another one needs.
//
// The owner's state per bucket is its tokens still inside a window: at most N record entries
// per limit plus the outstanding grants, each look-up a walk over them (a bucket's N is small
// where exactness across nodes matters; the node's single-node Registry is unchanged). Buckets
// that hold nothing are swept as new ones come, and an owner holds at most MaxBuckets: a request
// for one more waits.
package grant
