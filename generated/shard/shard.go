// Package shard holds what the server and the SDK must compute alike for a sharded queue (written
// by hand; nothing here is generated): which shard a message goes to, the name of a shard's
// queue group, and the shard index carried in the message IDs a shard's leader makes.
//
// A sharded queue q of N shards (2..Max) is N queue groups: shard 0 is the group named q, shard
// i ≥ 1 the group named q*i ('*' never appears in a queue name, so no user queue can take it).
//
// A message's shard is Index(key, N): FNV-1a 64 of the key's bytes, modulo N. The key is the
// message's ordering group when its queue is grouped and the message has one, else its
// deduplication identity when it has one, else its fairness key (the producer's, before any
// on_enqueue hook; "default" when it sent none). See docs/sharding.md.
package shard

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Max is the largest shard count; indexes fit in the 6 ID bits SetIndex writes.
const Max = 64

// Index is the shard of a message whose shard key is key, of n shards (0 when n ≤ 1): FNV-1a 64
// of key, modulo n.
func Index(key []byte, n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(key)
	return uint32(h.Sum64() % uint64(n))
}

// Sep separates a sharded queue's name from a shard's index in the shard's group name.
const Sep = "*"

// Name is the name of shard i's queue group of queue: queue itself for shard 0, queue*i else.
func Name(queue string, i uint32) string {
	if i == 0 {
		return queue
	}
	return queue + Sep + strconv.FormatUint(uint64(i), 10)
}

// Parse splits a shard group's name (queue*i, i ≥ 1) into its queue and index; ok is false for
// any other name.
func Parse(name string) (queue string, i uint32, ok bool) {
	at := strings.LastIndex(name, Sep)
	if at <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(name[at+1:], 10, 32)
	if err != nil || n == 0 || n >= Max || name[at+1:] != strconv.FormatUint(n, 10) {
		return "", 0, false
	}
	return name[:at], uint32(n), true
}

// The shard index of a sharded queue's message is in its ID: a UUIDv7 (RFC 9562) whose byte 8
// holds the variant (10) in its top two bits and, for a sharded queue's message, the index in
// the six bits below (part of rand_b, which stays random elsewhere).

// SetIndex writes shard index i (< Max) into id.
func SetIndex(id *[16]byte, i uint32) { id[8] = 0x80 | byte(i&0x3F) }

// IndexOf is the shard index in the ID of a message of a sharded queue of n shards; 0 for a
// queue that is not sharded, or an index ≥ n (an ID no shard made: it is settled on shard 0,
// which does not know it).
func IndexOf(id [16]byte, n uint32) uint32 {
	if n <= 1 {
		return 0
	}
	i := uint32(id[8] & 0x3F)
	if i >= n {
		return 0
	}
	return i
}
