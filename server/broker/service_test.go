package broker

import (
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/store"
	"github.com/filamq/fila/server/service"
)

// The broker stores the service's enumerations by conversion (admin.go, describe.go): every
// value means the same on both sides.
func TestServiceEnumsAreTheStores(t *testing.T) {
	type enum interface {
		fmt.Stringer
		Known() bool
	}
	for v := range 256 {
		u := uint8(v)
		for _, pair := range [][2]enum{
			{store.Ordering(u), service.Ordering(u)},
			{store.WhenOrderingKeyMissing(u), service.WhenOrderingKeyMissing(u)},
			{store.ScriptFailure(u), service.ScriptFailure(u)},
			{store.Backoff(u), service.Backoff(u)},
			{store.DeliveryDurability(u), service.DeliveryDurability(u)},
		} {
			st, sv := pair[0], pair[1]
			if st.Known() != sv.Known() || st.String() != sv.String() {
				t.Errorf("%T %d: store %v (known %v), service %v (known %v)", st, u, st, st.Known(), sv, sv.Known())
			}
		}
	}
}
