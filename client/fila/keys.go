package fila

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

// Key names the message properties that together identify a group: an ordering group, a
// throttle bucket, or a set of duplicates. An empty Key means "no key".
type Key = fibp.Key

// KeyPart is one part of a Key.
type KeyPart = fibp.KeyPart

// HeaderPart is the key part for the header name.
func HeaderPart(name string) KeyPart { return KeyPart{Kind: fibp.KeyPartKindHeader, Name: name} }

// FairnessKeyPart is the key part for the message's fairness key.
func FairnessKeyPart() KeyPart { return KeyPart{Kind: fibp.KeyPartKindFairnessKey} }

// AttributePart is the key part for an attribute returned by on_enqueue.
func AttributePart(name string) KeyPart {
	return KeyPart{Kind: fibp.KeyPartKindAttribute, Name: name}
}

// IdempotencyKeyPart is the key part for the producer's idempotency key (dedup keys only).
func IdempotencyKeyPart() KeyPart { return KeyPart{Kind: fibp.KeyPartKindIdempotencyKey} }

// PayloadHashPart is the key part for a hash of the payload (dedup keys only).
func PayloadHashPart() KeyPart { return KeyPart{Kind: fibp.KeyPartKindPayloadHash} }

// HeadersHashPart is the key part for a hash of every header (dedup keys only).
func HeadersHashPart() KeyPart { return KeyPart{Kind: fibp.KeyPartKindHeadersHash} }

// ParseKey parses a comma-separated key description, the form FormatKey prints:
// header:NAME, fairness_key, attr:NAME, idempotency_key, payload_hash, headers_hash.
// An empty string is the empty key.
func ParseKey(s string) (Key, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var k Key
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		kind, name, hasName := strings.Cut(part, ":")
		var p KeyPart
		switch {
		case kind == "header" && hasName && name != "":
			p = HeaderPart(name)
		case kind == "attr" && hasName && name != "":
			p = AttributePart(name)
		case part == "fairness_key":
			p = FairnessKeyPart()
		case part == "idempotency_key":
			p = IdempotencyKeyPart()
		case part == "payload_hash":
			p = PayloadHashPart()
		case part == "headers_hash":
			p = HeadersHashPart()
		default:
			return nil, fmt.Errorf("fila: bad key part %q (want header:NAME, attr:NAME, "+
				"fairness_key, idempotency_key, payload_hash or headers_hash)", part)
		}
		k = append(k, p)
	}
	return k, nil
}

// FormatKey renders k in the form ParseKey reads; the empty key is "".
func FormatKey(k Key) string {
	parts := make([]string, len(k))
	for i, p := range k {
		switch p.Kind {
		case fibp.KeyPartKindHeader:
			parts[i] = "header:" + p.Name
		case fibp.KeyPartKindAttribute:
			parts[i] = "attr:" + p.Name
		case fibp.KeyPartKindFairnessKey:
			parts[i] = "fairness_key"
		case fibp.KeyPartKindIdempotencyKey:
			parts[i] = "idempotency_key"
		case fibp.KeyPartKindPayloadHash:
			parts[i] = "payload_hash"
		case fibp.KeyPartKindHeadersHash:
			parts[i] = "headers_hash"
		default:
			parts[i] = fmt.Sprintf("%v:%s", p.Kind, p.Name)
		}
	}
	return strings.Join(parts, ",")
}

// Throttle declares a named rate limit on a subscription: for each limit, at most Max
// deliveries in any sliding window of Window, per distinct value of Key (throttling.md).
type Throttle struct {
	Name           string
	Limits         []ThrottleLimit
	Key            Key            // empty = one bucket for every message
	WhenKeyMissing WhenKeyMissing // shared bucket (default) or unthrottled
}

// ThrottleLimit is "at most Max deliveries in any window of Window".
type ThrottleLimit struct {
	Max    uint64
	Window time.Duration
}

type throttleLimitJSON struct {
	Max      uint64 `json:"max_deliveries"`
	WindowMs uint64 `json:"window_ms"`
}

// MarshalJSON renders the limit as {"max_deliveries": N, "window_ms": W}.
func (l ThrottleLimit) MarshalJSON() ([]byte, error) {
	return json.Marshal(throttleLimitJSON{Max: l.Max, WindowMs: durationMs(l.Window)})
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (l *ThrottleLimit) UnmarshalJSON(b []byte) error {
	var j throttleLimitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = ThrottleLimit{Max: j.Max, Window: time.Duration(j.WindowMs) * time.Millisecond}
	return nil
}

func (t *Throttle) wire() fibp.ThrottleDeclaration {
	d := fibp.ThrottleDeclaration{Name: t.Name, Key: t.Key, WhenKeyMissing: t.WhenKeyMissing}
	d.Limits = make([]fibp.ThrottleLimit, len(t.Limits))
	for i, l := range t.Limits {
		d.Limits[i] = fibp.ThrottleLimit{MaxDeliveries: l.Max, WindowMs: durationMs(l.Window)}
	}
	return d
}

func throttleLimits(ls []fibp.ThrottleLimit) []ThrottleLimit {
	out := make([]ThrottleLimit, len(ls))
	for i, l := range ls {
		out[i] = ThrottleLimit{Max: l.MaxDeliveries, Window: time.Duration(l.WindowMs) * time.Millisecond}
	}
	return out
}
