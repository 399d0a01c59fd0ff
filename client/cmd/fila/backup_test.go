package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fila backup create posts to the broker's HTTP listener with the JSON content type the server
// requires and the API key as the bearer, and prints where the backup was written; a refusal is
// one line with the server's reason and, for a missing key, what to pass.
func TestBackupCreate(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		if r.Header.Get("Authorization") != "Bearer secret-key" {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"error": "this server requires a superadmin API key"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"path": "/var/backups/fila-backup-x", "bytes": 3 << 20, "files": 7, "duration_ms": 41.5, "store_format": 2})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	var out, errOut bytes.Buffer
	code := run([]string{"--api-key", "secret-key", "backup", "create", "--http-addr", addr}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "backup written: /var/backups/fila-backup-x (7 files, 3.0 MiB, 42 ms)") ||
		!strings.Contains(out.String(), "fila-server restore --from /var/backups/fila-backup-x") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if got.Method != http.MethodPost || got.URL.Path != "/api/v1/backup" || got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("sent %s %s with Content-Type %q", got.Method, got.URL.Path, got.Header.Get("Content-Type"))
	}

	out.Reset()
	errOut.Reset()
	code = run([]string{"--api-key", "", "backup", "create", "--http-addr", addr}, &out, &errOut)
	if msg := errOut.String(); code != 1 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "requires a superadmin API key") ||
		!strings.Contains(msg, "--api-key") {
		t.Fatalf("without a key: exit %d, stderr %q", code, msg)
	}
}
