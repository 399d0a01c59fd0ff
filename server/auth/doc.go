// Package auth holds FIBP's API keys and ACLs (security.md): key records, the secret they are
// checked against, and the permission rules. It is pure state: the broker's meta group applies
// the committed key commands to a Store, and the transport asks the Store who a connection is
// and what it may do.
//
//   - A key's secret is ≥ 256 bits of randomness (NewSecret), returned to its creator once; only
//     its SHA-256 hash is kept, and hashes are compared in constant time.
//   - A key may expire (Unix ms, 0 = never) and may be revoked (its record is deleted); both take
//     effect on open connections at their next request, which re-read the Store (see Gen).
//   - An ACL is a list of (kind, pattern): kinds produce, consume and admin, whose patterns are
//     globs over queue names where * matches any run of characters and everything else is
//     literal, so "orders" does not match "orders.dlq"; and throttle, whose patterns are the same
//     globs over throttle names. A superadmin key may do everything.
//
// Authentication is on only when the Store has a bootstrap key (SetBootstrap): a superadmin key
// from the operator's configuration, never written to the log.
package auth
