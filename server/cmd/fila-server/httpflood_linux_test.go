package main

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// Slow HTTP clients (slowloris: headers sent a byte at a time, or never finished) must not keep
// the health probes from their answer. The listener serves maxHTTPConnections at once; before,
// the 65th connection waited in the kernel's backlog until one of them timed out (10 s to send
// the headers), so 768 slow connections ahead of a probe held it up for two minutes. Now a new
// connection at the limit closes the oldest one that is not being answered.
func TestSlowHTTPClientsDoNotStarveTheProbes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	p := startServer(t, buildServer(t), nil, "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error")
	const slow = 12 * maxHTTPConnections
	dialMany(t, p.addrs.HTTP, slow, []byte("GET /readyz HTTP/1.1\r\nHost: fi")) // the headers never end
	probe := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, path := range []string{"/readyz", "/healthz", "/metrics"} {
		resp, err := probe.Get("http://" + p.addrs.HTTP + path)
		if err != nil {
			t.Fatalf("%s with %d slow HTTP connections open: %v", path, slow, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s with %d slow HTTP connections open: %d %q", path, slow, resp.StatusCode, body)
		}
	}
	assertServes(t, p, "after the slow HTTP connections")
}
