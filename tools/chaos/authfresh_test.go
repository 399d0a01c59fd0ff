package chaos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Auth freshness through a real partition (docs/cluster.md, "Auth freshness"): three fila-server
// processes behind the LinkProxy, auth.max_staleness_ms 1000. Node 3 is cut off from the other
// two, and a key is revoked through node 1: nodes 1 and 2 refuse it (Unauthorized) as soon as they
// applied the revocation; node 3, which cannot hear of it, refuses it with AuthStateStale once
// the bound has passed since it last heard from the meta leader, still takes the bootstrap key,
// and after the heal refuses the key as revoked.
func TestACutOffNodeRefusesARevokedKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three fila-server processes")
	}
	const boot = "bootstrap-secret-of-at-least-32-characters"
	keyFile := filepath.Join(t.TempDir(), "bootstrap.key")
	if err := os.WriteFile(keyFile, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	proxy, err := NewLinkProxy(3)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	founders := proxy.FoundingFlags()
	c, err := StartCluster(serverBinary(t), t.TempDir(), 3, func(id int) []string {
		return append(founders(id), "--bootstrap-api-key-file", keyFile, "--auth-max-staleness-ms", "1000")
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("node %d's log:\n%s", n.ID, n.Log.tail(40))
			}
		}
	})
	ctx := context.Background()
	// dial presents key to node (from 1) and returns the Handshake's failure, nil when taken.
	dial := func(node int, key string) error {
		cl, err := fila.Dial(ctx, c.Nodes[node-1].Addr, &fila.Options{APIKey: key})
		if err == nil {
			cl.Close()
		}
		return err
	}
	// until waits (a minute at most) until ok holds of node's answer to key's Handshake.
	until := func(node int, key, what string, ok func(error) bool) time.Duration {
		start := time.Now()
		for {
			err := dial(node, key)
			if ok(err) {
				return time.Since(start)
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("node %d still answers a key's Handshake %v, want %s", node, err, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// admin runs op with the bootstrap key on node 1 until it succeeds (the meta group may have
	// no leader yet).
	admin := func(what string, op func(*fila.Client) error) {
		start := time.Now()
		for {
			cl, err := fila.Dial(ctx, c.Nodes[0].Addr, &fila.Options{APIKey: boot})
			if err == nil {
				err = op(cl)
				cl.Close()
			}
			if err == nil {
				return
			}
			if time.Since(start) > time.Minute {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	var key *fila.APIKey
	admin("CreateApiKey", func(cl *fila.Client) (err error) {
		key, err = cl.CreateAPIKey(ctx, "tenant", time.Time{}, false)
		return err
	})
	for node := 1; node <= 3; node++ {
		until(node, key.Key, "Ok", func(err error) bool { return err == nil })
	}

	if err := proxy.Cut(3, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	admin("RevokeApiKey", func(cl *fila.Client) error {
		err := cl.RevokeAPIKey(ctx, key.ID)
		if errors.Is(err, fila.ErrAPIKeyNotFound) { // an attempt that failed committed
			return nil
		}
		return err
	})
	revoked := time.Since(cut)
	for node := 1; node <= 2; node++ {
		until(node, key.Key, "Unauthorized", func(err error) bool { return errors.Is(err, fila.ErrUnauthorized) })
	}
	until(3, key.Key, "AuthStateStale", func(err error) bool { return errors.Is(err, fila.ErrAuthStateStale) })
	t.Logf("node 3 cut off: the key revoked through node 1 %v after the cut; node 3 answered AuthStateStale %v after the cut", revoked, time.Since(cut))
	if err := dial(3, boot); err != nil {
		t.Fatalf("node 3, cut off, refused the bootstrap key: %v", err)
	}

	if err := proxy.Heal(3, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	t.Logf("node 3 healed: refuses the key as revoked %v later",
		until(3, key.Key, "Unauthorized", func(err error) bool { return errors.Is(err, fila.ErrUnauthorized) }))
}
