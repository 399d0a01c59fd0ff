package transport

import (
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
)

// The cost of authentication: connection setup (dial, Handshake, one Enqueue, close) and the hot
// path (pipelined Enqueue batches on one connection) with authentication off, and on with a key
// whose ACL has ten patterns, the matching one last. fsync is off so that the figures are the
// CPU cost the checks add, not the disk's.
//
//	go test ./server/transport -run '^$' -bench 'Auth' -benchtime 3s -count 3

// benchServer starts a server; with auth it returns a producer key allowed on queue "bench".
func benchServer(b *testing.B, withAuth bool) (addr, key string) {
	b.Helper()
	bo := broker.DefaultOptions(b.TempDir())
	bo.Sync = false
	if withAuth {
		bo.BootstrapAPIKey = bootKey
	}
	br, err := broker.Open(bo)
	if err != nil {
		b.Fatal(err)
	}
	if e := br.CreateQueue(broker.QueueSpec{Name: "bench"}); e != nil {
		b.Fatal(e)
	}
	if withAuth {
		k, e := br.CreateAPIKey("bench", 0, false)
		if e != nil {
			b.Fatal(e)
		}
		var acl []auth.Permission
		for i := range 9 {
			acl = append(acl, auth.Permission{Kind: auth.Produce, Pattern: fmt.Sprintf("tenant-%d.*", i)})
		}
		acl = append(acl, auth.Permission{Kind: auth.Produce, Pattern: "ben*"})
		if e := br.SetACL(k.ID, acl); e != nil {
			b.Fatal(e)
		}
		key = k.Secret
	}
	_, addr, stop := listen(b, br, Options{})
	b.Cleanup(func() {
		stop()
		br.Close()
	})
	return addr, key
}

func benchHandshake(key string) []byte {
	hs := &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl}
	if key != "" {
		hs.APIKey = wire.Some(key)
	}
	return fibp.AppendFrame(nil, 0, 0, hs)
}

// expect reads one frame and checks its opcode.
func expect(b *testing.B, fr *wire.FrameReader, op fibp.Opcode) {
	body, err := fr.Next()
	if err != nil {
		b.Fatal(err)
	}
	if h, _, _ := fibp.ParseHeader(body); h.Opcode != op {
		b.Fatalf("got %v, want %v", h.Opcode, op)
	}
}

func BenchmarkAuthConnect(b *testing.B) {
	for _, withAuth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v", withAuth), func(b *testing.B) {
			addr, key := benchServer(b, withAuth)
			hello := benchHandshake(key)
			enq := fibp.AppendFrame(nil, 0, 1, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "bench", Payload: make([]byte, 100)}}})
			for b.Loop() {
				nc, err := net.Dial("tcp", addr)
				if err != nil {
					b.Fatal(err)
				}
				fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
				_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
				nc.Write(hello)
				expect(b, fr, fibp.OpHandshakeOk)
				nc.Write(enq)
				expect(b, fr, fibp.OpEnqueueResult)
				nc.Close()
			}
		})
	}
}

func BenchmarkAuthEnqueue(b *testing.B) {
	const batch, window = 100, 16
	for _, withAuth := range []bool{false, true} {
		b.Run(fmt.Sprintf("auth=%v", withAuth), func(b *testing.B) {
			addr, key := benchServer(b, withAuth)
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
			nc.Write(benchHandshake(key))
			expect(b, fr, fibp.OpHandshakeOk)
			req := &fibp.Enqueue{}
			for range batch {
				req.Messages = append(req.Messages, fibp.EnqueueMessage{Queue: "bench", Payload: make([]byte, 100)})
			}
			frame := fibp.AppendFrame(nil, 0, 1, req)
			sent, answered := 0, 0
			cpu0 := cpuTime()
			b.ResetTimer()
			for answered < b.N {
				for sent < b.N && sent-answered < window {
					nc.Write(frame)
					sent++
				}
				expect(b, fr, fibp.OpEnqueueResult)
				answered++
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
			// CPU time of the whole process (client and server) per message: less sensitive than
			// throughput to other load on the machine.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*batch), "cpu-ns/msg")
		})
	}
}

// cpuTime is the process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAuthScreen is the whole per-request price of authentication on the hot path, alone:
// the key check of authorized and the ACL screen of a 100-message Enqueue against ten patterns.
func BenchmarkAuthScreen(b *testing.B) {
	st := auth.NewStore()
	id, secret := auth.NewSecret()
	st.Put(auth.Record{ID: id, Hash: auth.HashOf(secret)})
	var acl []auth.Permission
	for i := range 9 {
		acl = append(acl, auth.Permission{Kind: auth.Produce, Pattern: fmt.Sprintf("tenant-%d.*", i)})
	}
	st.SetACL(id, append(acl, auth.Permission{Kind: auth.Produce, Pattern: "ben*"}))
	p, _ := st.Lookup(id)
	c := &conn{auth: st, who: p, whoGen: st.Gen(), s: &Server{opts: Options{Clock: time.Now}}}
	msgs := make([]broker.Message, 100)
	for i := range msgs {
		msgs[i].Queue = "bench"
	}
	for b.Loop() {
		if !c.authorized(fibp.Header{Opcode: fibp.OpEnqueue}) {
			b.Fatal("refused")
		}
		kept, denied := screen(c.who, auth.Produce, msgs, func(m *broker.Message) string { return m.Queue })
		if denied != nil || len(kept) != len(msgs) {
			b.Fatal("denied")
		}
	}
}
