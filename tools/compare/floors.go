package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/quic-go/quic-go"
)

// A floor is a cost below any broker that bounds a figure: an fsync of the disk the brokers
// write to bounds latency with fsync on, and a bare QUIC or TLS echo round trip bounds Rift's and
// NATS's request/reply. They are measured in the same run as the figures they explain.
type floor struct {
	name     string
	unit     string  // "us" (a latency: p50 and p99), "msg/s" (a rate) or cpuUnit; p50 holds a rate or CPU
	p50, p99 float64 // µs, the rate, or the CPU
	doc      string
}

func (f floor) line() string {
	if f.unit == "us" {
		return fmt.Sprintf("FLOOR name=%s p50=%.1f p99=%.1f unit=us", f.name, f.p50, f.p99)
	}
	return fmt.Sprintf("FLOOR name=%s value=%s unit=%s", f.name, plain(f.p50, f.unit), f.unit)
}

// value renders the floor for the table.
func (f floor) value() string {
	if f.unit == "us" {
		return fmt.Sprintf("p50 %s µs, p99 %s µs", grouped(f.p50, "us"), grouped(f.p99, "us"))
	}
	return grouped(f.p50, f.unit) + " " + f.unit
}

// measureFloors measures every floor, with samples round trips or syncs each, and each rate for
// window.
func (e *env) measureFloors(ctx context.Context, samples int, window time.Duration) ([]floor, error) {
	fsync, err := fsyncFloor(e.tmp, samples, 1)
	if err != nil {
		return nil, fmt.Errorf("fsync floor: %w", err)
	}
	fsync2, err := fsyncFloor(e.tmp, samples, 2)
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
	quicConn := func() (*link, error) { return quicLink(ctx, serverTLS, clientTLS) }
	tlsConn := func() (*link, error) { return tlsLink(serverTLS, clientTLS) }
	q, err := echoFloor(quicConn, samples)
	if err != nil {
		return nil, fmt.Errorf("QUIC floor: %w", err)
	}
	t, err := echoFloor(tlsConn, samples)
	if err != nil {
		return nil, fmt.Errorf("TLS floor: %w", err)
	}
	qr, qcpu, err := rateFloor(quicConn, window)
	if err != nil {
		return nil, fmt.Errorf("QUIC rate floor: %w", err)
	}
	rr, rcpu, err := relayFloor(ctx, e, clientTLS, window)
	if err != nil {
		return nil, fmt.Errorf("QUIC relay floor: %w", err)
	}
	tr, _, err := rateFloor(tlsConn, window)
	if err != nil {
		return nil, fmt.Errorf("TLS rate floor: %w", err)
	}
	return []floor{
		{"fsync_append_1kb", "us", fsync[0], fsync[1], "append 1 KB to a file and fsync it, on the filesystem of the brokers' data"},
		{fsyncPairFloor, "us", fsync2[0], fsync2[1], "two of those in a row: the durable round trip's two appends (enqueue, ack)"},
		{"quic_echo_rtt_1kb", "us", q[0], q[1], "1 KB echo round trip over bare quic-go on loopback, no broker"},
		{"tls_echo_rtt_1kb", "us", t[0], t[1], "1 KB echo round trip over TLS on TCP on loopback, no broker"},
		{"quic_stream_1kb", "msg/s", qr, 0, "1 KB messages one way over one bare quic-go stream, no broker (a pub/sub hop)"},
		{"quic_stream_1kb_cpu", cpuUnit, qcpu, 0, "CPU per message of that stream, both ends (in this process)"},
		{"quic_relay_1kb", "msg/s", rr, 0, "1 KB messages over two bare quic-go connections joined by a relay process: pub/sub's two hops with no broker work"},
		{"quic_relay_1kb_cpu", cpuUnit, rcpu, 0, "CPU per message of the relay process and of this one (all four ends)"},
		{"tls_stream_1kb", "msg/s", tr, 0, "1 KB messages one way over bare TLS on TCP, no broker"},
	}, nil
}

// A link is a client stream to a loopback server; the server's end arrives on server once the
// client has sent something (the channel is closed without one when accepting fails). close ends
// both.
type link struct {
	client io.ReadWriter
	server <-chan io.ReadWriter
	close  func()
}

// quicLink connects over quic-go, with the packet size and windows Rift uses on loopback.
func quicLink(ctx context.Context, server, client *tls.Config) (*link, error) {
	conf := floorQUIC()
	ln, err := quic.ListenAddr("127.0.0.1:0", server, conf)
	if err != nil {
		return nil, err
	}
	srv := make(chan io.ReadWriter, 1)
	go func() {
		defer close(srv)
		if c, err := ln.Accept(ctx); err == nil {
			if s, err := c.AcceptStream(ctx); err == nil {
				srv <- s
			}
		}
	}()
	c, err := quic.DialAddr(ctx, ln.Addr().String(), client, conf)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		c.CloseWithError(0, "")
		ln.Close()
		return nil, err
	}
	return &link{client: s, server: srv, close: func() { c.CloseWithError(0, ""); ln.Close() }}, nil
}

// tlsLink connects over TLS on TCP.
func tlsLink(server, client *tls.Config) (*link, error) {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		return nil, err
	}
	srv := make(chan io.ReadWriter, 1)
	accepted := make(chan net.Conn, 1)
	go func() {
		defer close(srv)
		defer close(accepted)
		if c, err := ln.Accept(); err == nil {
			accepted <- c
			if c.(*tls.Conn).Handshake() == nil { // the client's Dial waits for it
				srv <- c
			}
		}
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), client)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &link{client: c, server: srv, close: func() {
		c.Close()
		ln.Close()
		if s, ok := <-accepted; ok {
			s.Close()
		}
	}}, nil
}

// echoFloor times 1 KB echo round trips over l.
func echoFloor(connect func() (*link, error), samples int) ([2]float64, error) {
	l, err := connect()
	if err != nil {
		return [2]float64{}, err
	}
	defer l.close()
	go func() {
		if s, ok := <-l.server; ok {
			echo(s)
		}
	}()
	return echoRoundTrips(l.client, samples)
}

// rateFloor measures how many 1 KB messages l carries one way per second, and the CPU this
// process spent per message doing so.
func rateFloor(connect func() (*link, error), window time.Duration) (rate, cpu float64, err error) {
	l, err := connect()
	if err != nil {
		return 0, 0, err
	}
	defer l.close()
	go pour(l.client)
	s, ok := <-l.server
	if !ok {
		return 0, 0, errors.New("the server side did not accept the stream")
	}
	rate, cpu = drain(s, window, selfCPU)
	return rate, cpu, nil
}

// pour writes 1 KB messages, 64 at a time, until the peer goes away.
func pour(w io.Writer) {
	batch := make([]byte, 64<<10)
	for {
		if _, err := w.Write(batch); err != nil {
			return
		}
	}
}

// drain reads for a short warm-up and then for window, and returns the 1 KB messages per second
// it read during the window and the CPU time (as cpuTime counts it) spent per message meanwhile.
func drain(r io.Reader, window time.Duration, cpuTime func() time.Duration) (rate, cpu float64) {
	buf := make([]byte, 64<<10)
	warm := time.Now().Add(window / 5)
	for time.Now().Before(warm) {
		if _, err := r.Read(buf); err != nil {
			return 0, 0
		}
	}
	var n int64
	start, cpu0 := time.Now(), cpuTime()
	for time.Since(start) < window {
		m, err := r.Read(buf)
		n += int64(m)
		if err != nil {
			break
		}
	}
	msgs := float64(n) / 1024
	if msgs == 0 {
		return 0, 0
	}
	return msgs / time.Since(start).Seconds(), float64(cpuTime()-cpu0) / 1e3 / msgs
}

// fsyncFloor appends 1 KB records to a fresh file in dir and syncs each, as a WAL does; a sample
// is syncs such appends in a row.
func fsyncFloor(dir string, samples, syncs int) ([2]float64, error) {
	f, err := os.Create(filepath.Join(dir, "fsync-floor"))
	if err != nil {
		return [2]float64{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	rec := make([]byte, 1024)
	return timeEach(samples, func() error {
		for range syncs {
			if _, err := f.Write(rec); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
		}
		return nil
	})
}

// fsyncPairFloor names the floor of two fsyncs in a row.
const fsyncPairFloor = "fsync2_append_1kb"

// A gap is a figure's distance above a floor, with the most it may be (issue 15: the durable
// round trip's p50 within 0.3 ms of two fsyncs).
type gap struct {
	figure, floor string
	limit         float64 // µs
}

var gaps = []gap{{figure: "roundtrip_p50_1kb_fsync", floor: fsyncPairFloor, limit: 300}}

// gapLines renders, for every gap whose figure and floor were both measured, its summary line:
//
//	GAP figure=roundtrip_p50_1kb_fsync floor=fsync2_append_1kb fila=812.0 floor_p50=540.2 gap=271.8 limit=300 unit=us result=met
func gapLines(figs []figure, floors []floor) []string {
	var out []string
	for _, g := range gaps {
		fi := slices.IndexFunc(figs, func(f figure) bool { return f.name == g.figure })
		fl := slices.IndexFunc(floors, func(f floor) bool { return f.name == g.floor })
		if fi < 0 || fl < 0 || math.IsNaN(figs[fi].fila) {
			continue
		}
		d := figs[fi].fila - floors[fl].p50
		res := "met"
		if d > g.limit {
			res = "missed"
		}
		out = append(out, fmt.Sprintf("GAP figure=%s floor=%s fila=%.1f floor_p50=%.1f gap=%.1f limit=%.0f unit=us result=%s",
			g.figure, g.floor, figs[fi].fila, floors[fl].p50, d, g.limit, res))
	}
	return out
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
	b.WriteString("| floor | measured | what |\n| --- | --- | --- |\n")
	for _, f := range floors {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", f.name, f.value(), f.doc)
	}
	return b.String()
}
