package fila

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), fibptest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// dialPeer connects to p and returns the client with the peer's side of the connection.
func dialPeer(t *testing.T, p *fibptest.Peer, opts *Options) (*Client, *fibptest.Conn) {
	t.Helper()
	c, err := Dial(testCtx(t), p.Addr(), opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p.Accept(t)
}

// async runs f on a goroutine and returns a channel with its error.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(fibptest.Timeout):
		t.Fatal("timed out waiting for the call to return")
		return nil
	}
}

func TestHandshake(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{MaxFrameSize: 1 << 20, NodeID: 7})
	c, sc := dialPeer(t, p, &Options{APIKey: "secret"})
	if sc.HelloHeader.RequestID != 0 || sc.HelloHeader.Flags != 0 {
		t.Errorf("handshake header = %+v, want request ID 0, no flags", sc.HelloHeader)
	}
	h := sc.Hello
	if h.ProtocolVersion != 1 {
		t.Errorf("protocol_version = %d, want 1", h.ProtocolVersion)
	}
	if key, ok := h.APIKey.Get(); !ok || key != "secret" {
		t.Errorf("api_key = %v, want secret", h.APIKey)
	}
	if h.ClientCapabilities != fibp.CapCreditFlowControl {
		t.Errorf("client_capabilities = %v, want CreditFlowControl", h.ClientCapabilities)
	}
	if c.NodeID() != 7 || c.MaxFrameSize() != 1<<20 || !c.Capabilities().Has(fibp.CapCreditFlowControl) {
		t.Errorf("node %d, max frame %d, caps %v", c.NodeID(), c.MaxFrameSize(), c.Capabilities())
	}
}

func TestHandshakeDefaultsWithoutAPIKey(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{NoCreditFlowControl: true})
	c, sc := dialPeer(t, p, nil)
	if sc.Hello.APIKey.Present {
		t.Error("api_key present without Options.APIKey")
	}
	if c.MaxFrameSize() != fibp.MaxFrameSize {
		t.Errorf("max frame = %d, want the 16 MiB default for 0", c.MaxFrameSize())
	}
	if c.Capabilities() != 0 {
		t.Errorf("active caps = %v, want none (server lacks them)", c.Capabilities())
	}
}

func TestHandshakeUnsupportedVersion(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{Handshake: func(*fibp.Handshake) fibp.Frame {
		return &fibp.Error{
			ErrorCode: fibp.CodeUnsupportedVersion,
			Message:   "protocol version 1 not supported",
			Metadata:  map[string]string{"max_version": "0", "x-future": "kept"},
		}
	}})
	_, err := Dial(testCtx(t), p.Addr(), nil)
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Dial error = %v, want UnsupportedVersion", err)
	}
	var fe *Error
	if !errors.As(err, &fe) {
		t.Fatalf("error %T is not *fila.Error", err)
	}
	if fe.Metadata["max_version"] != "0" || fe.Metadata["x-future"] != "kept" {
		t.Errorf("metadata = %v, want max_version and the unknown key preserved", fe.Metadata)
	}
	want := "fila: protocol version 1 not supported (UnsupportedVersion)"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestHandshakeUnauthorized(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{Handshake: func(*fibp.Handshake) fibp.Frame {
		return &fibp.Error{ErrorCode: fibp.CodeUnauthorized}
	}})
	_, err := Dial(testCtx(t), p.Addr(), &Options{APIKey: "bad"})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Dial error = %v, want Unauthorized", err)
	}
	if !strings.Contains(err.Error(), "(Unauthorized)") {
		t.Errorf("Error() = %q does not name the code", err.Error())
	}
}

func TestMultiplexOutOfOrder(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	const n = 20
	results := make([]<-chan error, n)
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		results[i] = async(func() error {
			v, err := c.GetConfig(testCtx(t), key)
			if err != nil {
				return err
			}
			if v != "value-of-"+key {
				return fmt.Errorf("GetConfig(%s) = %q", key, v)
			}
			return nil
		})
	}
	var reqs []fibptest.Frame
	seen := map[uint32]bool{}
	for range n {
		f := sc.Expect(t, fibp.OpGetConfig)
		id := f.Header.RequestID
		if id == 0 || id&0x80000000 != 0 || seen[id] {
			t.Fatalf("bad or repeated request ID %#x", id)
		}
		seen[id] = true
		reqs = append(reqs, f)
	}
	for i := len(reqs) - 1; i >= 0; i-- { // answer in reverse order
		key := reqs[i].Frame.(*fibp.GetConfig).Key
		sc.Reply(reqs[i], &fibp.GetConfigResult{Value: "value-of-" + key})
	}
	for _, ch := range results {
		if err := wait(t, ch); err != nil {
			t.Error(err)
		}
	}
}

func TestServerPingGetsPong(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	_, sc := dialPeer(t, p, nil)
	sc.Send(0x80000005, &fibp.Ping{})
	f := sc.Expect(t, fibp.OpPong)
	if f.Header.RequestID != 0x80000005 {
		t.Errorf("Pong request ID = %#x, want the Ping's 0x80000005", f.Header.RequestID)
	}
}

func TestClientPing(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error {
		rtt, err := c.Ping(testCtx(t))
		if err == nil && rtt <= 0 {
			err = fmt.Errorf("rtt = %v", rtt)
		}
		return err
	})
	f := sc.Expect(t, fibp.OpPing)
	sc.Reply(f, &fibp.Pong{})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestUnknownOpcode(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)

	// Matching a pending request: that request fails with InvalidFrame.
	done := async(func() error { _, err := c.GetConfig(testCtx(t), "k"); return err })
	f := sc.Expect(t, fibp.OpGetConfig)
	sc.SendRaw(fibp.AppendContinued(nil, fibp.Opcode(0x30), f.Header.RequestID, []byte{1, 2, 3}, 0))
	if err := wait(t, done); !errors.Is(err, ErrInvalidFrame) {
		t.Fatalf("request answered by unknown opcode: err = %v, want InvalidFrame", err)
	}

	// Matching nothing: ignored, and the connection keeps working.
	sc.SendRaw(fibp.AppendContinued(nil, fibp.Opcode(0x31), 12345, []byte{9}, 0))
	sc.SendRaw(fibp.AppendContinued(nil, fibp.Opcode(0x32), 0x80000009, nil, 0))
	done = async(func() error { _, err := c.GetConfig(testCtx(t), "k2"); return err })
	f = sc.Expect(t, fibp.OpGetConfig)
	sc.Reply(f, &fibp.GetConfigResult{Value: "v"})
	if err := wait(t, done); err != nil {
		t.Fatalf("request after ignored frames: %v", err)
	}
}

func TestUnexpectedKnownOpcodeFailsRequest(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.ListQueues(testCtx(t)); return err })
	f := sc.Expect(t, fibp.OpListQueues)
	sc.Reply(f, &fibp.DeleteQueueResult{})
	if err := wait(t, done); !errors.Is(err, ErrInvalidFrame) {
		t.Fatalf("err = %v, want InvalidFrame", err)
	}
}

func TestContinuationIncoming(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	type res struct {
		list *QueueList
		err  error
	}
	listed := make(chan res, 1)
	go func() { l, err := c.ListQueues(testCtx(t)); listed <- res{l, err} }()
	other := async(func() error { _, err := c.GetConfig(testCtx(t), "x"); return err })
	reqs := map[fibp.Opcode]fibptest.Frame{}
	for range 2 {
		f := sc.Next(t)
		reqs[f.Header.Opcode] = f
	}
	big := &fibp.ListQueuesResult{}
	for i := range 100 {
		big.Queues = append(big.Queues, fibp.QueueInfo{Name: fmt.Sprintf("queue-%03d", i), Depth: uint64(i)})
	}
	raw := fibp.AppendContinued(nil, fibp.OpListQueuesResult, reqs[fibp.OpListQueues].Header.RequestID, big.AppendTo(nil), 100)
	// Interleave another request's answer between the continuation chunks: every chunk but the
	// last is 100 bytes plus its 4-byte length prefix.
	cut := (len(raw) / 104 / 2) * 104
	sc.SendRaw(raw[:cut])
	sc.Reply(reqs[fibp.OpGetConfig], &fibp.GetConfigResult{Value: "v"})
	sc.SendRaw(raw[cut:])
	if err := wait(t, other); err != nil {
		t.Fatal(err)
	}
	r := <-listed
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.list.Queues) != 100 || r.list.Queues[99].Name != "queue-099" || r.list.Queues[42].Depth != 42 {
		t.Errorf("reassembled list wrong: %d queues", len(r.list.Queues))
	}
}

func TestContinuationOutgoing(t *testing.T) {
	const maxFrame = 64
	p := fibptest.Start(t, fibptest.Options{MaxFrameSize: maxFrame})
	c, sc := dialPeer(t, p, nil)
	payload := []byte(strings.Repeat("0123456789", 100))
	done := async(func() error {
		res, err := c.Enqueue(testCtx(t), Message{Queue: "orders", Payload: payload})
		if err == nil {
			err = res[0].Err
		}
		return err
	})
	f := sc.Expect(t, fibp.OpEnqueue)
	if len(f.Chunks) < 2 {
		t.Fatalf("Enqueue of %d bytes went as %d frame(s) with max frame %d", len(payload), len(f.Chunks), maxFrame)
	}
	for i, ch := range f.Chunks {
		last := i == len(f.Chunks)-1
		if ch.Length > maxFrame || ch.Flags.Has(fibp.FlagContinuation) == last {
			t.Errorf("chunk %d: length %d flags %v", i, ch.Length, ch.Flags)
		}
	}
	msgs := f.Frame.(*fibp.Enqueue).Messages
	if len(msgs) != 1 || string(msgs[0].Payload) != string(payload) {
		t.Fatalf("reassembled payload differs")
	}
	sc.Reply(f, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{{MessageID: MessageID{1}}}})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestErrorFrameMetadata(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.GetStats(testCtx(t), "orders"); return err })
	f := sc.Expect(t, fibp.OpGetStats)
	sc.Reply(f, &fibp.Error{
		ErrorCode: fibp.CodeNotLeader,
		Message:   `not the leader for queue "orders"`,
		Metadata:  map[string]string{"leader_addr": "10.0.0.2:5555", "term": "9"},
	})
	err := wait(t, done)
	if !errors.Is(err, ErrNotLeader) || errors.Is(err, ErrQueueNotFound) {
		t.Fatalf("err = %v, want NotLeader only", err)
	}
	if addr, ok := LeaderAddr(err); !ok || addr != "10.0.0.2:5555" {
		t.Errorf("LeaderAddr = %q, %v", addr, ok)
	}
	var fe *Error
	errors.As(err, &fe)
	if fe.Metadata["term"] != "9" || len(fe.Metadata) != 2 {
		t.Errorf("metadata = %v, want both keys", fe.Metadata)
	}
	if code, ok := ErrorCode(err); !ok || code != fibp.CodeNotLeader {
		t.Errorf("ErrorCode = %v %v", code, ok)
	}
}

func TestServerDisconnectFailsPending(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.ListQueues(testCtx(t)); return err })
	sc.Expect(t, fibp.OpListQueues)
	sc.Send(0, &fibp.Disconnect{})
	if err := wait(t, done); !errors.Is(err, ErrServerDisconnected) {
		t.Fatalf("pending request err = %v, want ErrServerDisconnected", err)
	}
	if _, err := c.ListQueues(testCtx(t)); !errors.Is(err, ErrServerDisconnected) {
		t.Errorf("later request err = %v", err)
	}
	<-c.Done()
}

func TestCloseSendsDisconnect(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.ListQueues(context.Background()); return err })
	sc.Expect(t, fibp.OpListQueues)
	c.Close()
	sc.Expect(t, fibp.OpDisconnect)
	if err := wait(t, done); !errors.Is(err, ErrClosed) {
		t.Errorf("pending request err = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConnectionLost(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	done := async(func() error { _, err := c.ListQueues(context.Background()); return err })
	sc.Expect(t, fibp.OpListQueues)
	sc.Close()
	if err := wait(t, done); !errors.Is(err, ErrConnectionLost) {
		t.Errorf("err = %v, want ErrConnectionLost", err)
	}
}

func TestCancelledRequestIgnoresLateAnswer(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := async(func() error { _, err := c.GetConfig(ctx, "slow"); return err })
	f := sc.Expect(t, fibp.OpGetConfig)
	cancel()
	if err := wait(t, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	sc.Reply(f, &fibp.GetConfigResult{Value: "late"})
	done = async(func() error { _, err := c.GetConfig(testCtx(t), "next"); return err })
	f = sc.Expect(t, fibp.OpGetConfig)
	sc.Reply(f, &fibp.GetConfigResult{Value: "v"})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestRequestIDWrapsAndSkipsBusy(t *testing.T) {
	l := &link{pending: map[uint32]*call{1: {}}}
	c := &Client{subs: map[uint32]*Consumer{3: {}}}
	c.nextID = 0x7FFFFFFE
	var got []uint32
	for range 4 {
		got = append(got, c.allocID(l))
	}
	want := []uint32{0x7FFFFFFF, 2, 4, 5}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("IDs = %#x, want %#x", got, want)
	}
}

func TestEveryErrorCodeHasASentinel(t *testing.T) {
	sentinels := []*Error{
		ErrQueueNotFound, ErrMessageNotFound, ErrQueueAlreadyExists, ErrLuaCompilation, ErrStorage,
		ErrNotADLQ, ErrParentQueueNotFound, ErrInvalidConfigValue, ErrChannelFull, ErrUnauthorized,
		ErrForbidden, ErrNotLeader, ErrUnsupportedVersion, ErrInvalidFrame, ErrAPIKeyNotFound,
		ErrNodeNotReady, ErrCreditExhausted, ErrThrottleConflict, ErrScriptError, ErrScriptTimeout,
		ErrOrderingKeyMissing, ErrReservedQueueName, ErrInvalidThrottle, ErrThrottleNotFound,
		ErrAuthStateStale, ErrImmutableSetting, ErrNodeNotFound, ErrInternal,
	}
	have := map[fibp.ErrorCode]bool{}
	for _, s := range sentinels {
		have[s.Code] = true
	}
	for code := range 256 {
		ec := fibp.ErrorCode(code)
		if ec.Known() && ec != fibp.CodeOk && !have[ec] {
			t.Errorf("no sentinel for %v", ec)
		}
		err := error(&Error{Code: ec, Message: "m"})
		if ec.Known() && ec != fibp.CodeOk && !errors.Is(fmt.Errorf("wrapped: %w", err), &Error{Code: ec}) {
			t.Errorf("errors.Is fails for %v", ec)
		}
	}
}

func TestRetryAfterHelper(t *testing.T) {
	err := fmt.Errorf("x: %w", &Error{Code: fibp.CodeChannelFull, Metadata: map[string]string{"retry_after_ms": "150"}})
	if d, ok := RetryAfter(err); !ok || d != 150*time.Millisecond {
		t.Errorf("RetryAfter = %v %v", d, ok)
	}
	if _, ok := RetryAfter(&Error{Code: fibp.CodeChannelFull}); ok {
		t.Error("RetryAfter without metadata reported ok")
	}
	if _, ok := RetryAfter(ErrQueueNotFound); ok {
		t.Error("RetryAfter on another code reported ok")
	}
	if got := ErrQueueNotFound.Error(); got != "fila: queue does not exist (QueueNotFound)" {
		t.Errorf("sentinel text = %q", got)
	}
}

func TestConcurrentRequests(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{Handler: func(c *fibptest.Conn, f fibptest.Frame) {
		switch req := f.Frame.(type) {
		case *fibp.GetConfig:
			c.Reply(f, &fibp.GetConfigResult{Value: req.Key})
		case *fibp.Ping:
			c.Reply(f, &fibp.Pong{})
		case *fibp.Enqueue:
			res := &fibp.EnqueueResult{}
			for range req.Messages {
				res.Results = append(res.Results, fibp.EnqueueResultItem{MessageID: MessageID{byte(len(res.Results))}})
			}
			c.Reply(f, res)
		}
	}})
	c, err := Dial(testCtx(t), p.Addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod := c.NewProducer(ProducerOptions{})
	defer prod.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("g%d-%d", g, i)
				var err error
				switch i % 3 {
				case 0:
					var v string
					if v, err = c.GetConfig(testCtx(t), key); err == nil && v != key {
						err = fmt.Errorf("got %q for %q", v, key)
					}
				case 1:
					_, err = c.Ping(testCtx(t))
				case 2:
					_, err = prod.Send(testCtx(t), Message{Queue: "q", Payload: []byte(key)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDialTLS(t *testing.T) {
	srvCfg, pool := fibptest.SelfSigned(t)
	p := fibptest.Start(t, fibptest.Options{TLS: srvCfg, NodeID: 3})
	c, err := Dial(testCtx(t), p.Addr(), &Options{TLS: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatalf("Dial over TLS: %v", err)
	}
	defer c.Close()
	if c.NodeID() != 3 {
		t.Errorf("node ID = %d", c.NodeID())
	}
	if _, err := Dial(testCtx(t), p.Addr(), &Options{TLS: &tls.Config{}}); err == nil {
		t.Error("Dial trusted an unknown certificate")
	}
}

func TestKeepAlivePing(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	// PongTimeout leaves the answered Ping's Pong ample time on a loaded machine (with 50 ms,
	// a late Pong under -race closed the connection before the second Ping).
	c, sc := dialPeer(t, p, &Options{PingInterval: 20 * time.Millisecond, PongTimeout: time.Second})
	sc.Reply(sc.Expect(t, fibp.OpPing), &fibp.Pong{})
	sc.Expect(t, fibp.OpPing) // unanswered: the client gives up on the connection
	select {
	case <-c.Done():
		if !errors.Is(c.Err(), ErrConnectionLost) {
			t.Errorf("Err = %v", c.Err())
		}
	case <-time.After(fibptest.Timeout):
		t.Fatal("connection kept after a missing Pong")
	}
}
