package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
)

// A floor is a cost below any broker that bounds a figure: an fsync of the disk the brokers
// write to bounds latency with fsync on, and a bare QUIC or TLS echo round trip bounds Rift's and
// NATS's request/reply. They are measured in the same run as the figures they explain.
type floor struct {
	name     string
	p50, p99 float64 // µs
	doc      string
}

func (f floor) line() string {
	return fmt.Sprintf("FLOOR name=%s p50=%.1f p99=%.1f unit=us", f.name, f.p50, f.p99)
}

// measureFloors measures every floor, with samples round trips or syncs each.
func (e *env) measureFloors(ctx context.Context, samples int) ([]floor, error) {
	fsync, err := fsyncFloor(e.tmp, samples)
	if err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	server, err := tls.LoadX509KeyPair(e.certs.certFile, e.certs.keyFile)
	if err != nil {
		return nil, err
	}
	serverTLS := &tls.Config{Certificates: []tls.Certificate{server}, NextProtos: []string{"floor"}}
	clientTLS := e.certs.client.Clone()
	clientTLS.NextProtos = []string{"floor"}
	q, err := quicFloor(ctx, serverTLS, clientTLS, samples)
	if err != nil {
		return nil, fmt.Errorf("QUIC floor: %w", err)
	}
	t, err := tlsFloor(serverTLS, clientTLS, samples)
	if err != nil {
		return nil, fmt.Errorf("TLS floor: %w", err)
	}
	return []floor{
		{"fsync_append_1kb", fsync[0], fsync[1], "append 1 KB to a file and fsync it, on the filesystem of the brokers' data"},
		{"quic_echo_rtt_1kb", q[0], q[1], "1 KB echo round trip over bare quic-go on loopback, no broker"},
		{"tls_echo_rtt_1kb", t[0], t[1], "1 KB echo round trip over TLS on TCP on loopback, no broker"},
	}, nil
}

// fsyncFloor appends 1 KB records to a fresh file in dir and syncs each, as a WAL does.
func fsyncFloor(dir string, samples int) ([2]float64, error) {
	f, err := os.Create(filepath.Join(dir, "fsync-floor"))
	if err != nil {
		return [2]float64{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 1024)
	return timeEach(samples, func() error {
		if _, err := f.Write(rec); err != nil {
			return err
		}
		return f.Sync()
	})
}

func quicFloor(ctx context.Context, server, client *tls.Config, samples int) ([2]float64, error) {
	conf := &quic.Config{InitialPacketSize: 1452} // as Rift on loopback
	ln, err := quic.ListenAddr("127.0.0.1:0", server, conf)
	if err != nil {
		return [2]float64{}, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		if s, err := c.AcceptStream(ctx); err == nil {
			echo(s)
		}
	}()
	c, err := quic.DialAddr(ctx, ln.Addr().String(), client, conf)
	if err != nil {
		return [2]float64{}, err
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return [2]float64{}, err
	}
	return echoRoundTrips(s, samples)
}

func tlsFloor(server, client *tls.Config, samples int) ([2]float64, error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		return [2]float64{}, err
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
		return [2]float64{}, err
	}
	defer c.Close()
	return echoRoundTrips(c, samples)
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

func echoRoundTrips(rw io.ReadWriter, samples int) ([2]float64, error) {
	buf := make([]byte, 1024)
	return timeEach(samples, func() error {
		if _, err := rw.Write(buf); err != nil {
			return err
		}
		_, err := io.ReadFull(rw, buf)
		return err
	})
}

// timeEach runs one a tenth of samples times to warm up, then samples times, and returns the p50
// and p99 in microseconds.
func timeEach(samples int, one func() error) ([2]float64, error) {
	for range samples / 10 {
		if err := one(); err != nil {
			return [2]float64{}, err
		}
	}
	took := make([]time.Duration, 0, samples)
	for range samples {
		start := time.Now()
		if err := one(); err != nil {
			return [2]float64{}, err
		}
		took = append(took, time.Since(start))
	}
	return [2]float64{micros(percentile(took, 50)), micros(percentile(took, 99))}, nil
}

// floorsTable renders the floors for results.md.
func floorsTable(floors []floor) string {
	var b strings.Builder
	b.WriteString("| floor | p50 µs | p99 µs | what |\n| --- | ---: | ---: | --- |\n")
	for _, f := range floors {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.name, grouped(f.p50, "us"), grouped(f.p99, "us"), f.doc)
	}
	return b.String()
}
