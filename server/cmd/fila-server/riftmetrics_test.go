package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	addr, httpAddr, riftAddr := freeAddr(t), freeAddr(t), freeUDPAddr(t)
	conf := filepath.Join(t.TempDir(), "fila.yaml")
	yaml := fmt.Sprintf("rift:\n  listen: %s\n  dev_certs: %s\n  streams:\n    - {name: orders, subjects: [\"orders.>\"], durability: memory}\n", riftAddr, certs)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf, "--data-dir", dir, "--listen", addr, "--http-listen", httpAddr, "--log-level", "error")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	waitListening(t, addr)

	conn := dialRift(t, riftAddr, certs)
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

func freeUDPAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().String()
}

// dialRift connects to the binary's Rift listener as its dev identity, trusting the development
// CA it generated, and retries while the listener is still starting.
func dialRift(t *testing.T, addr, certs string) *quic.Conn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := tryDialRift(t, addr, certs)
		if err == nil {
			return conn
		}
		if time.Now().After(deadline) {
			t.Fatalf("rift listener: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
