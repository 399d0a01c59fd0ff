package fuzz

import (
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/transport"
)

// safetyNet bounds each wait for an answer the server owes (a handshake, a Pong, an AUTH's OK,
// every answer of FuzzFrameSequence): a server that answers ends the wait at once, so the bound
// is reached only by a hang, never by a machine so loaded that the answer comes late.
const safetyNet = time.Minute

var (
	once       sync.Once
	addr       string
	liveBroker *broker.Broker // the broker behind addr
)

// liveServer starts one broker for the whole fuzzing process, with a queue the inputs can reach.
func liveServer(f *testing.F) string {
	once.Do(func() {
		dir, err := os.MkdirTemp(scratch, "broker-")
		if err != nil {
			f.Fatal(err)
		}
		bo := broker.DefaultOptions(dir)
		bo.Sync = false
		liveBroker, _, addr = startServer(f, bo, transport.Options{MaxFrameSize: 64 << 10})
		liveBroker.CreateQueue(broker.QueueSpec{Name: "q"})
	})
	return addr
}

// startServer opens a broker with bo and serves it on a loopback port with to, both logging
// nowhere; the caller closes them.
func startServer(tb testing.TB, bo broker.Options, to transport.Options) (*broker.Broker, *transport.Server, string) {
	tb.Helper()
	bo.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	to.Logger = bo.Logger
	b, err := broker.Open(bo)
	if err != nil {
		tb.Fatal(err)
	}
	s := transport.New(b, to)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Close()
		tb.Fatal(err)
	}
	go s.Serve(ln)
	return b, s, ln.Addr().String()
}

func handshaken(t testing.TB, addr string) (net.Conn, *wire.FrameReader) {
	nc, err := net.DialTimeout("tcp", addr, safetyNet)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl}))
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	nc.SetReadDeadline(time.Now().Add(safetyNet))
	if _, err := fr.Next(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return nc, fr
}

// alive checks that a fresh connection still gets a Pong: the input did not hurt the server.
func alive(t *testing.T, addr string) {
	nc, fr := handshaken(t, addr)
	defer nc.Close()
	nc.Write(fibp.AppendFrame(nil, 0, 77, &fibp.Ping{}))
	nc.SetReadDeadline(time.Now().Add(safetyNet))
	for {
		body, err := fr.Next()
		if err != nil {
			t.Fatalf("the server stopped answering after the input: %v", err)
		}
		if h, _, _ := fibp.ParseHeader(body); h.Opcode == fibp.OpPong && h.RequestID == 77 {
			return
		}
	}
}

func seeds(f *testing.F) {
	frames := []fibp.Frame{
		&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("x"), DelayMs: wire.Some[uint64](5)}}},
		&fibp.Consume{Queue: "q", Credit: 2},
		&fibp.Ack{Items: []fibp.AckItem{{Queue: "q"}}},
		&fibp.Nack{Items: []fibp.NackItem{{Queue: "q", Error: "e"}}},
		&fibp.ExtendLease{Items: []fibp.ExtendLeaseItem{{Queue: "q", ExtendByMs: 10}}},
		&fibp.GetStats{Queue: "q"},
		&fibp.CreateQueue{Name: "fz"},
		&fibp.Redrive{DLQQueue: "q.dlq"},
		&fibp.SetConfig{Key: "scheduler.quantum", Value: "2"},
	}
	var all []byte
	for i, fr := range frames {
		one := fibp.AppendFrame(nil, 0, uint32(i+1), fr)
		f.Add(one)
		all = append(all, one...)
	}
	f.Add(all)
	f.Add(fibp.AppendContinued(nil, fibp.OpEnqueue, 9, frames[0].AppendTo(nil), 16))
	f.Add([]byte{0, 0, 0, 2, 1, 2})
}

// FuzzFrameStream sends arbitrary bytes after a valid handshake, then reads whatever the server
// answers for a moment. The server must not crash or stop serving other connections, and every
// answer must be a frame of the spec with the spec's error codes (answers_test.go).
func FuzzFrameStream(f *testing.F) {
	a := liveServer(f)
	seeds(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		nc, fr := handshaken(t, a)
		go nc.Write(input) // the server may stop reading while its answers wait to be read
		err := readFIBPAnswers(nc, fr, 50*time.Millisecond)
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
		alive(t, a)
	})
}

// FuzzDecodedFrames sends arbitrary bodies under every request opcode, so that inputs reach each
// handler's decoder and, when they decode, the broker.
func FuzzDecodedFrames(f *testing.F) {
	a := liveServer(f)
	f.Add(byte(fibp.OpEnqueue), (&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("p")}}}).AppendTo(nil))
	f.Add(byte(fibp.OpConsume), (&fibp.Consume{Queue: "q", Credit: 1}).AppendTo(nil))
	f.Add(byte(fibp.OpUpdateQueue), (&fibp.UpdateQueue{Queue: "q"}).AppendTo(nil))
	f.Fuzz(func(t *testing.T, op byte, body []byte) {
		if fibp.Opcode(op) == fibp.OpDeleteQueue || fibp.Opcode(op) == fibp.OpDisconnect {
			return // keep the shared queue, and the connection, for the next input
		}
		nc, fr := handshaken(t, a)
		frame := wire.AppendU32(nil, uint32(fibp.HeaderSize+len(body)))
		frame = fibp.Header{Opcode: fibp.Opcode(op), RequestID: 5}.AppendTo(frame)
		go nc.Write(append(frame, body...))
		err := readFIBPAnswers(nc, fr, 30*time.Millisecond)
		nc.Close()
		if err != nil {
			t.Fatal(err)
		}
		alive(t, a)
	})
}
