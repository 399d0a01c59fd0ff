package main

import (
	"net/http"
	"testing"

	"github.com/filamq/fila/server/auth"
)

// The admin API refuses a key while the node cannot confirm its copy of the keys is current (a
// node of a cluster cut off from the meta leader): 503, the client tries another node. The
// bootstrap key, from the node's own configuration, passes.
func TestAdminAPIRefusesKeysOnAStaleNode(t *testing.T) {
	const boot, tenant = "bootstrap-secret-of-at-least-32-characters", "a-tenant-key-secret"
	st := auth.NewStore()
	st.SetBootstrap(boot)
	st.Put(auth.Record{ID: "key_1", Name: "tenant", Hash: auth.HashOf(tenant)})
	fresh := true
	st.SetFreshness(func() bool { return fresh })
	if _, herr := authenticate(st, tenant); herr != nil {
		t.Fatalf("a current node refused the key: %+v", herr)
	}
	fresh = false
	for _, secret := range []string{tenant, "a key this node may not have heard of yet"} {
		if _, herr := authenticate(st, secret); herr == nil || herr.status != http.StatusServiceUnavailable {
			t.Errorf("a stale node answered %+v, want 503", herr)
		}
	}
	if p, herr := authenticate(st, boot); herr != nil || !p.Bootstrap() {
		t.Errorf("the bootstrap key on a stale node: %+v", herr)
	}
}
