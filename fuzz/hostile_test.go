package fuzz

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/transport"
)

var hostileFor = flag.Duration("hostile", 5*time.Second, "how long TestHostileStreams streams hostile input")

const hostileBootstrap = "hostile-test-bootstrap-key-0123456789abcdef"

// hostileServer is a live server with authentication on, over a data directory that outlives it.
type hostileServer struct {
	dir  string
	b    *broker.Broker
	s    *transport.Server
	addr string
}

func openHostile(t *testing.T, dir string) *hostileServer {
	t.Helper()
	bo := broker.DefaultOptions(dir)
	bo.BootstrapAPIKey = hostileBootstrap
	b, s, addr := startServer(t, bo, transport.Options{MaxFrameSize: 64 << 10, MaxReassembly: 256 << 10,
		HandshakeTimeout: time.Second})
	return &hostileServer{dir: dir, b: b, s: s, addr: addr}
}

func (h *hostileServer) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := h.b.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// wellBehaved is a client that follows the protocol: it checks every answer it gets.
type wellBehaved struct {
	t  *testing.T
	nc net.Conn
	fr *wire.FrameReader
	id uint32
}

func dialWell(t *testing.T, addr, key string) (*wellBehaved, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	w := &wellBehaved{t: t, nc: nc, fr: wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)}
	f, err := w.call(0, &fibp.Handshake{ProtocolVersion: 1, APIKey: wire.Some(key)})
	if err != nil {
		nc.Close()
		return nil, err
	}
	if _, ok := f.(*fibp.HandshakeOk); !ok {
		nc.Close()
		return nil, fmt.Errorf("handshake answered %#v", f)
	}
	return w, nil
}

// call sends a request and returns its answer (server Pings are answered on the way).
func (w *wellBehaved) call(id uint32, req fibp.Frame) (fibp.Frame, error) {
	_ = w.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := w.nc.Write(fibp.AppendFrame(nil, 0, id, req)); err != nil {
		return nil, err
	}
	for {
		body, err := w.fr.Next()
		if err != nil {
			return nil, err
		}
		h, rest, err := fibp.ParseHeader(body)
		if err != nil {
			return nil, err
		}
		f, err := fibp.Decode(h.Opcode, rest)
		if err != nil {
			return nil, err
		}
		switch {
		case h.Opcode == fibp.OpPing:
			_, _ = w.nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Pong{}))
		case h.RequestID == id:
			return f, nil
		case h.Opcode != fibp.OpDelivery:
			return nil, fmt.Errorf("answer to %d carries request ID %d (%v)", id, h.RequestID, h.Opcode)
		}
	}
}

func (w *wellBehaved) next() uint32 { w.id++; return w.id }

// maxStored bounds what the well-behaved client stores (the check after the restart reads it
// all back); past it, it only pings.
const maxStored = 16_000

// produce enqueues batches into queue until stop closes; it returns the IDs the server said it
// stored (Ok results), which must all be durable.
func (w *wellBehaved) produce(queue string, stop <-chan struct{}) ([]wire.UUID, error) {
	var acked []wire.UUID
	for n := 0; ; n++ {
		select {
		case <-stop:
			return acked, nil
		default:
		}
		if len(acked) >= maxStored {
			if f, err := w.call(w.next(), &fibp.Ping{}); err != nil || f.Opcode() != fibp.OpPong {
				return acked, fmt.Errorf("ping: %v %v", f, err)
			}
			continue
		}
		req := &fibp.Enqueue{}
		for i := range 8 {
			req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: queue, Payload: fmt.Appendf(nil, "m-%d-%d", n, i)})
		}
		f, err := w.call(w.next(), req)
		if err != nil {
			return acked, fmt.Errorf("enqueue %d: %w", n, err)
		}
		res, ok := f.(*fibp.EnqueueResult)
		if !ok || len(res.Results) != len(req.Messages) {
			return acked, fmt.Errorf("enqueue %d answered %#v", n, f)
		}
		for _, r := range res.Results {
			if r.ErrorCode != fibp.CodeOk {
				return acked, fmt.Errorf("enqueue %d: item answered %v", n, r.ErrorCode)
			}
			acked = append(acked, r.MessageID)
		}
		if n%16 == 0 {
			if f, err := w.call(w.next(), &fibp.Ping{}); err != nil || f.Opcode() != fibp.OpPong {
				return acked, fmt.Errorf("ping: %v %v", f, err)
			}
		}
	}
}

// seedFrames are valid requests that mutations start from.
func seedFrames() []fibp.Frame {
	return []fibp.Frame{
		&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "fz", Payload: []byte("x")}, {Queue: "good", Payload: []byte("y")}}},
		&fibp.Consume{Queue: "fz", Credit: 3}, &fibp.Consume{Queue: "good", Credit: 3},
		&fibp.Ack{Items: []fibp.AckItem{{Queue: "fz"}, {Queue: "good"}}},
		&fibp.Nack{Items: []fibp.NackItem{{Queue: "fz", Error: "e"}}},
		&fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "fz", ExtendByMs: 10}}},
		&fibp.Credit{AdditionalCredit: 5}, &fibp.CancelConsume{},
		&fibp.GetStats{Queue: "good"}, &fibp.ListQueues{}, &fibp.DeleteQueue{Queue: "good"},
		&fibp.CreateQueue{Name: "fz2"}, &fibp.Redrive{DLQQueue: "good.dlq"},
		&fibp.CreateAPIKey{Name: "mine", IsSuperadmin: true}, &fibp.SetACL{KeyID: "key_x"},
		&fibp.SetConfig{Key: "scheduler.quantum", Value: "1"}, &fibp.Handshake{ProtocolVersion: 1},
		&fibp.Ping{}, &fibp.Disconnect{},
	}
}

// mutate returns a hostile variant of a valid frame: bytes flipped, cut, extended, or with a
// lying length, another opcode, reserved flags or the continuation flag.
func mutate(r *rand.Rand, frame []byte) []byte {
	out := append([]byte(nil), frame...)
	switch r.IntN(7) {
	case 0:
		for range 1 + r.IntN(4) {
			out[r.IntN(len(out))] ^= byte(1 + r.IntN(255))
		}
	case 1:
		out = out[:r.IntN(len(out))]
	case 2:
		extra := make([]byte, r.IntN(64))
		for i := range extra {
			extra[i] = byte(r.Uint32())
		}
		out = append(out, extra...)
	case 3:
		binary.BigEndian.PutUint32(out, uint32(r.IntN(1<<20)))
	case 4:
		out[fibp.LengthSize] = byte(r.Uint32())
	case 5:
		out[fibp.LengthSize+1] = byte(r.Uint32())
	case 6:
		out[fibp.LengthSize+1] |= byte(fibp.FlagContinuation)
	}
	return out
}

// hostile opens connections that misbehave in one of several ways until stop closes; it counts
// them in conns.
func hostile(addr, key string, seed uint64, stop <-chan struct{}, conns *atomic.Int64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seeds := seedFrames()
	for {
		select {
		case <-stop:
			return
		default:
		}
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue // the per-client limit or a closing server; try again
		}
		conns.Add(1)
		var buf []byte
		mode := r.IntN(4)
		if mode != 0 {
			hs := &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.Capabilities(r.Uint32())}
			switch mode {
			case 1, 2:
				hs.APIKey = wire.Some(key)
			case 3:
				hs.APIKey = wire.Some(fmt.Sprintf("fila_%x", r.Uint64()))
			}
			buf = fibp.AppendFrame(buf, 0, 0, hs)
		}
		for range 1 + r.IntN(32) {
			switch {
			case mode == 2 && r.IntN(4) == 0:
				junk := make([]byte, r.IntN(256))
				for i := range junk {
					junk[i] = byte(r.Uint32())
				}
				buf = append(buf, junk...)
			default:
				f := seeds[r.IntN(len(seeds))]
				buf = append(buf, mutate(r, fibp.AppendFrame(nil, 0, r.Uint32(), f))...)
			}
		}
		_ = nc.SetDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = nc.Write(buf)
		_, _ = io.Copy(io.Discard, nc)
		nc.Close()
	}
}

// TestHostileStreams streams random and mutated frames at a live server with authentication on,
// from connections with no key, a wrong key and a key allowed only on queues fz*, while a
// well-behaved client enqueues to queue good. The well-behaved client must get an Ok for every
// message; after a restart every message it was told is stored must be there, and nothing else
// (no hostile frame reached queue good).
func TestHostileStreams(t *testing.T) {
	dir := t.TempDir()
	h := openHostile(t, dir)
	for _, q := range []string{"good", "fz"} {
		if e := h.b.CreateQueue(broker.QueueSpec{Name: q}); e != nil {
			t.Fatal(e)
		}
	}
	k, e := h.b.CreateAPIKey("fuzzer", 0, false)
	if e != nil {
		t.Fatal(e)
	}
	fz := []auth.Permission{{Kind: auth.Produce, Pattern: "fz*"}, {Kind: auth.Consume, Pattern: "fz*"}, {Kind: auth.Admin, Pattern: "fz*"}}
	if e := h.b.SetACL(k.ID, fz); e != nil {
		t.Fatal(e)
	}
	producer, e2 := h.b.CreateAPIKey("producer", 0, false)
	if e2 != nil {
		t.Fatal(e2)
	}
	if e := h.b.SetACL(producer.ID, []auth.Permission{{Kind: auth.Produce, Pattern: "good"}}); e != nil {
		t.Fatal(e)
	}
	w, err := dialWell(t, h.addr, producer.Secret)
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	seed := uint64(time.Now().UnixNano())
	t.Logf("hostile seed %d, for %v", seed, *hostileFor)
	var conns atomic.Int64
	for i := range 4 {
		wg.Go(func() { hostile(h.addr, k.Secret, seed+uint64(i), stop, &conns) })
	}
	var acked []wire.UUID
	var produceErr error
	done := make(chan struct{})
	go func() { defer close(done); acked, produceErr = w.produce("good", stop) }()
	time.Sleep(*hostileFor) // the test's length, not an assertion
	close(stop)
	<-done
	wg.Wait()
	w.nc.Close()
	if produceErr != nil {
		t.Fatalf("the well-behaved client failed after %d messages: %v", len(acked), produceErr)
	}
	if len(acked) == 0 {
		t.Fatal("the well-behaved client stored nothing")
	}
	h.close(t)

	h = openHostile(t, dir)
	defer h.close(t)
	s, e3 := h.b.GetStats("good")
	if e3 != nil {
		t.Fatal(e3)
	}
	if s.Depth != uint64(len(acked)) {
		t.Fatalf("queue good holds %d messages after the restart; the client was told %d were stored", s.Depth, len(acked))
	}
	checkAll(t, h.addr, acked)
	t.Logf("%d hostile connections; %d messages stored and found after the restart", conns.Load(), len(acked))
}

// checkAll consumes queue good as the superadmin and checks that it holds exactly ids.
func checkAll(t *testing.T, addr string, ids []wire.UUID) {
	t.Helper()
	c, err := dialWell(t, addr, hostileBootstrap)
	if err != nil {
		t.Fatal(err)
	}
	defer c.nc.Close()
	want := make(map[wire.UUID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	_ = c.nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.nc.Write(fibp.AppendFrame(nil, 0, 1, &fibp.Consume{Queue: "good", Credit: uint32(len(ids))})); err != nil {
		t.Fatal(err)
	}
	for seen := 0; seen < len(ids); {
		body, err := c.fr.Next()
		if err != nil {
			t.Fatalf("after %d of %d deliveries: %v", seen, len(ids), err)
		}
		hd, rest, _ := fibp.ParseHeader(body)
		if hd.Opcode != fibp.OpDelivery {
			continue
		}
		var d fibp.Delivery
		if err := d.Decode(rest); err != nil {
			t.Fatal(err)
		}
		for _, m := range d.Messages {
			if !want[m.MessageID] {
				t.Fatalf("delivered %x, which the client was never told was stored (or twice)", m.MessageID)
			}
			delete(want, m.MessageID)
			seen++
		}
	}
}
