package fila

import (
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// expectLeaseLost waits for d's LeaseLost and the credit its loss frees.
func expectLeaseLost(t *testing.T, d *Delivery, sc *fibptest.Conn) {
	t.Helper()
	select {
	case <-d.LeaseLost():
	case <-time.After(fibptest.Timeout):
		t.Fatal("LeaseLost not closed once the lease ran out")
	}
	sc.Expect(t, fibp.OpCredit)
}

// MaxLeaseExtension: keep-alive extends a 200 ms lease by its duration until 550 ms after the
// delivery, shortens the last extension to end there (150 ms, retried when it fails), and then
// stops: the lease runs out and is reported lost. Time moves only on the lease table's clock.
func TestKeepAliveStopsAtMaxLeaseExtension(t *testing.T) {
	const lease, limit = 200 * time.Millisecond, 550 * time.Millisecond
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	clock := newFakeClock()
	c.leases.clock = clock
	cons, f := subscribe(t, c, sc, ConsumeOptions{MaxLeaseExtension: limit})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, lease)}})
	d := next(t, cons)
	extension := func(advance, want time.Duration, answer fibp.ErrorCode) {
		t.Helper()
		if advance > 0 {
			clock.WaitSleeping(t)
			clock.Advance(advance)
		}
		ext := sc.Expect(t, fibp.OpExtendLease)
		if items := ext.Frame.(*fibp.ExtendLease).Items; len(items) != 1 || items[0].ExtendByMs != uint64(want.Milliseconds()) {
			t.Fatalf("ExtendLease items %+v, want one extension by %v", items, want)
		}
		sc.Reply(ext, &fibp.ExtendLeaseResult{Results: []fibp.ExtendLeaseResultItem{{ErrorCode: answer, LeaseExpiresAt: 1}}})
	}
	extension(lease/2, lease, fibp.CodeOk) // at 100 ms: the lease now ends at 300 ms
	extension(lease/2, lease, fibp.CodeOk) // at 200 ms: 400 ms
	extension(lease/2, lease, fibp.CodeOk) // at 300 ms: 500 ms
	// At 400 ms: to 550 ms, refused; retried (at once: a quarter of the remaining 100 ms is
	// within the eighth of a lease by which extensions are grouped).
	extension(lease/2, 150*time.Millisecond, fibp.CodeNodeNotReady)
	extension(0, 150*time.Millisecond, fibp.CodeOk)
	clock.WaitSleeping(t)
	clock.Advance(lease / 2) // 500 ms: the lease lasts to the limit; nothing is sent
	sc.ExpectQuiet(t, 50*time.Millisecond)
	clock.WaitSleeping(t)
	clock.Advance(50*time.Millisecond + expiryGrace) // past the expiry
	expectLeaseLost(t, d, sc)
}

// A limit shorter than the delivered lease sends no extension at all; a negative one never stops.
func TestMaxLeaseExtensionBelowTheLeaseAndUnlimited(t *testing.T) {
	const lease = 200 * time.Millisecond
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	clock := newFakeClock()
	c.leases.clock = clock
	short, f := subscribe(t, c, sc, ConsumeOptions{MaxLeaseExtension: 50 * time.Millisecond})
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(1, lease)}})
	d := next(t, short)
	clock.WaitSleeping(t)
	clock.Advance(lease / 2)
	sc.ExpectQuiet(t, 50*time.Millisecond)
	clock.WaitSleeping(t)
	clock.Advance(lease/2 + expiryGrace)
	expectLeaseLost(t, d, sc)

	unlimited, f := subscribe(t, c, sc, ConsumeOptions{MaxLeaseExtension: -1})
	const long = 2 * DefaultMaxLeaseExtension
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: []fibp.DeliveryMessage{deliveryMsg(2, long)}})
	next(t, unlimited)
	for range 3 { // the last two past the default limit
		clock.WaitSleeping(t)
		clock.Advance(long / 2)
		ext := sc.Expect(t, fibp.OpExtendLease)
		if by := ext.Frame.(*fibp.ExtendLease).Items[0].ExtendByMs; by != uint64(long.Milliseconds()) {
			t.Fatalf("extension by %d ms, want the whole lease", by)
		}
		sc.Reply(ext, &fibp.ExtendLeaseResult{Results: []fibp.ExtendLeaseResultItem{{LeaseExpiresAt: 1}}})
	}
}
