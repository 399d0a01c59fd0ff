package fila

import (
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/google/go-cmp/cmp"
)

// exchange runs call against the scripted peer, checks the request frame, answers it with
// reply, and returns the call's error.
func exchange(t *testing.T, sc *fibptest.Conn, call func() error, want fibp.Frame, reply fibp.Frame) error {
	t.Helper()
	done := async(call)
	f := sc.Expect(t, want.Opcode())
	if diff := cmp.Diff(want, f.Frame); diff != "" {
		t.Errorf("%v request (-want +got):\n%s", want.Opcode(), diff)
	}
	sc.Reply(f, reply)
	return wait(t, done)
}

func TestCreateQueueSendsEveryField(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	var id string
	err := exchange(t, sc, func() (err error) {
		id, err = c.CreateQueue(testCtx(t), QueueConfig{
			Name: "orders", OnEnqueueScript: "function on_enqueue(m) end", VisibilityTimeout: 45 * time.Second,
			Ordering: fibp.OrderingGrouped, OrderingKey: Key{HeaderPart("customer")},
			WhenOrderingKeyMissing: fibp.WhenOrderingKeyMissingUnordered,
			DedupKey:               Key{IdempotencyKeyPart()}, DedupWindow: time.Minute,
			ScriptFailure: fibp.ScriptFailurePark, ParkDeadLetterAfter: 3, MaxAttempts: 7,
			Backoff: fibp.BackoffFixed, BackoffInitial: 2 * time.Second, BackoffMax: time.Minute,
			DeliveryDurability: fibp.DeliveryDurabilityFast, ReclaimGrace: 5 * time.Second,
		})
		return err
	}, &fibp.CreateQueue{
		Name: "orders", OnEnqueueScript: wire.Some("function on_enqueue(m) end"), VisibilityTimeoutMs: 45000,
		Ordering: fibp.OrderingGrouped, OrderingKey: fibp.Key{{Kind: fibp.KeyPartKindHeader, Name: "customer"}},
		WhenOrderingKeyMissing: fibp.WhenOrderingKeyMissingUnordered,
		DedupKey:               fibp.Key{{Kind: fibp.KeyPartKindIdempotencyKey}}, DedupWindowMs: 60000,
		ScriptFailure: fibp.ScriptFailurePark, ParkDeadLetterAfter: 3, MaxAttempts: 7,
		Backoff: fibp.BackoffFixed, BackoffInitialMs: 2000, BackoffMaxMs: 60000,
		DeliveryDurability: fibp.DeliveryDurabilityFast, ReclaimGraceMs: 5000,
	}, &fibp.CreateQueueResult{QueueID: "q-1"})
	if err != nil || id != "q-1" {
		t.Fatalf("CreateQueue = %q, %v", id, err)
	}
	err = exchange(t, sc, func() error { _, err := c.CreateQueue(testCtx(t), QueueConfig{Name: "orders"}); return err },
		&fibp.CreateQueue{Name: "orders"}, &fibp.CreateQueueResult{ErrorCode: fibp.CodeQueueAlreadyExists})
	if !errors.Is(err, ErrQueueAlreadyExists) || err.Error() != `fila: queue "orders" already exists (QueueAlreadyExists)` {
		t.Errorf("err = %v", err)
	}
}

func TestUpdateQueueOnlyGivenFields(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	script := "function on_failure(m) end"
	err := exchange(t, sc, func() error {
		return c.UpdateQueue(testCtx(t), "orders", QueueUpdate{
			RemoveOnEnqueue: true, OnFailureScript: &script,
			VisibilityTimeout: Ptr(10 * time.Second), MaxAttempts: Ptr[uint32](4), Backoff: Ptr(fibp.BackoffNone),
		})
	}, &fibp.UpdateQueue{
		Queue: "orders", OnEnqueueChange: fibp.ScriptChangeRemove,
		OnFailureChange: fibp.ScriptChangeSet, OnFailureScript: script,
		VisibilityTimeoutMs: wire.Some[uint64](10000), MaxAttempts: wire.Some[uint32](4), Backoff: wire.Some(fibp.BackoffNone),
	}, &fibp.UpdateQueueResult{ErrorCode: fibp.CodeImmutableSetting})
	if !errors.Is(err, ErrImmutableSetting) {
		t.Errorf("err = %v", err)
	}
}

func TestGetStatsEveryField(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	var st *QueueStats
	err := exchange(t, sc, func() (err error) { st, err = c.GetStats(testCtx(t), "orders"); return err },
		&fibp.GetStats{Queue: "orders"},
		&fibp.GetStatsResult{
			Depth: 10, InFlight: 2, Delayed: 3, Unclassified: 1, OldestUnclassifiedAt: 1700000000000, Throttled: 4,
			ActiveFairnessKeys: 2, ActiveConsumers: 1, Quantum: 1, LeaderNodeID: 5, ReplicationCount: 3,
			PerKeyStats: []fibp.FairnessKeyStat{{Key: "a", PendingCount: 6, CurrentDeficit: -1, Weight: 2}},
			ActiveThrottles: []fibp.ThrottleSummary{{Name: "t", Limits: []fibp.ThrottleLimit{{MaxDeliveries: 5, WindowMs: 1000}},
				Key: fibp.Key{{Kind: fibp.KeyPartKindFairnessKey}}, DeclaringSubscribers: 2}},
		})
	if err != nil {
		t.Fatal(err)
	}
	want := &QueueStats{
		Depth: 10, InFlight: 2, Delayed: 3, Unclassified: 1, OldestUnclassifiedAt: time.UnixMilli(1700000000000), Throttled: 4,
		ActiveFairnessKeys: 2, ActiveConsumers: 1, Quantum: 1, LeaderNodeID: 5, ReplicationCount: 3,
		PerKeyStats: []FairnessKeyStat{{Key: "a", PendingCount: 6, CurrentDeficit: -1, Weight: 2}},
		ActiveThrottles: []ThrottleSummary{{Name: "t", Limits: []ThrottleLimit{{Max: 5, Window: time.Second}},
			Key: Key{FairnessKeyPart()}, DeclaringSubscribers: 2}},
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	err = exchange(t, sc, func() error { _, err := c.GetStats(testCtx(t), "nope"); return err },
		&fibp.GetStats{Queue: "nope"}, &fibp.GetStatsResult{ErrorCode: fibp.CodeQueueNotFound})
	if !errors.Is(err, ErrQueueNotFound) || err.Error() != `fila: queue "nope" not found (QueueNotFound)` {
		t.Errorf("err = %v", err)
	}
}

func TestConfigAndRedrive(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	if err := exchange(t, sc, func() error { return c.SetConfig(testCtx(t), "lua.timeout_ms", "20") },
		&fibp.SetConfig{Key: "lua.timeout_ms", Value: "20"}, &fibp.SetConfigResult{}); err != nil {
		t.Fatal(err)
	}
	err := exchange(t, sc, func() error { _, err := c.GetConfig(testCtx(t), "unset"); return err },
		&fibp.GetConfig{Key: "unset"}, &fibp.GetConfigResult{ErrorCode: fibp.CodeInvalidConfigValue})
	if !errors.Is(err, ErrInvalidConfigValue) || err.Error() != `fila: config key "unset" is not set (InvalidConfigValue)` {
		t.Errorf("err = %v", err)
	}
	var entries []ConfigEntry
	err = exchange(t, sc, func() (err error) { entries, err = c.ListConfig(testCtx(t), "lua."); return err },
		&fibp.ListConfig{Prefix: "lua."}, &fibp.ListConfigResult{Entries: []fibp.ConfigEntry{{Key: "lua.timeout_ms", Value: "20"}}})
	if err != nil || len(entries) != 1 || entries[0] != (ConfigEntry{"lua.timeout_ms", "20"}) {
		t.Errorf("ListConfig = %v, %v", entries, err)
	}
	var rr *RedriveResult
	err = exchange(t, sc, func() (err error) { rr, err = c.Redrive(testCtx(t), "orders.dlq", 5, fibp.ReclassifyNone); return err },
		&fibp.Redrive{DLQQueue: "orders.dlq", Count: 5, Reclassify: fibp.ReclassifyNone},
		&fibp.RedriveResult{Redriven: 4, LeftUnclassified: 1})
	if err != nil || *rr != (RedriveResult{Redriven: 4, LeftUnclassified: 1}) {
		t.Errorf("Redrive = %+v, %v", rr, err)
	}
	err = exchange(t, sc, func() error { _, err := c.Redrive(testCtx(t), "orders", 0, fibp.ReclassifyAll); return err },
		&fibp.Redrive{DLQQueue: "orders"}, &fibp.RedriveResult{ErrorCode: fibp.CodeNotADLQ})
	if !errors.Is(err, ErrNotADLQ) {
		t.Errorf("err = %v", err)
	}
}

func TestClusterAndKeyAdmin(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	var st *ClusterStatus
	err := exchange(t, sc, func() (err error) { st, err = c.GetClusterStatus(testCtx(t)); return err },
		&fibp.GetClusterStatus{}, &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1, Rebalancing: fibp.RebalancingPaused,
			RebalancingPauseEndsAt: 1700000000000, Nodes: []fibp.NodeStatus{{NodeID: 1, Addr: "a:1", QueueLeaderships: 3}}})
	if err != nil || st.Rebalancing != fibp.RebalancingPaused || st.Nodes[0].Addr != "a:1" || st.RebalancingPauseEndsAt.IsZero() {
		t.Errorf("GetClusterStatus = %+v, %v", st, err)
	}
	err = exchange(t, sc, func() error { return c.DrainNode(testCtx(t), 9, true) },
		&fibp.DrainNode{NodeID: 9, Drain: true}, &fibp.DrainNodeResult{ErrorCode: fibp.CodeNodeNotFound})
	if !errors.Is(err, ErrNodeNotFound) || err.Error() != "fila: node 9 not found (NodeNotFound)" {
		t.Errorf("err = %v", err)
	}
	err = exchange(t, sc, func() error { return c.RevokeAPIKey(testCtx(t), "k1") },
		&fibp.RevokeAPIKey{KeyID: "k1"}, &fibp.RevokeAPIKeyResult{ErrorCode: fibp.CodeAPIKeyNotFound})
	if !errors.Is(err, ErrAPIKeyNotFound) {
		t.Errorf("err = %v", err)
	}
	err = exchange(t, sc, func() error {
		return c.SetACL(testCtx(t), "k1", []Permission{{Kind: fibp.AclKindProduce, Pattern: "orders.*"}})
	}, &fibp.SetACL{KeyID: "k1", Permissions: []fibp.ACLPermission{{Kind: "produce", Pattern: "orders.*"}}}, &fibp.SetACLResult{})
	if err != nil {
		t.Error(err)
	}
	err = exchange(t, sc, func() error { return c.SetRebalancing(testCtx(t), fibp.RebalancingPaused, time.Minute) },
		&fibp.SetRebalancing{Mode: fibp.RebalancingPaused, PauseMs: 60000}, &fibp.SetRebalancingResult{})
	if err != nil {
		t.Error(err)
	}
}

func TestParseKeyRoundTrip(t *testing.T) {
	const s = "header:tenant,fairness_key,attr:region,idempotency_key,payload_hash,headers_hash"
	k, err := ParseKey(s)
	if err != nil || len(k) != 6 || FormatKey(k) != s {
		t.Fatalf("ParseKey(%q) = %v, %v; formats as %q", s, k, err, FormatKey(k))
	}
	if _, err := ParseKey("header:"); err == nil {
		t.Error("empty header name accepted")
	}
	if k, err := ParseKey(""); err != nil || k != nil {
		t.Errorf("empty key = %v, %v", k, err)
	}
}
