package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/google/go-cmp/cmp"
)

// fakeBroker answers the CLI's requests from canned data and records what it received.
type fakeBroker struct {
	mu       sync.Mutex
	received []fibp.Frame
	acks     int
}

var testID = wire.UUID{0x01, 0x90, 0xab, 0xcd, 0, 0, 0x70, 0, 0x80, 0, 0, 0, 0, 0, 0, 0x2a}

func (b *fakeBroker) handle(c *fibptest.Conn, f fibptest.Frame) {
	if _, bye := f.Frame.(*fibp.Disconnect); !bye {
		b.mu.Lock()
		b.received = append(b.received, f.Frame)
		b.mu.Unlock()
	}
	switch req := f.Frame.(type) {
	case *fibp.ListQueues:
		c.Reply(f, &fibp.ListQueuesResult{Queues: []fibp.QueueInfo{
			{Name: "orders", Depth: 1200, InFlight: 8, ActiveConsumers: 2},
			{Name: "orders.dlq", Depth: 3},
		}})
	case *fibp.GetStats:
		c.Reply(f, b.stats(req.Queue))
	case *fibp.DeleteQueue:
		c.Reply(f, &fibp.Error{ErrorCode: fibp.CodeForbidden, Message: `API key "ops" may not delete queue "orders"`})
	case *fibp.CreateQueue:
		c.Reply(f, &fibp.CreateQueueResult{QueueID: "q-7"})
	case *fibp.UpdateQueue:
		c.Reply(f, &fibp.UpdateQueueResult{})
	case *fibp.Enqueue:
		c.Reply(f, &fibp.EnqueueResult{Results: []fibp.EnqueueResultItem{{MessageID: testID}}})
	case *fibp.Consume:
		c.Reply(f, &fibp.ConsumeOk{ConsumerID: "c1"})
		d := &fibp.Delivery{}
		for i, p := range []string{"first", "second", "third"} {
			d.Messages = append(d.Messages, fibp.DeliveryMessage{MessageID: wire.UUID{byte(i + 1)}, Queue: req.Queue,
				Payload: []byte(p), FairnessKey: "default", Weight: 1, AttemptCount: 1,
				LeasedAt: 1700000000000, LeaseExpiresAt: 1700000030000})
		}
		c.Send(f.Header.RequestID, d)
	case *fibp.Ack:
		b.mu.Lock()
		b.acks += len(req.Items)
		b.mu.Unlock()
		c.Reply(f, &fibp.AckResult{Results: make([]fibp.AckResultItem, len(req.Items))})
	case *fibp.ListConfig:
		c.Reply(f, &fibp.ListConfigResult{Entries: []fibp.ConfigEntry{{Key: "lua.timeout_ms", Value: "10"}}})
	case *fibp.GetConfig:
		c.Reply(f, &fibp.GetConfigResult{ErrorCode: fibp.CodeInvalidConfigValue})
	case *fibp.GetClusterStatus:
		c.Reply(f, &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1,
			Nodes: []fibp.NodeStatus{{NodeID: 1, Addr: "10.0.0.1:5555", QueueLeaderships: 4}}})
	case *fibp.Redrive:
		c.Reply(f, &fibp.RedriveResult{Redriven: 3})
	}
}

func (b *fakeBroker) stats(queue string) *fibp.GetStatsResult {
	if queue == "orders.dlq" {
		return &fibp.GetStatsResult{Depth: 3}
	}
	if queue != "orders" {
		return &fibp.GetStatsResult{ErrorCode: fibp.CodeQueueNotFound}
	}
	return &fibp.GetStatsResult{
		Depth: 1200, InFlight: 8, Delayed: 5, ActiveFairnessKeys: 2, ActiveConsumers: 2, Quantum: 1,
		PerKeyStats: []fibp.FairnessKeyStat{{Key: "acme", PendingCount: 1000, CurrentDeficit: 1, Weight: 3},
			{Key: "globex", PendingCount: 200, Weight: 1}},
		ActiveThrottles: []fibp.ThrottleSummary{{Name: "stripe",
			Limits: []fibp.ThrottleLimit{{MaxDeliveries: 100, WindowMs: 1000}},
			Key:    fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "merchant"}}, DeclaringSubscribers: 2}},
	}
}

func (b *fakeBroker) last() fibp.Frame {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.received[len(b.received)-1]
}

// cli runs the command line in-process against a fresh fake broker.
func cli(t *testing.T, args ...string) (stdout, stderr string, code int, b *fakeBroker) {
	t.Helper()
	return cliIn(t, "", args...)
}

func cliIn(t *testing.T, stdin string, args ...string) (string, string, int, *fakeBroker) {
	t.Helper()
	b := &fakeBroker{}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	var out, errOut bytes.Buffer
	args = append([]string{"--addr", p.Addr(), "--timeout", "5s"}, args...)
	code := runWith(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code, b
}

func TestQueueListTable(t *testing.T) {
	out, errOut, code, _ := cli(t, "queue", "list")
	want := "NAME         DEPTH   IN FLIGHT   CONSUMERS\n" +
		"orders       1200    8           2\n" +
		"orders.dlq   3       0           0\n"
	if code != 0 || errOut != "" || out != want {
		t.Errorf("exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, errOut, out, want)
	}
}

func TestQueueListJSON(t *testing.T) {
	out, _, code, _ := cli(t, "queue", "list", "--json")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	want := map[string]any{"cluster_node_count": 0.0, "queues": []any{
		map[string]any{"name": "orders", "depth": 1200.0, "in_flight": 8.0, "active_consumers": 2.0, "leader_node_id": 0.0},
		map[string]any{"name": "orders.dlq", "depth": 3.0, "in_flight": 0.0, "active_consumers": 0.0, "leader_node_id": 0.0},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
}

func TestQueueStatsTable(t *testing.T) {
	out, errOut, code, b := cli(t, "queue", "stats", "orders")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if req := b.last().(*fibp.GetStats); req.Queue != "orders" {
		t.Errorf("GetStats queue = %q", req.Queue)
	}
	for _, line := range []string{
		"queue                  orders",
		"depth                  1200",
		"in flight              8",
		"delayed                5",
		"oldest unclassified    -",
		"FAIRNESS KEY   PENDING   DEFICIT   WEIGHT",
		"acme           1000      1         3",
		"THROTTLE   LIMITS   KEY               KEY MISSING     SUBSCRIBERS",
		"stripe     100/1s   header:merchant   shared_bucket   2",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("missing line %q in:\n%s", line, out)
		}
	}
}

func TestQueueStatsJSON(t *testing.T) {
	out, _, code, _ := cli(t, "--json", "queue", "stats", "orders")
	var got struct {
		Depth           uint64           `json:"depth"`
		PerKeyStats     []map[string]any `json:"per_key_stats"`
		ActiveThrottles []struct {
			Name   string `json:"name"`
			Limits []struct {
				Max      uint64 `json:"max_deliveries"`
				WindowMs uint64 `json:"window_ms"`
			} `json:"limits"`
			WhenKeyMissing string `json:"when_key_missing"`
		} `json:"active_throttles"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if got.Depth != 1200 || len(got.PerKeyStats) != 2 || got.PerKeyStats[0]["key"] != "acme" ||
		got.ActiveThrottles[0].Limits[0].Max != 100 || got.ActiveThrottles[0].Limits[0].WindowMs != 1000 || got.ActiveThrottles[0].WhenKeyMissing != "shared_bucket" {
		t.Errorf("JSON = %+v", got)
	}
	if strings.Contains(out, "oldest_unclassified_at") {
		t.Errorf("zero time printed:\n%s", out)
	}
}

func TestErrorsAreOneLineNamingTheCode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "stats", "missing"}, `fila: queue "missing" not found (QueueNotFound)`},
		{[]string{"queue", "delete", "orders", "--force"}, `fila: API key "ops" may not delete queue "orders" (Forbidden)`},
		{[]string{"config", "get", "nope"}, `fila: config key "nope" is not set (InvalidConfigValue)`},
	} {
		out, errOut, code, _ := cli(t, tc.args...)
		if code != 1 || out != "" || errOut != tc.want+"\n" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var out, errOut bytes.Buffer
	code := run([]string{"--addr", addr, "queue", "list"}, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "fila: ") || strings.Count(errOut.String(), "\n") != 1 ||
		!strings.Contains(errOut.String(), "refused") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"queue", "create"}, {"queue", "create", "q", "--backoff", "sometimes"},
		{"enqueue", "q", "--header", "novalue", "x"}, {"queue", "update", "q"}, {"queue", "list", "--nope"}} {
		_, errOut, code, _ := cli(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "fila: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

func TestQueueUpdateOfAnImmutableSetting(t *testing.T) {
	for _, flag := range []string{"--ordering-key", "--dedup-key", "--when-ordering-key-missing", "--ordering"} {
		_, errOut, code, b := cli(t, "queue", "update", "q", flag, "x", "--max-attempts", "3")
		b.mu.Lock()
		sent := len(b.received)
		b.mu.Unlock()
		if code != 2 || !strings.Contains(errOut, "fixed at creation (ImmutableSetting)") || sent != 0 {
			t.Errorf("%s: exit %d, stderr %q, %d frames sent", flag, code, errOut, sent)
		}
	}
}

func TestEnqueue(t *testing.T) {
	out, errOut, code, b := cli(t, "enqueue", "orders", "--header", "tenant=acme", "-H", "k=v=w",
		"--fairness-key", "acme", "--weight", "2", "--delay", "1s", "--idempotency-key", "o-1", "hello")
	if code != 0 || errOut != "" || out != testID.String()+"\n" {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	m := b.last().(*fibp.Enqueue).Messages[0]
	want := fibp.EnqueueMessage{Queue: "orders", Headers: map[string]string{"tenant": "acme", "k": "v=w"},
		Payload: []byte("hello"), FairnessKey: wire.Some("acme"), Weight: wire.Some[uint32](2),
		DelayMs: wire.Some[uint64](1000), IdempotencyKey: wire.Some("o-1")}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
	out, _, code, b = cliIn(t, "from stdin", "--json", "enqueue", "orders")
	if code != 0 || b.last().(*fibp.Enqueue).Messages[0].Payload == nil ||
		string(b.last().(*fibp.Enqueue).Messages[0].Payload) != "from stdin" {
		t.Errorf("stdin payload: exit %d", code)
	}
	if out != "{\n  \"duplicate\": false,\n  \"id\": \""+testID.String()+"\"\n}\n" {
		t.Errorf("JSON = %q", out)
	}
}

func TestConsumeAck(t *testing.T) {
	out, errOut, code, b := cli(t, "consume", "orders", "--ack", "--count", "2")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	want := "01000000-0000-0000-0000-000000000000  queue=orders attempt=1 fairness_key=\"default\"\nfirst\n" +
		"02000000-0000-0000-0000-000000000000  queue=orders attempt=1 fairness_key=\"default\"\nsecond\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.acks != 2 {
		t.Errorf("acked %d, want 2", b.acks)
	}
	if credit := b.received[0].(*fibp.Consume).Credit; credit != 2 {
		t.Errorf("Consume credit = %d, want --count 2", credit)
	}
	// The acks earn no credit: two deliveries were asked for and printed.
	for _, f := range b.received {
		if cr, ok := f.(*fibp.Credit); ok {
			t.Errorf("sent Credit %+v after asking for exactly --count deliveries", cr)
		}
	}
}

func TestConsumeJSONWithoutAck(t *testing.T) {
	out, _, code, b := cli(t, "--json", "consume", "orders", "--count", "1")
	var d map[string]any
	if err := json.Unmarshal([]byte(out), &d); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if d["payload"] != "first" || d["acked"] != false || d["lease_expires_at"] != "2023-11-14T22:13:50Z" {
		t.Errorf("delivery JSON = %v", d)
	}
	if b.acks != 0 {
		t.Errorf("acked without --ack")
	}
}

func TestQueueCreateAndUpdate(t *testing.T) {
	out, _, code, b := cli(t, "queue", "create", "orders", "--visibility-timeout", "45s", "--max-attempts", "5",
		"--backoff", "exponential", "--backoff-initial", "500ms", "--backoff-max", "1m", "--ordering", "grouped",
		"--ordering-key", "header:customer", "--dedup-key", "idempotency_key", "--script-failure", "park")
	if code != 0 || out != "queue \"orders\" created (id q-7)\n" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	want := &fibp.CreateQueue{Name: "orders", VisibilityTimeoutMs: 45000, MaxAttempts: 5, Backoff: fibp.BackoffExponential,
		BackoffInitialMs: 500, BackoffMaxMs: 60000, Ordering: fibp.OrderingGrouped,
		OrderingKey: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "customer"}},
		DedupKey:    fibp.Key{{Kind: fibp.KeyPartKindIdempotencyKey}}, ScriptFailure: fibp.ScriptFailurePark}
	if diff := cmp.Diff(want, b.last()); diff != "" {
		t.Errorf("CreateQueue (-want +got):\n%s", diff)
	}
	_, _, code, b = cli(t, "queue", "update", "orders", "--max-attempts", "3", "--remove-on-failure")
	wantU := &fibp.UpdateQueue{Queue: "orders", MaxAttempts: wire.Some[uint32](3), OnFailureChange: fibp.ScriptChangeRemove}
	if diff := cmp.Diff(wantU, b.last()); code != 0 || diff != "" {
		t.Errorf("exit %d; UpdateQueue (-want +got):\n%s", code, diff)
	}
}

func TestConfigListClusterStatusRedrive(t *testing.T) {
	out, _, code, _ := cli(t, "config", "list")
	if code != 0 || out != "KEY              VALUE\nlua.timeout_ms   10\n" {
		t.Errorf("config list: exit %d:\n%s", code, out)
	}
	out, _, code, _ = cli(t, "cluster", "status")
	if code != 0 || !strings.Contains(out, "1      10.0.0.1:5555   up      4\n") {
		t.Errorf("cluster status: exit %d:\n%s", code, out)
	}
	out, _, code, b := cli(t, "redrive", "orders.dlq", "--count", "3", "--reclassify", "none")
	if code != 0 || out != "redriven 3; left in orders.dlq: 0 unclassified, 0 rejected by script\n" {
		t.Errorf("redrive: exit %d: %q", code, out)
	}
	if diff := cmp.Diff(&fibp.Redrive{DLQQueue: "orders.dlq", Count: 3, Reclassify: fibp.ReclassifyNone}, b.last()); diff != "" {
		t.Errorf("Redrive (-want +got):\n%s", diff)
	}
}

func TestTLSWithCA(t *testing.T) {
	srvCfg, _ := fibptest.SelfSigned(t)
	b := &fakeBroker{}
	p := fibptest.Start(t, fibptest.Options{TLS: srvCfg, Handler: b.handle})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvCfg.Certificates[0].Certificate[0]})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run([]string{"--addr", p.Addr(), "--ca", caFile, "config", "list"}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), "lua.timeout_ms") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	code = run([]string{"--addr", p.Addr(), "--tls", "config", "list"}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "certificate") || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("untrusted server: exit %d, stderr %q", code, errOut.String())
	}
}
