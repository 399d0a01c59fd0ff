package session

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/service"
)

// enumValue is one value of an enumeration on both sides of the mapping.
type enumValue interface {
	fmt.Stringer
	Known() bool
}

// TestEnumsMapByName checks the mapping of every enumeration both ways by name: each value
// FIBP defines maps to the service's value of the same name, each value the service defines is
// one FIBP defines, and unknown values stay unknown.
func TestEnumsMapByName(t *testing.T) {
	check := func(name string, v uint8, wire, domain enumValue) {
		t.Helper()
		if wire.Known() != domain.Known() || (wire.Known() && wire.String() != domain.String()) {
			t.Errorf("%s %d: FIBP %v (known %v), service %v (known %v)", name, v, wire, wire.Known(), domain, domain.Known())
		}
	}
	for v := range 256 {
		u := uint8(v)
		check("ordering", u, fibp.Ordering(u), ordering(fibp.Ordering(u)))
		check("when_ordering_key_missing", u, fibp.WhenOrderingKeyMissing(u), whenOrderingKeyMissing(fibp.WhenOrderingKeyMissing(u)))
		check("script_failure", u, fibp.ScriptFailure(u), scriptFailure(fibp.ScriptFailure(u)))
		check("backoff", u, fibp.Backoff(u), backoff(fibp.Backoff(u)))
		check("delivery_durability", u, fibp.DeliveryDurability(u), deliveryDurability(fibp.DeliveryDurability(u)))
		check("script_change", u, fibp.ScriptChange(u), scriptChange(fibp.ScriptChange(u)))
		check("reclassify", u, fibp.Reclassify(u), reclassify(fibp.Reclassify(u)))
		check("rebalancing", u, fibp.RebalancingMode(u), rebalancing(fibp.RebalancingMode(u)))
		if m := service.RebalancingMode(u); wireRebalancing(m) != fibp.RebalancingMode(u) {
			t.Errorf("rebalancing %v maps back to %v", m, wireRebalancing(m))
		}
		if p := throttlePolicy(fibp.WhenKeyMissing(u)); fibp.WhenKeyMissing(u).Known() && p.String() != fibp.WhenKeyMissing(u).String() {
			t.Errorf("when_key_missing %d: FIBP %v, service %v", u, fibp.WhenKeyMissing(u), p)
		}
		if p := service.ThrottlePolicy(u); wireThrottlePolicy(p) != fibp.WhenKeyMissing(u) {
			t.Errorf("throttle policy %v maps back to %v", p, wireThrottlePolicy(p))
		}
	}
}

// A NotLeader names the leader in the Error frame's leader_addr; ChannelFull its back-off.
func TestErrorFrameMetadata(t *testing.T) {
	f := ErrorFrame(&service.Error{Code: service.CodeNotLeader, Message: "not here", LeaderAddr: "10.0.0.2:5555"})
	if f.ErrorCode != fibp.CodeNotLeader || f.Metadata[fibp.MetaLeaderAddr] != "10.0.0.2:5555" {
		t.Errorf("NotLeader frame %+v", f)
	}
	f = ErrorFrame(&service.Error{Code: service.CodeChannelFull, Message: "full", RetryAfterMs: 100})
	if f.ErrorCode != fibp.CodeChannelFull || f.Metadata[fibp.MetaRetryAfterMs] != "100" || len(f.Metadata) != 1 {
		t.Errorf("ChannelFull frame %+v", f)
	}
	if f := ErrorFrame(&service.Error{Code: service.CodeNodeNotReady, Message: "electing"}); f.ErrorCode != fibp.CodeNodeNotReady || f.Metadata != nil {
		t.Errorf("NodeNotReady frame %+v", f)
	}
}
