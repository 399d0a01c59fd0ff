package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// The key a message's shard is the hash of, computed alike by the server and the SDK.

// Key part kinds: FIBP's key_part_kind values.
const (
	KindHeader         = 0
	KindFairnessKey    = 1
	KindAttribute      = 2
	KindIdempotencyKey = 3
	KindPayloadHash    = 4
	KindHeadersHash    = 5
)

// DefaultFairnessKey is the fairness key of a message sent without one (the broker's).
const DefaultFairnessKey = "default"

// Part is one part of an ordering or deduplication key: its kind (Kind*) and, for a header or
// attribute, its name.
type Part struct {
	Kind uint8
	Name string
}

// Message is what a message's shard is chosen from: the message as its producer sent it.
type Message struct {
	Headers           map[string]string
	FairnessKey       string // "" for DefaultFairnessKey
	IdempotencyKey    string
	HasIdempotencyKey bool
	Payload           []byte
}

// Plan is what choosing a sharded queue's shards needs of its definition.
type Plan struct {
	Shards      uint32 // ≤ 1: not sharded
	Grouped     bool   // ordering grouped by OrderingKey
	OrderingKey []Part
	DedupKey    []Part // empty: the producer's idempotency key is the identity
}

// Of is the shard of m.
func (p *Plan) Of(m *Message) uint32 {
	if p.Shards <= 1 {
		return 0
	}
	return Index(p.Key(m), p.Shards)
}

// Key is the bytes m's shard is the hash of: its ordering group when the queue is grouped and m
// has every part of the ordering key (each value u32-length-prefixed, as the broker encodes a
// group), else its deduplication identity when it has one (the first 16 bytes of the SHA-256 of
// the dedup key's encoded values, or of the encoded idempotency key when the queue has no dedup
// key), else its fairness key.
func (p *Plan) Key(m *Message) []byte {
	fk := m.FairnessKey
	if fk == "" {
		fk = DefaultFairnessKey
	}
	if p.Grouped {
		if g, ok := encode(p.OrderingKey, m, fk); ok {
			return g
		}
	}
	switch {
	case len(p.DedupKey) > 0:
		if g, ok := encode(p.DedupKey, m, fk); ok {
			sum := sha256.Sum256(g)
			return sum[:16]
		}
	case m.HasIdempotencyKey:
		sum := sha256.Sum256(appendField(nil, m.IdempotencyKey))
		return sum[:16]
	}
	return []byte(fk)
}

// encode is key's values on m, each u32-length-prefixed; ok is false when m lacks a part (an
// attribute always: on_enqueue has not run).
func encode(key []Part, m *Message, fk string) (out []byte, ok bool) {
	for _, p := range key {
		var v string
		switch p.Kind {
		case KindHeader:
			if v, ok = m.Headers[p.Name]; !ok {
				return nil, false
			}
		case KindFairnessKey:
			v = fk
		case KindIdempotencyKey:
			if !m.HasIdempotencyKey {
				return nil, false
			}
			v = m.IdempotencyKey
		case KindPayloadHash:
			sum := sha256.Sum256(m.Payload)
			v = string(sum[:])
		case KindHeadersHash:
			v = headersHash(m.Headers)
		default:
			return nil, false
		}
		out = appendField(out, v)
	}
	return out, true
}

// headersHash is the SHA-256 of every header, names sorted, each name and value
// u32-length-prefixed.
func headersHash(h map[string]string) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	d := sha256.New()
	var buf []byte
	for _, name := range names {
		buf = appendField(buf[:0], name)
		buf = appendField(buf, h[name])
		d.Write(buf)
	}
	return string(d.Sum(nil))
}

func appendField(buf []byte, v string) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(v)))
	return append(buf, v...)
}
