// Package service is the seam between the edges and the queue service: the Service interface
// (the hot path — Enqueue, Ack, Nack, ExtendLease, Subscribe — and the admin operations) and the
// domain types it speaks, with enumerations of its own. The edges (server/session, which maps
// FIBP to these types and back, and server/transport) depend on this package alone; the local
// broker (server/broker) implements Service, and a router beside it can implement it too (local
// leader → broker, remote leader → forward, unknown → CodeNotLeader or CodeNodeNotReady).
//
// The package holds no logic beyond its types: it imports only leaf packages of domain values
// (keys, throttle declarations, API keys) and never the broker, the engine, the storage codecs or
// FIBP.
//
//	transport ──► session ──► service ◄── broker
//	    └──────────────────────►┘
package service
