package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
)

// /healthz says 503 and why while the store refuses writes, 200 again once it accepts them.
func TestHealthzReportsStorage(t *testing.T) {
	mem := storage.NewMem()
	b, err := broker.Open(broker.Options{Store: mem, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := &healthz{}
	get := func() (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get(); code != http.StatusOK {
		t.Fatalf("before the broker opened: %d", code)
	}
	h.b.Store(b)
	mem.FailWrites(syscall.ENOSPC)
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "no space left") {
		t.Fatalf("while writes fail: %d %q", code, body)
	}
	mem.ResumeWrites()
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("after recovery: %d %q", code, body)
	}
}
