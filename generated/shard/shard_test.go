package shard

import (
	"testing"
)

// The hash is FNV-1a 64 modulo the shard count: fixed values, so that a change shows.
func TestIndexIsFNV1aModN(t *testing.T) {
	cases := []struct {
		key  string
		n    uint32
		want uint32
	}{
		{"", 4, uint32(0xcbf29ce484222325 % 4)},
		{"a", 4, uint32(0xaf63dc4c8601ec8c % 4)},
		{"a", 7, uint32(0xaf63dc4c8601ec8c % 7)},
		{"foobar", 64, uint32(0x85944171f73967e8 % 64)},
		{"anything", 1, 0},
		{"anything", 0, 0},
	}
	for _, c := range cases {
		if got := Index([]byte(c.key), c.n); got != c.want {
			t.Errorf("Index(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	if Name("orders", 0) != "orders" || Name("orders", 3) != "orders*3" {
		t.Fatalf("names: %q %q", Name("orders", 0), Name("orders", 3))
	}
	for i := uint32(1); i < Max; i++ {
		q, j, ok := Parse(Name("a.b", i))
		if !ok || q != "a.b" || j != i {
			t.Fatalf("Parse(Name(a.b, %d)) = %q %d %v", i, q, j, ok)
		}
	}
	for _, bad := range []string{"orders", "orders*0", "orders*01", "orders*64", "*3", "orders*", "orders*x"} {
		if _, _, ok := Parse(bad); ok {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestIndexInIDs(t *testing.T) {
	for i := uint32(0); i < Max; i++ {
		id := [16]byte{8: 0xFF, 9: 0x12}
		SetIndex(&id, i)
		if id[8]&0xC0 != 0x80 {
			t.Fatalf("variant bits lost: %08b", id[8])
		}
		if got := IndexOf(id, Max); got != i {
			t.Fatalf("IndexOf = %d, want %d", got, i)
		}
	}
	id := [16]byte{8: 0x80 | 9}
	if IndexOf(id, 4) != 0 || IndexOf(id, 1) != 0 {
		t.Fatal("an index beyond the shard count must read as 0")
	}
}
