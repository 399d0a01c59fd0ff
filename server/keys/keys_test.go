package keys_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/filamq/fila/server/keys"
)

func TestCheck(t *testing.T) {
	ok := []struct {
		use keys.Use
		key keys.Key
	}{
		{keys.Ordering, nil},
		{keys.Ordering, keys.Key{{Kind: keys.Header, Name: "tenant"}, {Kind: keys.FairnessKey}, {Kind: keys.Attribute, Name: "tier"}}},
		{keys.Throttle, keys.Key{{Kind: keys.Header, Name: "merchant"}}},
		{keys.Dedup, keys.Key{{Kind: keys.IdempotencyKey}, {Kind: keys.PayloadHash}, {Kind: keys.HeadersHash}, {Kind: keys.Header, Name: "a"}}},
	}
	for _, c := range ok {
		if err := c.key.Check(c.use); err != nil {
			t.Errorf("%s key %v: %v, want valid", c.use, c.key, err)
		}
	}
	bad := []struct {
		use  keys.Use
		key  keys.Key
		part int
	}{
		{keys.Ordering, keys.Key{{Kind: keys.IdempotencyKey}}, 0},
		{keys.Throttle, keys.Key{{Kind: keys.Header, Name: "a"}, {Kind: keys.PayloadHash}}, 1},
		{keys.Throttle, keys.Key{{Kind: keys.HeadersHash}}, 0},
		{keys.Dedup, keys.Key{{Kind: 6}}, 0},
		{keys.Ordering, keys.Key{{Kind: keys.Header}}, 0},
		{keys.Ordering, keys.Key{{Kind: keys.FairnessKey, Name: "x"}}, 0},
		{keys.Dedup, keys.Key{{Kind: keys.Attribute, Name: "a"}, {Kind: keys.Attribute, Name: "a"}}, 1},
	}
	for _, c := range bad {
		err := c.key.Check(c.use)
		var ke *keys.Error
		if !errors.As(err, &ke) || !errors.Is(err, keys.ErrInvalid) || ke.Part != c.part {
			t.Errorf("%s key %v: %v, want an *Error for part %d", c.use, c.key, err, c.part)
		}
	}
}

func TestMissing(t *testing.T) {
	s := &keys.Subject{Headers: map[string]string{"empty": ""}, FairnessKey: "fk"}
	cases := []struct {
		part keys.Part
		ok   bool
	}{
		{keys.Part{Kind: keys.Header, Name: "empty"}, true},
		{keys.Part{Kind: keys.Header, Name: "absent"}, false},
		{keys.Part{Kind: keys.FairnessKey}, true},
		{keys.Part{Kind: keys.Attribute, Name: "tier"}, false},
		{keys.Part{Kind: keys.IdempotencyKey}, false},
		{keys.Part{Kind: keys.PayloadHash}, true},
		{keys.Part{Kind: keys.HeadersHash}, true},
	}
	for _, c := range cases {
		k := keys.Key{{Kind: keys.FairnessKey}, c.part}
		vals, ok := k.Values(s, []string{"keep"})
		if ok != c.ok {
			t.Errorf("%v: present = %v, want %v", c.part, ok, c.ok)
		}
		if !ok && !slices.Equal(vals, []string{"keep"}) {
			t.Errorf("%v: missing part changed dst to %q", c.part, vals)
		}
		if _, gok := k.Group(s); gok != c.ok {
			t.Errorf("%v: Group present = %v, want %v", c.part, gok, c.ok)
		}
		if _, iok := k.Identity(s); iok != c.ok {
			t.Errorf("%v: Identity present = %v, want %v", c.part, iok, c.ok)
		}
	}
	s.IdempotencyKey, s.HasIdempotencyKey = "", true
	if _, ok := (keys.Key{{Kind: keys.IdempotencyKey}}).Values(s, nil); !ok {
		t.Error("an empty idempotency key that is present must count as present")
	}
}

// TestGroupIsInjective: two value tuples share a Group encoding only when they are equal, and
// SplitGroup gives the tuple back. Values are drawn from a tiny alphabet so that concatenations
// collide often ("a"+"bc" vs "ab"+"c").
func TestGroupIsInjective(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = "ab\x00"[r.IntN(3)]
		}
		return string(b)
	}
	seen := map[string][]string{}
	for range 20000 {
		n := 1 + r.IntN(3)
		key := make(keys.Key, n)
		h := map[string]string{}
		var want []string
		for i := range key {
			name := string(rune('p' + i))
			key[i] = keys.Part{Kind: keys.Header, Name: name}
			v := word()
			h[name] = v
			want = append(want, v)
		}
		g, ok := key.Group(&keys.Subject{Headers: h})
		if !ok {
			t.Fatal("every header present, Group says missing")
		}
		if prev, dup := seen[g]; dup && !slices.Equal(prev, want) {
			t.Fatalf("values %q and %q share the group %q", prev, want, g)
		}
		seen[g] = want
		got, ok := keys.SplitGroup(g, nil)
		if !ok || !slices.Equal(got, want) {
			t.Fatalf("SplitGroup(Group(%q)) = %q, %v", want, got, ok)
		}
	}
	if _, ok := keys.SplitGroup("\x00\x00\x00\x05ab", nil); ok {
		t.Error("SplitGroup accepted a truncated encoding")
	}
}

// TestIdempotencyIdentityIsStable: the identity of an idempotency key is the one the broker
// stored before keys existed (SHA-256 of the u32-length-prefixed key, first 16 bytes), so dedup
// memory written by older versions still matches.
func TestIdempotencyIdentityIsStable(t *testing.T) {
	for _, key := range []string{"", "order-1", "ünïcode"} {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(key)))
		sum := sha256.Sum256(append(n[:], key...))
		var want keys.Identity
		copy(want[:], sum[:])
		if got := keys.IdempotencyIdentity(key); got != want {
			t.Errorf("IdempotencyIdentity(%q) = %x, want %x", key, got, want)
		}
		s := &keys.Subject{IdempotencyKey: key, HasIdempotencyKey: true}
		if got, ok := (keys.Key{{Kind: keys.IdempotencyKey}}).Identity(s); !ok || got != want {
			t.Errorf("Key{idempotency_key}.Identity(%q) = %x, %v; want %x", key, got, ok, want)
		}
	}
}

func TestHashes(t *testing.T) {
	k := keys.Key{{Kind: keys.HeadersHash}}
	a, _ := k.Group(&keys.Subject{Headers: map[string]string{"a": "b", "c": "d"}})
	b, _ := k.Group(&keys.Subject{Headers: map[string]string{"c": "d", "a": "b"}})
	c, _ := k.Group(&keys.Subject{Headers: map[string]string{"a": "bc", "": "d"}})
	if a != b {
		t.Error("headers_hash depends on map order")
	}
	if a == c {
		t.Error("headers_hash collides on shifted boundaries")
	}
	p := keys.Key{{Kind: keys.PayloadHash}}
	x, _ := p.Identity(&keys.Subject{Payload: []byte("one")})
	y, _ := p.Identity(&keys.Subject{Payload: []byte("two")})
	z, _ := p.Identity(&keys.Subject{Payload: []byte("one"), Headers: map[string]string{"h": "v"}})
	if x == y || x != z {
		t.Error("payload_hash must depend on the payload and only on it")
	}
}

func TestEncodingRoundTrip(t *testing.T) {
	for _, k := range []keys.Key{nil, {{Kind: keys.FairnessKey}}, {{Kind: keys.Header, Name: "tenant"}, {Kind: keys.PayloadHash}, {Kind: keys.Attribute, Name: "é"}}} {
		got, err := keys.Decode(k.AppendTo(nil))
		if err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		if !slices.Equal(got, k) {
			t.Fatalf("round trip of %v gave %v", k, got)
		}
	}
	for _, bad := range [][]byte{{0}, {0, 1}, {0, 1, 0, 0, 5, 'a'}, {0, 1, 0, 0, 0, 9}, {0, 0, 7}} {
		if _, err := keys.Decode(bad); err == nil {
			t.Errorf("Decode(%x) accepted", bad)
		}
	}
}

func TestJoinGroupIsGroupOfTheValues(t *testing.T) {
	k := keys.Key{{Kind: keys.Header, Name: "merchant"}, {Kind: keys.FairnessKey}}
	s := &keys.Subject{Headers: map[string]string{"merchant": "m\x00\x01"}, FairnessKey: ""}
	g, ok := k.Group(s)
	if !ok || keys.JoinGroup([]string{"m\x00\x01", ""}) != g {
		t.Fatalf("JoinGroup differs from Group %q", g)
	}
	if vs, ok := keys.SplitGroup(keys.JoinGroup([]string{"a", "bc"}), nil); !ok || len(vs) != 2 || vs[0] != "a" || vs[1] != "bc" {
		t.Fatalf("SplitGroup(JoinGroup) = %q %v", vs, ok)
	}
	if keys.JoinGroup(nil) != "" {
		t.Fatal("keys.JoinGroup(nil) is not the empty key's group")
	}
}
