package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/internal/fibptest"
)

// Auth freshness over three real fila-server processes (docs/cluster.md, "Auth freshness"), with
// auth.max_staleness_ms at 1 s: a key revoked through one node is refused by every node; a node
// left alone (the two others killed) answers AuthStateStale to a key's Handshake once the bound
// has passed, still takes the bootstrap key, and takes the key again once the others are back.
func TestKeysAreCurrentOnEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	const boot = "bootstrap-secret-of-at-least-32-characters"
	keyFile := filepath.Join(t.TempDir(), "bootstrap.key")
	if err := os.WriteFile(keyFile, []byte(boot), 0o600); err != nil {
		t.Fatal(err)
	}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	args := []string{"--initial-cluster", fmt.Sprintf("1=%s,2=%s,3=%s", addrs[0], addrs[1], addrs[2]),
		"--bootstrap-api-key-file", keyFile, "--auth-max-staleness-ms", "1000"}
	nodes := []*clusterProc{{id: 1, dir: t.TempDir()}, {id: 2, dir: t.TempDir()}, {id: 3, dir: t.TempDir()}}
	startCluster(t, bin, nodes, addrs, args...)

	// handshake presents key to n and returns the answer's error code (Ok for HandshakeOk).
	handshake := func(n *clusterProc, key string) fibp.ErrorCode {
		c := fibptest.Dial(t, n.addrs.FIBP)
		defer c.NC.Close()
		switch f := c.HandshakeKey(key).(type) {
		case *fibp.HandshakeOk:
			return fibp.CodeOk
		case *fibp.Error:
			return f.ErrorCode
		default:
			t.Fatalf("node %d answered the Handshake %#v", n.id, f)
			return 0
		}
	}
	// admin sends req to n with the bootstrap key (which every node takes, current or not) until
	// it is not answered NodeNotReady (no meta leader yet), and returns the answer.
	admin := func(n *clusterProc, req fibp.Frame, code func(fibp.Frame) fibp.ErrorCode) fibp.Frame {
		deadline := time.Now().Add(time.Minute)
		for {
			c := fibptest.Dial(t, n.addrs.FIBP)
			if _, ok := c.HandshakeKey(boot).(*fibp.HandshakeOk); !ok {
				t.Fatalf("node %d refused the bootstrap key", n.id)
			}
			res := c.Call(1, req)
			c.NC.Close()
			if code(res) != fibp.CodeNodeNotReady || time.Now().After(deadline) {
				return res
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	createKey := func(name string) *fibp.CreateAPIKeyResult {
		r := admin(nodes[0], &fibp.CreateAPIKey{Name: name}, func(f fibp.Frame) fibp.ErrorCode { return f.(*fibp.CreateAPIKeyResult).ErrorCode }).(*fibp.CreateAPIKeyResult)
		if r.ErrorCode != fibp.CodeOk {
			t.Fatalf("CreateApiKey %s: %v", name, r.ErrorCode)
		}
		return r
	}
	// until waits, with a generous deadline, until n answers key's Handshake want.
	until := func(n *clusterProc, key string, want fibp.ErrorCode) time.Duration {
		start, deadline := time.Now(), time.Now().Add(time.Minute)
		for {
			got := handshake(n, key)
			if got == want {
				return time.Since(start)
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d still answers a key's Handshake %v, want %v", n.id, got, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	revoked, kept := createKey("revoked"), createKey("kept")
	for _, n := range nodes {
		until(n, revoked.Key, fibp.CodeOk)
		until(n, kept.Key, fibp.CodeOk)
	}
	r := admin(nodes[1], &fibp.RevokeAPIKey{KeyID: revoked.KeyID}, func(f fibp.Frame) fibp.ErrorCode { return f.(*fibp.RevokeAPIKeyResult).ErrorCode })
	if code := r.(*fibp.RevokeAPIKeyResult).ErrorCode; code != fibp.CodeOk {
		t.Fatalf("RevokeApiKey through node 2: %v", code)
	}
	for _, n := range nodes {
		t.Logf("node %d refuses the key revoked through node 2 %v after the revocation's answer", n.id, until(n, revoked.Key, fibp.CodeUnauthorized))
	}

	// Node 1 alone: the others killed, it hears no meta leader.
	for _, n := range nodes[1:] {
		n.p.cmd.Process.Signal(syscall.SIGKILL)
		n.p.wait()
	}
	t.Logf("node 1 alone answers AuthStateStale %v after the others' death", until(nodes[0], kept.Key, fibp.CodeAuthStateStale))
	if code := handshake(nodes[0], boot); code != fibp.CodeOk {
		t.Fatalf("node 1 alone refused the bootstrap key: %v", code)
	}
	for _, n := range nodes[1:] {
		n.launch(t, bin, addrs[n.id-1], args...)
	}
	t.Logf("node 1 takes the key again %v after the others' restart", until(nodes[0], kept.Key, fibp.CodeOk))
}
