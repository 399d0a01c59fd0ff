package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The health check passes only when /readyz and /healthz both answer 200, and says which did not.
func TestHealthcheck(t *testing.T) {
	ready := answer{200, "ready"}
	ok := answer{200, "ok"}
	for _, tc := range []struct {
		name          string
		ready, health answer
		wantCode      int
		wantOut       string
	}{
		{"serving", ready, ok, 0, "/readyz: ready, /healthz: ok"},
		{"recovering", answer{503, "recovering"}, ok, 1, "unhealthy: /readyz: 503 Service Unavailable: recovering"},
		{"store refusing writes", ready, answer{503, "storage not accepting writes: disk full"}, 1,
			"unhealthy: /healthz: 503 Service Unavailable: storage not accepting writes: disk full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("/readyz", tc.ready)
			mux.Handle("/healthz", tc.health)
			srv := httptest.NewServer(mux)
			defer srv.Close()
			// the listener's address as http_listen names it, wildcard host and all
			addr := strings.Replace(strings.TrimPrefix(srv.URL, "http://"), "127.0.0.1", "0.0.0.0", 1)
			var out, errOut bytes.Buffer
			code := healthcheck([]string{"--http-addr", addr}, &out, &errOut)
			if code != tc.wantCode || !strings.HasPrefix(out.String(), tc.wantOut) {
				t.Fatalf("healthcheck = %d, %q (stderr %q); want %d, %q…", code, out.String(), errOut.String(), tc.wantCode, tc.wantOut)
			}
		})
	}
	t.Run("nothing listening", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := strings.TrimPrefix(srv.URL, "http://")
		srv.Close()
		var out, errOut bytes.Buffer
		if code := healthcheck([]string{"--http-addr", addr}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "connection refused") {
			t.Fatalf("healthcheck = %d, %q", code, out.String())
		}
	})
	t.Run("bad address", func(t *testing.T) {
		var out, errOut bytes.Buffer
		if code := healthcheck([]string{"--http-addr", "9555"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "--http-addr") {
			t.Fatalf("healthcheck = %d, %q", code, errOut.String())
		}
	})
}

// answer is an HTTP status and a one-line body.
type answer struct {
	code int
	body string
}

func (a answer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(a.code)
	w.Write([]byte(a.body + "\n"))
}
