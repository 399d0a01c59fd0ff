package transport

import (
	"strings"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// A refused admin request whose reason a result frame's error code cannot carry is answered with
// an Error frame that says why; a missing or existing subject keeps its result frame.
func TestAdminRefusalsSayWhy(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.Handshake()
	newQueue(t, c, &fibp.CreateQueue{Name: "orders"})

	for _, tc := range []struct {
		name string
		req  fibp.Frame
		code fibp.ErrorCode
		why  string // in the Error frame's message
	}{
		{"create: visibility timeout too long", &fibp.CreateQueue{Name: "b", VisibilityTimeoutMs: 13 * 3600 * 1000}, fibp.CodeInvalidConfigValue, "visibility_timeout_ms 46800000 exceeds 12 hours"},
		{"create: a space in the name", &fibp.CreateQueue{Name: "a b"}, fibp.CodeInvalidConfigValue, `queue name "a b" must be`},
		{"create: backoff", &fibp.CreateQueue{Name: "b", Backoff: 9}, fibp.CodeInvalidConfigValue, "backoff 9 is not one of 0..3"},
		{"update: visibility timeout too long", &fibp.UpdateQueue{Queue: "orders", VisibilityTimeoutMs: wire.Some[uint64](13 * 3600 * 1000)}, fibp.CodeInvalidConfigValue, "exceeds 12 hours"},
		{"update: delivery durability", &fibp.UpdateQueue{Queue: "orders", DeliveryDurability: wire.Some(fibp.DeliveryDurability(2))}, fibp.CodeInvalidConfigValue, "delivery_durability 2"},
		{"update: a DLQ's hooks", &fibp.UpdateQueue{Queue: "orders.dlq", OnEnqueueChange: fibp.ScriptChangeSet, OnEnqueueScript: "function on_enqueue(m) return {} end"}, fibp.CodeInvalidConfigValue, "a dead-letter queue has no Lua hooks"},
		{"set config", &fibp.SetConfig{Key: "scheduler.quantom", Value: "1"}, fibp.CodeInvalidConfigValue, `unknown config key "scheduler.quantom"`},
		{"redrive: reclassify", &fibp.Redrive{DLQQueue: "orders.dlq", Reclassify: 7}, fibp.CodeInvalidConfigValue, "reclassify 7"},
		{"API key name", &fibp.CreateAPIKey{Name: ""}, fibp.CodeInvalidConfigValue, `key name "" must be`},
		{"API key expiry", &fibp.CreateAPIKey{Name: "old", ExpiresAtMs: 1}, fibp.CodeInvalidConfigValue, "expires_at 1 is not in the future"},
		{"ACL kind", &fibp.SetACL{KeyID: "nope", Permissions: []fibp.ACLPermission{{Kind: "read", Pattern: "*"}}}, fibp.CodeInvalidConfigValue, "read"},
		{"rebalancing pause", &fibp.SetRebalancing{Mode: fibp.RebalancingPaused}, fibp.CodeInvalidConfigValue, "a pause needs pause_ms > 0"},
		{"bucket kind", &fibp.GetThrottleBucket{Name: "t", BucketKind: 9}, fibp.CodeInvalidConfigValue, "unknown bucket_kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := expectError(t, c.Call(20, tc.req), tc.code)
			if !strings.Contains(e.Message, tc.why) {
				t.Fatalf("%v refused with %q, want it to say %q", tc.req.Opcode(), e.Message, tc.why)
			}
		})
	}

	// The code says all: the result frame, as the spec lays it out.
	if r, ok := c.Call(30, &fibp.DeleteQueue{Queue: "nope"}).(*fibp.DeleteQueueResult); !ok || r.ErrorCode != fibp.CodeQueueNotFound {
		t.Fatalf("DeleteQueue of a missing queue: %#v", r)
	}
	if r, ok := c.Call(31, &fibp.GetConfig{Key: "app.unset"}).(*fibp.GetConfigResult); !ok || r.ErrorCode != fibp.CodeInvalidConfigValue {
		t.Fatalf("GetConfig of an unset key: %#v", r)
	}
	if r, ok := c.Call(32, &fibp.CreateQueue{Name: "orders"}).(*fibp.CreateQueueResult); !ok || r.ErrorCode != fibp.CodeQueueAlreadyExists {
		t.Fatalf("CreateQueue of an existing queue: %#v", r)
	}
}
