package broker

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/filamq/fila/server/auth"
)

// Keys and ACLs come back after a restart from a meta snapshot plus the entries after it.
func TestKeysSurviveSnapshot(t *testing.T) {
	dir := t.TempDir()
	open := func() *Broker {
		o := DefaultOptions(dir)
		o.Sync, o.BootstrapAPIKey = false, "0123456789abcdef0123456789abcdef"
		b, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	k1, e := b.CreateAPIKey("one", 0, false)
	if e != nil {
		t.Fatal(e)
	}
	if e := b.SetACL(k1.ID, []auth.Permission{{Kind: auth.Produce, Pattern: "orders"}, {Kind: auth.Admin, Pattern: "jobs.*"}}); e != nil {
		t.Fatal(e)
	}
	gone, _ := b.CreateAPIKey("gone", 0, true)
	if err := b.metaGroup.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if e := b.RevokeAPIKey(gone.ID); e != nil { // after the snapshot: replayed from the log
		t.Fatal(e)
	}
	k2, _ := b.CreateAPIKey("two", 1<<62, true)
	want := b.ListAPIKeys()
	b.Close()

	b = open()
	defer b.Close()
	if diff := cmp.Diff(want, b.ListAPIKeys()); diff != "" {
		t.Fatalf("keys after restart (-want +got):\n%s", diff)
	}
	if p, ok := b.Auth().Authenticate(k1.Secret); !ok || !p.Allowed(auth.Produce, "orders") || p.Allowed(auth.Produce, "orders.dlq") {
		t.Fatal("key one lost its secret or ACL")
	}
	if _, ok := b.Auth().Authenticate(gone.Secret); ok {
		t.Fatal("a revoked key came back")
	}
	if p, ok := b.Auth().Authenticate(k2.Secret); !ok || !p.Superadmin() {
		t.Fatal("key two lost its superadmin flag")
	}
	if !b.Auth().Enabled() {
		t.Fatal("authentication is off")
	}
}

func TestBootstrapKeyTooShort(t *testing.T) {
	o := DefaultOptions(t.TempDir())
	o.BootstrapAPIKey = "short"
	if b, err := Open(o); err == nil {
		b.Close()
		t.Fatal("a 5-character bootstrap key was accepted")
	}
}
