package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/internal/fibptest"
	rt "github.com/filamq/fila/server/internal/rifttest"
)

// A backup taken while producers enqueue and another queue churns (enqueued, consumed and acked,
// so that its group snapshots and truncates its log while backups are copied) holds every
// message whose enqueue the server answered Ok before the backup was asked for: restored into a
// new directory and served, the queue delivers each with its payload.
func TestBackupUnderLoadHoldsEveryAcknowledgedEnqueue(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir, backupDir := t.TempDir(), filepath.Join(t.TempDir(), "backups")
	srv := startServer(t, bin, nil, "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
		"--backup-dir", backupDir, "--log-level", "warn")
	addr := srv.addrs.FIBP
	c := fibptest.Dial(t, addr)
	c.Handshake()
	for i, q := range []string{"kept", "churn"} {
		if r := c.Call(uint32(i+1), &fibp.CreateQueue{Name: q}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
			t.Fatal(r.ErrorCode)
		}
	}

	l := &ledger{enqueued: map[wire.UUID]string{}}
	var churned atomic.Int64
	var wg sync.WaitGroup
	for p := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); produceTo(addr, "kept", fmt.Sprintf("p%d", p), l) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); produceTo(addr, "churn", "c", &ledger{enqueued: map[wire.UUID]string{}}) }()
	go func() { defer wg.Done(); ackAll(addr, "churn", &churned) }()

	// The backups come once the churning queue has snapshotted (its log is truncated behind the
	// snapshot from then on) and the producers have had a good many enqueues answered.
	snaps := filepath.Join(dir, "snapshots", fmt.Sprintf("q%x", "churn"), "snapshots")
	deadline := time.Now().Add(2 * time.Minute) // a safety net against a hang
	for {
		entries, _ := os.ReadDir(snaps)
		if n, _ := l.counts(); len(entries) > 0 && n >= 5000 {
			break
		}
		if time.Now().After(deadline) {
			n, _ := l.counts()
			t.Fatalf("the load did not get going: %d enqueues answered, %d churned, snapshots of churn: %d", n, churned.Load(), len(entries))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var before map[wire.UUID]string // acknowledged before the last backup was asked for
	var last backupResult
	for range 3 {
		l.mu.Lock()
		before = maps.Clone(l.enqueued)
		l.mu.Unlock()
		last = postBackup(t, srv.addrs.HTTP, "")
		if out, err := exec.Command(bin, "check", "--data-dir", last.Path).CombinedOutput(); err != nil {
			t.Fatalf("check of the backup %s: %v\n%s", last.Path, err, out)
		}
	}
	if err := srv.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("stop: %v", err)
	}
	wg.Wait()
	t.Logf("backup %s: %d files, %d bytes in %.1f ms; %d enqueues answered before it, %d churned",
		last.Path, last.Files, last.Bytes, last.DurationMs, len(before), churned.Load())

	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := exec.Command(bin, "restore", "--from", last.Path, "--data-dir", restored).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	srv = startBinary(t, bin, restored, "127.0.0.1:0")
	defer srv.stop(syscall.SIGTERM)
	after := drain(t, srv.addrs.FIBP, "kept")
	for id, payload := range before {
		got, ok := after[id]
		switch {
		case !ok:
			t.Fatalf("enqueue %v (%q), answered Ok before the backup, is not in the restored queue (%d of %d there)",
				id, payload, len(after), len(before))
		case got != payload:
			t.Fatalf("message %v came back with payload %q, enqueued as %q", id, got, payload)
		}
	}
	t.Logf("restored: %d messages in kept, every one of the %d answered before the backup", len(after), len(before))
}

// ackAll consumes queue and acks every delivery until the connection dies, counting them.
func ackAll(addr, queue string, acked *atomic.Int64) {
	nc, fr, err := rawConn(addr)
	if err != nil {
		return
	}
	defer nc.Close()
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 1, &fibp.Consume{Queue: queue, Credit: 256})); err != nil {
		return
	}
	for req := uint32(2); ; req++ {
		body, err := fr.Next()
		if err != nil {
			return
		}
		h, rest, _ := fibp.ParseHeader(body)
		if h.Opcode != fibp.OpDelivery {
			continue
		}
		var d fibp.Delivery
		if d.Decode(rest) != nil {
			return
		}
		ack := &fibp.Ack{}
		for _, m := range d.Messages {
			ack.Items = append(ack.Items, fibp.AckItem{Queue: queue, MessageID: m.MessageID})
		}
		out := fibp.AppendFrame(nil, 0, req, ack)
		out = fibp.AppendFrame(out, 0, 1, &fibp.Credit{AdditionalCredit: uint32(len(d.Messages))})
		if _, err := nc.Write(out); err != nil {
			return
		}
		acked.Add(int64(len(d.Messages)))
	}
}

// drain consumes every message of queue (as many as GetStats counts) and returns them by ID.
func drain(t *testing.T, addr, queue string) map[wire.UUID]string {
	t.Helper()
	c := fibptest.Dial(t, addr)
	c.Handshake()
	st := c.Call(1, &fibp.GetStats{Queue: queue}).(*fibp.GetStatsResult)
	total := int(st.Depth + st.InFlight)
	c.Subscribe(2, queue, 0)
	got := map[wire.UUID]string{}
	for len(got) < total {
		_, f := c.Next()
		d, ok := f.(*fibp.Delivery)
		if !ok {
			continue // an AckResult
		}
		for _, m := range d.Messages {
			got[m.MessageID] = string(m.Payload)
			c.Send(3, &fibp.Ack{Items: []fibp.AckItem{{Queue: queue, MessageID: m.MessageID}}})
		}
	}
	return got
}

// postBackup asks the server at httpAddr for a backup, with key as its bearer ("" for none),
// and fails the test unless it answers 200.
func postBackup(t *testing.T, httpAddr, key string) backupResult {
	t.Helper()
	status, body := askBackup(t, httpAddr, key, nil)
	if status != http.StatusOK {
		t.Fatalf("POST %s answered %d: %s", backupPath, status, body)
	}
	var res backupResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return res
}

// askBackup sends POST /api/v1/backup (see apiCall) and returns the status and body.
func askBackup(t *testing.T, httpAddr, key string, edit func(*http.Request)) (int, string) {
	t.Helper()
	return apiCall(t, http.MethodPost, "http://"+httpAddr+backupPath, key, edit)
}

// A second server started on a data directory in use stops at once, saying another fila-server
// is using it, and leaves the first serving; `fila-server check` on it says the same and exits 2;
// once the first has stopped, check verifies the directory. (Before: "storage: open DIR:
// resource temporarily unavailable", and check reported the directory DAMAGED.)
func TestADataDirectoryInUseIsRefusedSayingSo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir := t.TempDir()
	first := startBinary(t, bin, dir, "127.0.0.1:0")
	want := "another fila-server is using " + dir

	code, stderr := refusedStart(t, bin, serverEnv(), "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "")
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("a second server exited %d, want 1 saying %q:\n%s", code, want, stderr)
	}
	var out strings.Builder
	cmd := exec.Command(bin, "check", "--data-dir", dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "DAMAGED") {
		t.Fatalf("check on a directory in use: %v, want exit 2 saying %q:\n%s", err, want, out.String())
	}
	c := fibptest.Dial(t, first.addrs.FIBP) // the first serves on
	c.Handshake()
	if r := c.Call(1, &fibp.CreateQueue{Name: "still"}).(*fibp.CreateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatalf("the first server after the refused start: %v", r.ErrorCode)
	}
	if err := first.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "check", "--data-dir", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "ok: no damage found") {
		t.Fatalf("check on the stopped directory: %v\n%s", err, out)
	}
}

// Who may ask for a backup: with authentication on, a superadmin key as the bearer, nothing
// else; never a GET, a request without Content-Type: application/json or with an Origin header
// (a web page's); nothing at all without backup_dir. A restore refuses a directory that is not
// empty and a backup that is not complete.
func TestBackupRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir, backupDir := t.TempDir(), filepath.Join(t.TempDir(), "backups")
	p := startServerEnv(t, bin, serverEnv("FILA_BOOTSTRAP_API_KEY="+testBootstrapKey), nil, "--data-dir", dir,
		"--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--backup-dir", backupDir, "--log-level", "warn")
	admin := handshake(t, p.addrs.FIBP, testBootstrapKey)
	tenant, ok := admin.Call(1, &fibp.CreateAPIKey{Name: "tenant"}).(*fibp.CreateAPIKeyResult)
	if !ok || tenant.ErrorCode != fibp.CodeOk {
		t.Fatalf("CreateApiKey answered %#v", tenant)
	}
	for _, tc := range []struct {
		name   string
		key    string
		edit   func(*http.Request)
		status int
		says   string
	}{
		{"no key", "", nil, http.StatusUnauthorized, "Authorization: Bearer"},
		{"unknown key", "not-a-key-of-this-server-0123456789", nil, http.StatusUnauthorized, "unknown or revoked"},
		{"not superadmin", tenant.Key, nil, http.StatusForbidden, "not a superadmin key"},
		{"GET", testBootstrapKey, func(r *http.Request) { r.Method = http.MethodGet }, http.StatusMethodNotAllowed, "takes POST"},
		{"no JSON", testBootstrapKey, func(r *http.Request) { r.Header.Del("Content-Type") }, http.StatusUnsupportedMediaType, "application/json"},
		{"a web page", testBootstrapKey, func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, http.StatusForbidden, "Origin"},
	} {
		if status, body := askBackup(t, p.addrs.HTTP, tc.key, tc.edit); status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: answered %d %s, want %d saying %q", tc.name, status, body, tc.status, tc.says)
		}
	}
	if entries, _ := os.ReadDir(backupDir); len(entries) > 0 {
		t.Fatalf("refused requests wrote %d entries into backup_dir", len(entries))
	}
	res := postBackup(t, p.addrs.HTTP, testBootstrapKey)

	// restore: into a directory that holds something, from a backup cut short.
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "keep"), nil, 0o600)
	restoreRefused(t, bin, res.Path, full, "is not empty")
	partial := filepath.Join(t.TempDir(), "fila-backup-x.partial")
	if err := os.Rename(res.Path, partial); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(partial, backupManifest))
	restoreRefused(t, bin, partial, filepath.Join(t.TempDir(), "new"), "not a complete backup")
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}

	// Without backup_dir, and without authentication from an address other than loopback.
	p = startServer(t, bin, nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	if status, body := askBackup(t, p.addrs.HTTP, "", nil); status != http.StatusConflict || !strings.Contains(body, "backup_dir") {
		t.Errorf("without backup_dir: answered %d %s", status, body)
	}
	if ip := nonLoopbackIP(); ip != "" {
		p = startServer(t, bin, nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", ip+":0",
			"--backup-dir", filepath.Join(t.TempDir(), "b"), "--log-level", "warn")
		if status, body := askBackup(t, p.addrs.HTTP, "", nil); status != http.StatusForbidden || !strings.Contains(body, "loopback only") {
			t.Errorf("from %s without authentication: answered %d %s", ip, status, body)
		}
	}
}

// restoreRefused runs fila-server restore and fails the test unless it is refused saying says.
func restoreRefused(t *testing.T, bin, from, to, says string) {
	t.Helper()
	out, err := exec.Command(bin, "restore", "--from", from, "--data-dir", to).CombinedOutput()
	if err == nil || !strings.Contains(string(out), says) {
		t.Errorf("restore --from %s --data-dir %s: %v, want a refusal saying %q:\n%s", from, to, err, says, out)
	}
}

// nonLoopbackIP returns an IPv4 address of this machine other than loopback, "" if it has none.
func nonLoopbackIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// A backup holds Rift's durable streams too: a stream's records published before the backup are
// in the node started on its restored copy.
func TestBackupHoldsRiftStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir, certs, backupDir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "backups")
	conf := filepath.Join(t.TempDir(), "fila.yaml")
	yaml := fmt.Sprintf("rift:\n  listen: 127.0.0.1:0\n  dev_certs: %s\n  streams:\n    - {name: orders, subjects: [\"orders.>\"]}\n", certs)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", conf, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error"}
	p := startServer(t, bin, nil, append(args, "--data-dir", dir, "--backup-dir", backupDir)...)
	conn, err := tryDialRift(t, p.addrs.Rift, certs)
	if err != nil {
		t.Fatalf("Rift at %s: %v", p.addrs.Rift, err)
	}
	for i := range 3 {
		sp := rt.Open(t, conn) // a QUIC stream per request
		sp.Send(t, &riftproto.StreamPublish{Stream: "orders", Subject: "orders.new", Payload: fmt.Appendf(nil, "order-%d", i)})
		rt.Expect[*riftproto.Stored](t, sp)
	}
	res := postBackup(t, p.addrs.HTTP, "")
	if err := p.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var m manifest
	if data, err := os.ReadFile(filepath.Join(res.Path, backupManifest)); err != nil || json.Unmarshal(data, &m) != nil || !m.Rift {
		t.Fatalf("the manifest does not say the backup holds Rift's streams: %v %+v", err, m)
	}

	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := exec.Command(bin, "restore", "--from", res.Path, "--data-dir", restored).CombinedOutput(); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	p = startServer(t, bin, nil, append(args, "--data-dir", restored)...)
	defer p.stop(syscall.SIGTERM)
	metrics := httpGet(t, "http://"+p.addrs.HTTP+"/metrics")
	if v := metricValue(t, metrics, `rift_stream_messages{stream="orders"}`); v != 3 {
		t.Fatalf("the restored node's stream holds %v records, want 3", v)
	}
}
