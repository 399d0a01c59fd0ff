package transport

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

func expectError(t *testing.T, f fibp.Frame, code fibp.ErrorCode) *fibp.Error {
	t.Helper()
	e, ok := f.(*fibp.Error)
	if !ok || e.ErrorCode != code {
		t.Fatalf("got %#v, want an Error frame with %v", f, code)
	}
	if e.Message == "" {
		t.Fatalf("%v without a message", code)
	}
	return e
}

func TestAdminErrorCodes(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})

	for _, tc := range []struct {
		name string
		req  fibp.Frame
		want fibp.ErrorCode
	}{
		{"duplicate queue", &fibp.CreateQueue{Name: "orders"}, fibp.CodeQueueAlreadyExists},
		{"reserved name", &fibp.CreateQueue{Name: "x.dlq"}, fibp.CodeReservedQueueName},
		{"empty name", &fibp.CreateQueue{Name: ""}, fibp.CodeInvalidConfigValue},
		{"bad backoff", &fibp.CreateQueue{Name: "b", Backoff: 9}, fibp.CodeInvalidConfigValue},
		{"bad ordering", &fibp.CreateQueue{Name: "b", Ordering: 3}, fibp.CodeInvalidConfigValue},
		{"bad when_ordering_key_missing", &fibp.CreateQueue{Name: "b", WhenOrderingKeyMissing: 2}, fibp.CodeInvalidConfigValue},
		{"bad script_failure", &fibp.CreateQueue{Name: "b", ScriptFailure: 2}, fibp.CodeInvalidConfigValue},
		{"bad delivery_durability", &fibp.CreateQueue{Name: "b", DeliveryDurability: 2}, fibp.CodeInvalidConfigValue},
		{"update to a bad delivery_durability", &fibp.UpdateQueue{Queue: "orders", DeliveryDurability: wire.Some(fibp.DeliveryDurability(2))}, fibp.CodeInvalidConfigValue},
		{"script", &fibp.CreateQueue{Name: "s", OnEnqueueScript: wire.Some("function on_enqueue(m)")}, fibp.CodeLuaCompilationError},
		{"stats of a missing queue", &fibp.GetStats{Queue: "nope"}, fibp.CodeQueueNotFound},
		{"delete a missing queue", &fibp.DeleteQueue{Queue: "nope"}, fibp.CodeQueueNotFound},
		{"update a missing queue", &fibp.UpdateQueue{Queue: "nope"}, fibp.CodeQueueNotFound},
		{"redrive a queue that is not a DLQ", &fibp.Redrive{DLQQueue: "orders"}, fibp.CodeNotADLQ},
		{"unset config key", &fibp.GetConfig{Key: "app.missing"}, fibp.CodeInvalidConfigValue},
		{"bad config value", &fibp.SetConfig{Key: "scheduler.quantum", Value: "zero"}, fibp.CodeInvalidConfigValue},
		{"unknown key under defaults.", &fibp.SetConfig{Key: "defaults.visiblity_timeout_ms", Value: "1"}, fibp.CodeInvalidConfigValue},
		{"unknown key under scheduler.", &fibp.SetConfig{Key: "scheduler.quantom", Value: "1"}, fibp.CodeInvalidConfigValue},
		{"unknown key under lua.", &fibp.SetConfig{Key: "lua.timeout", Value: "1"}, fibp.CodeInvalidConfigValue},
		{"throttle stats", &fibp.GetThrottleStats{Name: "api"}, fibp.CodeThrottleNotFound},
		{"drain an unknown node", &fibp.DrainNode{NodeID: 42, Drain: true}, fibp.CodeNodeNotFound},
		{"glob character in a name", &fibp.CreateQueue{Name: "a*b"}, fibp.CodeInvalidConfigValue},
		{"bidi override in a name", &fibp.CreateQueue{Name: "invoice\u202egnp.exe"}, fibp.CodeInvalidConfigValue},
		{"control character in a name", &fibp.CreateQueue{Name: "a\u0085b"}, fibp.CodeInvalidConfigValue},
		{"revoke an unknown key", &fibp.RevokeAPIKey{KeyID: "nope"}, fibp.CodeAPIKeyNotFound},
		{"ACL of an unknown key", &fibp.GetACL{KeyID: "nope"}, fibp.CodeAPIKeyNotFound},
		{"unknown ACL kind", &fibp.SetACL{KeyID: "nope", Permissions: []fibp.ACLPermission{{Kind: "read", Pattern: "*"}}}, fibp.CodeInvalidConfigValue},
		{"key expiring in the past", &fibp.CreateAPIKey{Name: "old", ExpiresAtMs: 1}, fibp.CodeInvalidConfigValue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.Call(20, tc.req)
			if got := res.AppendTo(nil)[0]; fibp.ErrorCode(got) != tc.want {
				t.Fatalf("%v answered %v, want %v", tc.req.Opcode(), fibp.ErrorCode(got), tc.want)
			}
		})
	}
	expectError(t, c.Call(21, &fibp.Consume{Queue: "nope"}), fibp.CodeQueueNotFound)
}

func TestConfigAndQueueAdmin(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	if r := c.Call(1, &fibp.SetConfig{Key: "scheduler.quantum", Value: "4"}).(*fibp.SetConfigResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	if r := c.Call(2, &fibp.SetConfig{Key: "app.greeting", Value: "hi"}).(*fibp.SetConfigResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	if r := c.Call(3, &fibp.GetConfig{Key: "app.greeting"}).(*fibp.GetConfigResult); r.Value != "hi" {
		t.Fatalf("GetConfig %+v", r)
	}
	list := c.Call(4, &fibp.ListConfig{Prefix: "defaults."}).(*fibp.ListConfigResult)
	found := map[string]string{}
	for _, e := range list.Entries {
		found[e.Key] = e.Value
	}
	if found["defaults.visibility_timeout_ms"] != "30000" || found["defaults.max_attempts"] != "10" || len(found) < 5 {
		t.Fatalf("ListConfig defaults.: %v", found)
	}
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	if s := stats(t, c, "q"); s.Quantum != 4 {
		t.Fatalf("quantum after SetConfig: %d", s.Quantum)
	}
	if r := c.Call(5, &fibp.UpdateQueue{Queue: "q", MaxAttempts: wire.Some[uint32](3), VisibilityTimeoutMs: wire.Some[uint64](1000)}).(*fibp.UpdateQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	lq := c.Call(6, &fibp.ListQueues{}).(*fibp.ListQueuesResult)
	if len(lq.Queues) != 2 || lq.Queues[0].Name != "q" || lq.Queues[1].Name != "q.dlq" {
		t.Fatalf("ListQueues %+v", lq.Queues)
	}
	if r := c.Call(7, &fibp.DeleteQueue{Queue: "q"}).(*fibp.DeleteQueueResult); r.ErrorCode != fibp.CodeOk {
		t.Fatal(r.ErrorCode)
	}
	if lq := c.Call(8, &fibp.ListQueues{}).(*fibp.ListQueuesResult); len(lq.Queues) != 0 {
		t.Fatalf("after DeleteQueue: %+v", lq.Queues)
	}
	cs := c.Call(9, &fibp.GetClusterStatus{}).(*fibp.GetClusterStatusResult)
	if cs.ErrorCode != fibp.CodeOk || len(cs.Nodes) != 1 || cs.Nodes[0].State != fibp.NodeStateUp {
		t.Fatalf("GetClusterStatus %+v", cs)
	}
}

// expectClosed reads until the server closes the connection.
func expectClosed(t *testing.T, c *rawClient) {
	t.Helper()
	_ = c.NC.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c.NC); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server kept the connection open")
		}
	}
}

func TestBadInput(t *testing.T) {
	_, addr := startServer(t, Options{MaxFrameSize: 4096})
	healthy := dialRaw(t, addr)
	healthy.Handshake()

	t.Run("frame before the handshake", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Send(1, &fibp.ListQueues{})
		_, f := c.Next()
		expectError(t, f, fibp.CodeInvalidFrame)
		expectClosed(t, c)
	})
	t.Run("unsupported version", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Send(0, &fibp.Handshake{ProtocolVersion: 0})
		_, f := c.Next()
		if e := expectError(t, f, fibp.CodeUnsupportedVersion); e.Metadata[fibp.MetaMaxVersion] != "1" {
			t.Fatalf("max_version metadata: %v", e.Metadata)
		}
		expectClosed(t, c)
	})
	t.Run("a newer client version negotiates down", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Send(0, &fibp.Handshake{ProtocolVersion: 7})
		if _, f := c.Next(); f.(*fibp.HandshakeOk).NegotiatedVersion != 1 {
			t.Fatalf("negotiated %+v", f)
		}
	})
	t.Run("unknown opcode keeps the connection", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		c.SendBytes([]byte{0, 0, 0, 6, 0x77, 0, 0, 0, 0, 5})
		h, f := c.Next()
		expectError(t, f, fibp.CodeInvalidFrame)
		if h.RequestID != 5 {
			t.Fatalf("error for request %d", h.RequestID)
		}
		if _, ok := c.Call(6, &fibp.ListQueues{}).(*fibp.ListQueuesResult); !ok {
			t.Fatal("connection unusable after an unknown opcode")
		}
		// A server-to-client opcode sent by the client is just as unknown as a request.
		expectError(t, c.Call(7, &fibp.ConsumeOk{}), fibp.CodeInvalidFrame)
	})
	t.Run("oversized frame answers InvalidFrame and reading goes on", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		big := fibp.AppendFrame(nil, 0, 9, &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: make([]byte, 10_000)}}})
		c.SendBytes(big)
		h, f := c.Next()
		expectError(t, f, fibp.CodeInvalidFrame)
		if h.RequestID != 9 {
			t.Fatalf("error for request %d", h.RequestID)
		}
		if _, ok := c.Call(10, &fibp.ListQueues{}).(*fibp.ListQueuesResult); !ok {
			t.Fatal("connection unusable after an oversized frame")
		}
	})
	t.Run("malformed body", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		// An Enqueue claiming 4 billion messages in 4 bytes.
		c.SendBytes([]byte{0, 0, 0, 10, byte(fibp.OpEnqueue), 0, 0, 0, 0, 3, 0xff, 0xff, 0xff, 0xff})
		h, f := c.Next()
		expectError(t, f, fibp.CodeInvalidFrame)
		if h.RequestID != 3 {
			t.Fatalf("error for request %d", h.RequestID)
		}
	})
	t.Run("reserved flag bits", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		c.SendBytes([]byte{0, 0, 0, 6, byte(fibp.OpListQueues), 0x80, 0, 0, 0, 4})
		_, f := c.Next()
		expectError(t, f, fibp.CodeInvalidFrame)
	})
	t.Run("garbage closes only that connection", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.SendBytes(bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 64))
		expectClosed(t, c)
		if _, ok := healthy.Call(11, &fibp.ListQueues{}).(*fibp.ListQueuesResult); !ok {
			t.Fatal("another connection was affected")
		}
	})
	t.Run("truncated frame then hang-up", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		c.SendBytes([]byte{0, 0, 0, 100, byte(fibp.OpListQueues), 0})
		c.NC.(*net.TCPConn).CloseWrite()
		expectClosed(t, c)
	})
	t.Run("continuation frames reassemble", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		newQueue(t, c, &fibp.CreateQueue{Name: "big"})
		body := (&fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "big", Payload: bytes.Repeat([]byte{7}, 20_000)}}}).AppendTo(nil)
		c.SendBytes(fibp.AppendContinued(nil, fibp.OpEnqueue, 12, body, 4096))
		h, f := c.Next()
		if r, ok := f.(*fibp.EnqueueResult); !ok || h.RequestID != 12 || r.Results[0].ErrorCode != fibp.CodeOk {
			t.Fatalf("continued Enqueue answered %#v", f)
		}
		c.Subscribe(13, "big", 1)
		// 20 KB exceeds nothing the server sends by default (16 MiB), so it arrives in one frame.
		if d := c.Deliveries(1)[0]; len(d.Payload) != 20_000 {
			t.Fatalf("payload of %d bytes", len(d.Payload))
		}
	})
	t.Run("client ping", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.Handshake()
		if _, ok := c.Call(14, &fibp.Ping{}).(*fibp.Pong); !ok {
			t.Fatal("no Pong")
		}
	})
}

func TestServerPingsAndClosesSilentPeers(t *testing.T) {
	_, addr := startServer(t, Options{PingInterval: 50 * time.Millisecond, PongTimeout: 200 * time.Millisecond})
	c := dialRaw(t, addr)
	c.Handshake()
	_ = c.NC.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := c.FR.Next()
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ := fibp.ParseHeader(body)
	if h.Opcode != fibp.OpPing || h.RequestID&0x80000000 == 0 {
		t.Fatalf("expected a server Ping with bit 31 set, got %v %#x", h.Opcode, h.RequestID)
	}
	expectClosed(t, c) // never answered
}

func TestChannelFull(t *testing.T) {
	bo := broker.DefaultOptions(t.TempDir())
	bo.InboxSize = 1
	bo.Sync = true
	b, err := broker.Open(bo)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, addr, stop := listen(t, b, Options{})
	defer stop()
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "q"})
	// Pipeline many enqueues without waiting: with an inbox of one, some must be refused.
	var batch []byte
	for i := range 200 {
		batch = fibp.AppendFrame(batch, 0, uint32(1000+i), &fibp.Enqueue{Messages: []fibp.EnqueueMessage{{Queue: "q", Payload: []byte("x")}}})
	}
	c.SendBytes(batch)
	full := 0
	for range 200 {
		if _, f := c.Next(); f.Opcode() == fibp.OpError {
			e := expectError(t, f, fibp.CodeChannelFull)
			if e.Metadata[fibp.MetaRetryAfterMs] == "" {
				t.Fatal("ChannelFull without retry_after_ms")
			}
			full++
		}
	}
	if full == 0 {
		t.Skip("the queue kept up with 200 pipelined enqueues; no ChannelFull to observe")
	}
}
