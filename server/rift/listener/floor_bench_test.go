package listener_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/server/rift/devcert"
)

// The transport floor under Rift's latency: a bare 1 KB echo round trip over quic-go and over TLS
// on TCP, in one process, with no broker at all. Rift request/reply makes two such QUIC round
// trips (requester–server, server–responder), NATS two TLS ones, so the difference between these
// figures bounds how close Rift can get to NATS.

func BenchmarkFloorQUICRoundTrip1KB(b *testing.B) {
	server, client := floorTLS(b)
	ln, err := quic.ListenAddr("127.0.0.1:0", server, &quic.Config{InitialPacketSize: 1452})
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		s, err := c.AcceptStream(context.Background())
		if err != nil {
			return
		}
		echo(s)
	}()
	c, err := quic.DialAddr(context.Background(), ln.Addr().String(), client, &quic.Config{InitialPacketSize: 1452})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	roundTrips(b, "floor_quic_rtt_1kb", s)
}

func BenchmarkFloorTLSRoundTrip1KB(b *testing.B) {
	server, client := floorTLS(b)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		echo(c)
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	roundTrips(b, "floor_tls_rtt_1kb", c)
}

func floorTLS(b *testing.B) (server, client *tls.Config) {
	bundle, err := devcert.Generate(devcert.DefaultHosts)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := tls.X509KeyPair(bundle.Cert, bundle.Key)
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle.CA)
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"floor"}},
		&tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"floor"}}
}

// echo writes back every 1 KB it reads until the peer goes away.
func echo(rw io.ReadWriter) {
	buf := make([]byte, 1024)
	for {
		if _, err := io.ReadFull(rw, buf); err != nil {
			return
		}
		if _, err := rw.Write(buf); err != nil {
			return
		}
	}
}

// roundTrips times b.N echo round trips and reports their p50 and p99.
func roundTrips(b *testing.B, name string, rw io.ReadWriter) {
	buf := make([]byte, 1024)
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := rw.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rw, buf); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	p50, p99 := took[len(took)/2], took[len(took)*99/100]
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	if b.N >= 1000 { // the calibration runs are too short for a percentile
		benchReport(name+"_p50", float64(p50)/1e3, "us")
		benchReport(name+"_p99", float64(p99)/1e3, "us")
	}
}
