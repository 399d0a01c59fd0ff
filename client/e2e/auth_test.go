package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/filamq/fila/client/fila"
)

const bootstrapKey = "e2e-bootstrap-key-0123456789abcdef0123"

// authServer starts a private broker with authentication on.
func authServer(t *testing.T, args ...string) *server {
	t.Helper()
	path := writeFile(t, "bootstrap.key", bootstrapKey+"\n")
	return privateServer(t, append([]string{"--bootstrap-api-key-file", path}, args...)...)
}

func dialKey(t *testing.T, addr, key string) (*fila.Client, error) {
	t.Helper()
	c, err := fila.Dial(testCtx(t), addr, &fila.Options{APIKey: key})
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

// Keys and ACLs through the CLI and the SDK: create, set, read, enforce, revoke, restart.
func TestCLIKeysAndACLs(t *testing.T) {
	t.Parallel()
	s := authServer(t)
	boot := func(args ...string) string {
		return cliOK(t, s.addr, append([]string{"--api-key", bootstrapKey}, args...)...)
	}

	wantCLIError(t, cli(t, s.addr, "queue", "list"), 1, "the server requires an API key: pass --api-key or set FILA_API_KEY")
	wantCLIError(t, cli(t, s.addr, "--api-key", "fila_wrong", "queue", "list"), 1, "the server rejected the API key")

	boot("queue", "create", "orders")
	boot("queue", "create", "other")
	var k fila.APIKey
	if err := json.Unmarshal([]byte(boot("key", "create", "worker", "--json")), &k); err != nil || k.ID == "" || len(k.Key) < 43 {
		t.Fatalf("key create --json: %+v %v", k, err)
	}
	r := cli(t, s.addr, "--api-key", bootstrapKey, "key", "create", "ops", "--superadmin", "--expires", "720h")
	if r.code != 0 || !strings.Contains(r.stdout, "secret") || !strings.Contains(r.stderr, "shown once") {
		t.Fatalf("key create: %+v", r)
	}
	wantCLIError(t, cli(t, s.addr, "--api-key", bootstrapKey, "key", "create", "x", "--expires", "1h", "--expires-at", "2030-01-01T00:00:00Z"), 2, "not both")

	boot("acl", "set", k.ID, "produce:orders", "consume:orders*")
	var acl fila.ACL
	if err := json.Unmarshal([]byte(boot("acl", "get", k.ID, "--json")), &acl); err != nil || len(acl.Permissions) != 2 ||
		acl.Permissions[1] != (fila.Permission{Kind: "consume", Pattern: "orders*"}) {
		t.Fatalf("acl get --json: %+v %v", acl, err)
	}
	wantCLIError(t, cli(t, s.addr, "--api-key", bootstrapKey, "acl", "set", k.ID, "write:orders"), 1, "InvalidConfigValue")
	wantCLIError(t, cli(t, s.addr, "--api-key", bootstrapKey, "acl", "set", k.ID, "orders"), 2, "KIND:PATTERN")
	wantCLIError(t, cli(t, s.addr, "--api-key", bootstrapKey, "acl", "get", "key_nope"), 1, "ApiKeyNotFound")

	list := boot("key", "list", "--json")
	if !strings.Contains(list, k.ID) || strings.Contains(list, k.Key) {
		t.Fatalf("key list shows %q", list)
	}

	// The worker: produce on orders only; sees orders and orders.dlq (consume:orders*).
	w, err := dialKey(t, s.addr, k.Key)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	rs, err := w.Enqueue(ctx, fila.Message{Queue: "orders", Payload: []byte("a")}, fila.Message{Queue: "other", Payload: []byte("b")})
	if err != nil || len(rs) != 2 || rs[0].Err != nil {
		t.Fatalf("enqueue to orders and other: %+v %v", rs, err)
	}
	wantCode(t, "enqueue to other", rs[1].Err, fila.ErrForbidden)
	_, err = w.CreateQueue(ctx, fila.QueueConfig{Name: "mine"})
	wantCode(t, "CreateQueue", err, fila.ErrForbidden)
	wantCLIError(t, cli(t, s.addr, "--api-key", k.Key, "key", "list"), 1, "Forbidden")
	if out := cliOK(t, s.addr, "--api-key", k.Key, "queue", "list"); !strings.Contains(out, "orders.dlq") || strings.Contains(out, "other") {
		t.Fatalf("queue list as the worker:\n%s", out)
	}

	boot("key", "revoke", k.ID)
	_, err = w.Enqueue(ctx, fila.Message{Queue: "orders", Payload: []byte("c")})
	wantCode(t, "enqueue after revocation, same connection", err, fila.ErrUnauthorized)
	if _, err := dialKey(t, s.addr, k.Key); !errors.Is(err, fila.ErrUnauthorized) {
		t.Fatalf("dial with a revoked key: %v", err)
	}

	s.restart(t)
	if out := boot("key", "list"); !strings.Contains(out, "ops") || strings.Contains(out, "worker") {
		t.Fatalf("key list after restart:\n%s", out)
	}
}

// devCerts runs `fila-server dev-certs DIR`.
func devCerts(t *testing.T, dir string) {
	t.Helper()
	out, err := exec.Command(serverBin, "dev-certs", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "client-key.pem") {
		t.Fatalf("dev-certs: %v\n%s", err, out)
	}
}

// A mistake at the connection level reads as what it is.
func TestCLIConnectionMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	devCerts(t, dir)
	j := func(name string) string { return filepath.Join(dir, name) }
	tlsServer := privateServer(t, "--tls-cert", j("server.pem"), "--tls-key", j("server-key.pem"))
	wantCLIError(t, cli(t, tlsServer.addr, "queue", "list"), 1, "expects TLS: pass --tls")
	wantCLIError(t, cli(t, tlsServer.addr, "--tls", "queue", "list"), 1, "pass --ca FILE")
	cliOK(t, tlsServer.addr, "--ca", j("ca.pem"), "queue", "list")

	plain := privateServer(t)
	wantCLIError(t, cli(t, plain.addr, "--ca", j("ca.pem"), "queue", "list"), 1, "does not speak TLS")

	withHTTP := privateServer(t, "--http-listen", anyPort)
	wantCLIError(t, cli(t, withHTTP.httpAddr, "queue", "list"), 1, "this is an HTTP server, not FIBP")

	mtls := privateServer(t, "--tls-cert", j("server.pem"), "--tls-key", j("server-key.pem"), "--tls-client-ca", j("ca.pem"))
	if r := cli(t, mtls.addr, "--ca", j("ca.pem"), "queue", "list"); r.code != 1 {
		t.Fatalf("mTLS without a client certificate: %+v", r)
	}
	cliOK(t, mtls.addr, "--ca", j("ca.pem"), "--cert", j("client.pem"), "--key", j("client-key.pem"), "queue", "list")
	wantCLIError(t, cli(t, mtls.addr, "--ca", j("ca.pem"), "--cert", j("client.pem"), "queue", "list"), 1, "both its certificate and its key")
}

// SIGHUP reloads the certificate files: new connections get the new certificate, an open one
// keeps working.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	t.Parallel()
	live, next := t.TempDir(), t.TempDir()
	devCerts(t, live)
	devCerts(t, next)
	j := func(dir, name string) string { return filepath.Join(dir, name) }
	s := privateServer(t, "--tls-cert", j(live, "server.pem"), "--tls-key", j(live, "server-key.pem"))
	tlsTo := func(dir string) *fila.Options {
		cfg, err := fila.TLSFiles{CA: j(dir, "ca.pem")}.Config()
		if err != nil {
			t.Fatal(err)
		}
		return &fila.Options{TLS: cfg}
	}
	open, err := fila.Dial(testCtx(t), s.addr, tlsTo(live))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if c, err := fila.Dial(testCtx(t), s.addr, tlsTo(next)); err == nil {
		c.Close()
		t.Fatal("a client trusting the next CA connected before the reload")
	}
	for _, name := range []string{"server.pem", "server-key.pem"} {
		data, err := os.ReadFile(j(next, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(j(live, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.proc.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a client of the next CA connects after SIGHUP", func() bool {
		c, err := fila.Dial(testCtx(t), s.addr, tlsTo(next))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if _, err := open.Ping(testCtx(t)); err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}
	if !s.running() {
		t.Fatal("SIGHUP stopped the server")
	}
}
