package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
)

// Rift's counters and stream gauges appear on /metrics next to Fila's.
func TestRiftMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the server binary")
	}
	bin := buildServer(t)
	dir, certs := t.TempDir(), t.TempDir()
	conf := filepath.Join(t.TempDir(), "fila.yaml")
	yaml := fmt.Sprintf("rift:\n  listen: 127.0.0.1:0\n  dev_certs: %s\n  streams:\n    - {name: orders, subjects: [\"orders.>\"], durability: memory}\n", certs)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startServer(t, bin, nil, "--config", conf, "--data-dir", dir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error").addrs
	httpAddr := a.HTTP

	conn, err := tryDialRift(t, a.Rift, certs) // ready: no retry needed
	if err != nil {
		t.Fatalf("Rift at %s: %v", a.Rift, err)
	}
	sub := rt.Subscribe(t, conn, "greet.>", "")
	pub := rt.Open(t, conn)
	pub.Send(t, &riftproto.Publish{Subject: "greet.world", Payload: []byte("hi")})
	rt.Expect[*riftproto.Message](t, sub)
	sp := rt.Open(t, conn)
	sp.Send(t, &riftproto.StreamPublish{Stream: "orders", Subject: "orders.1", Payload: []byte("order")})
	rt.Expect[*riftproto.Stored](t, sp)

	metrics := httpGet(t, "http://"+httpAddr+"/metrics")
	for _, want := range []string{
		`rift_connections 1`,
		`rift_slow_consumers_total 0`,
		`rift_stream_messages{stream="orders"} 1`,
		`rift_stream_bytes{stream="orders"} 13`, // subject, reply and payload
		`rift_stream_last_sequence{stream="orders"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Other publications (the server's own events) may be counted too.
	for _, series := range []string{"rift_published_total", "rift_delivered_total", "rift_subscriptions"} {
		if v := metricValue(t, metrics, series); v < 1 {
			t.Errorf("%s = %v, want at least 1", series, v)
		}
	}
}

// tryDialRift connects to the binary's Rift listener as its dev identity, trusting the
// development CA it generated.
func tryDialRift(t *testing.T, addr, certs string) (*quic.Conn, error) {
	ca, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	if err != nil {
		return nil, err
	}
	token, err := os.ReadFile(filepath.Join(certs, "dev-token"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	tc := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{rt.ALPN}, MinVersion: tls.VersionTLS13}
	conn, err := rt.Dial(t, addr, tc, nil)
	if err != nil {
		return nil, err
	}
	if err := rt.Auth(conn, strings.TrimSpace(string(token))); err != nil {
		return nil, err
	}
	return conn, nil
}

// metricValue returns the value of an unlabelled series in a Prometheus text exposition.
func metricValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("no %s series", series)
	return 0
}
