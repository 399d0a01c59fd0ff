package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/service"
)

// The one mapping between FIBP's enumerations and the service's. The service keeps FIBP's
// numbering (TestEnumsMapByName checks every value by name), so each is a conversion; a value
// FIBP does not define passes through for the service to refuse by its number.

func ordering(v fibp.Ordering) service.Ordering { return service.Ordering(v) }

func whenOrderingKeyMissing(v fibp.WhenOrderingKeyMissing) service.WhenOrderingKeyMissing {
	return service.WhenOrderingKeyMissing(v)
}

func scriptFailure(v fibp.ScriptFailure) service.ScriptFailure { return service.ScriptFailure(v) }

func backoff(v fibp.Backoff) service.Backoff { return service.Backoff(v) }

func deliveryDurability(v fibp.DeliveryDurability) service.DeliveryDurability {
	return service.DeliveryDurability(v)
}

func scriptChange(v fibp.ScriptChange) service.ScriptChange { return service.ScriptChange(v) }

func reclassify(v fibp.Reclassify) service.Reclassify { return service.Reclassify(v) }

func rebalancing(v fibp.RebalancingMode) service.RebalancingMode { return service.RebalancingMode(v) }

func wireRebalancing(v service.RebalancingMode) fibp.RebalancingMode { return fibp.RebalancingMode(v) }

func throttlePolicy(v fibp.WhenKeyMissing) service.ThrottlePolicy { return service.ThrottlePolicy(v) }

func wireThrottlePolicy(v service.ThrottlePolicy) fibp.WhenKeyMissing { return fibp.WhenKeyMissing(v) }
