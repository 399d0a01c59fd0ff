package auth

import (
	"strings"
	"testing"
)

func TestSecret(t *testing.T) {
	id1, s1 := NewSecret()
	id2, s2 := NewSecret()
	if id1 == id2 || s1 == s2 {
		t.Fatal("two secrets or IDs are equal")
	}
	if !strings.HasPrefix(s1, secretPrefix) || len(s1)-len(secretPrefix) < 43 { // 256 bits in base64
		t.Fatalf("secret %q is too short", s1)
	}
}

func TestStore(t *testing.T) {
	s := NewStore()
	if s.Enabled() {
		t.Fatal("a new store has authentication on")
	}
	s.SetBootstrap("boot-secret")
	if p, ok := s.Authenticate("boot-secret"); !ok || !p.Superadmin() || p.ID() != BootstrapID {
		t.Fatalf("bootstrap key: %v %v", p, ok)
	}
	id, secret := NewSecret()
	s.Put(Record{ID: id, Name: "worker", Hash: HashOf(secret), ExpiresAt: 1000})
	g := s.Gen()
	p, ok := s.Authenticate(secret)
	if !ok || p.ID() != id || p.Superadmin() {
		t.Fatalf("Authenticate: %v %v", p, ok)
	}
	if _, ok := s.Authenticate(secret + "x"); ok {
		t.Fatal("a wrong secret authenticated")
	}
	if p.Expired(999) || !p.Expired(1000) {
		t.Fatal("expiry")
	}
	if p.Allowed(Produce, "orders") || p.Any("orders") {
		t.Fatal("a key without ACL may do something")
	}
	if !s.SetACL(id, []Permission{{Produce, "orders"}, {Consume, "jobs.*"}}) || s.Gen() == g {
		t.Fatal("SetACL")
	}
	p, _ = s.Lookup(id)
	switch {
	case !p.Allowed(Produce, "orders"), p.Allowed(Produce, "orders.dlq"), p.Allowed(Consume, "orders"):
		t.Fatal("produce on orders only")
	case !p.Allowed(Consume, "jobs.a"), p.Allowed(Admin, "jobs.a"), !p.Any("jobs.a"), p.Any("jobs"):
		t.Fatal("consume on jobs.*")
	}
	if s.SetACL("nope", nil) || s.Revoke("nope") {
		t.Fatal("changes to an unknown key succeeded")
	}
	if len(s.List()) != 1 {
		t.Fatalf("List: %v", s.List())
	}
	if !s.Revoke(id) {
		t.Fatal("Revoke")
	}
	if _, ok := s.Lookup(id); ok {
		t.Fatal("a revoked key is still there")
	}
	if _, ok := s.Authenticate(secret); ok {
		t.Fatal("a revoked key authenticated")
	}
	var anon *Principal
	if !anon.Allowed(Admin, "x") || !anon.Superadmin() || anon.Expired(1<<62) {
		t.Fatal("the anonymous caller of a server without auth may do everything")
	}
}
