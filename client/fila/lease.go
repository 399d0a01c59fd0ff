package fila

import (
	"context"
	"sync"
	"time"

	"github.com/filamq/fila/generated/fibp"
)

const (
	// defaultLease is assumed when a Delivery carries no usable lease times.
	defaultLease = 30 * time.Second
	// expiryGrace is how long past its local expiry an un-kept lease is considered lost.
	expiryGrace = time.Second
	// maxRetryDelay bounds the wait before retrying a failed extension.
	maxRetryDelay = time.Second
)

// leaseTable tracks every unfinished delivery of a client: it keeps leases alive (one goroutine
// batching due extensions of all subscriptions into one ExtendLease frame) and turns lost leases
// into finished deliveries so that their credit returns.
type leaseTable struct {
	c     *Client
	clock leaseClock // set before the first delivery
	wake  chan struct{}

	mu       sync.Mutex
	byID     map[MessageID]*Delivery
	running  bool
	nextScan time.Time // when run will look again (zero: as soon as it is woken)
}

func newLeaseTable(c *Client) *leaseTable {
	return &leaseTable{c: c, clock: systemClock{}, wake: make(chan struct{}, 1), byID: map[MessageID]*Delivery{}}
}

// track starts following d, received at the local time now. The lease duration is measured
// between the server's own timestamps, so clock skew between the hosts does not matter.
func (t *leaseTable) track(d *Delivery, now time.Time) {
	dur := d.LeaseExpiresAt.Sub(d.LeasedAt)
	if dur <= 0 || d.LeasedAt.IsZero() {
		dur = defaultLease
	}
	d.extendBy = dur
	t.mu.Lock()
	d.expires = now.Add(dur)
	d.due = now.Add(dur / 2)
	if d.keepAlive && d.sub.maxExtend > 0 {
		d.keepUntil = now.Add(d.sub.maxExtend)
	}
	old := t.byID[d.ID]
	t.byID[d.ID] = d
	if !t.running {
		t.running = true
		go t.run()
	}
	// Wake the loop only when d is due before its next scan: deliveries usually share one
	// lease duration, so a new one is rarely the earliest, and the scan is not repeated per
	// delivery.
	wake := t.earlierLocked(d)
	t.mu.Unlock()
	if old != nil {
		t.finish(old, true) // delivered again: the old lease is over
	}
	if wake {
		t.signal()
	}
}

// earlierLocked reports whether d needs attention before the loop's next scan.
func (t *leaseTable) earlierLocked(d *Delivery) bool {
	return t.nextScan.IsZero() || d.due.Before(t.nextScan) || !d.keepAlive && d.expires.Before(t.nextScan)
}

func (t *leaseTable) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// finish marks d finished once: it stops tracking d and grants its subscription one credit.
func (t *leaseTable) finish(d *Delivery, lost bool) {
	if !t.untrack(d) {
		return
	}
	if lost {
		close(d.lost)
	}
	if d.sub != nil {
		d.sub.grant(d.gen)
	}
}

// finishID finishes the tracked delivery with this ID, if any.
func (t *leaseTable) finishID(id MessageID, lost bool) {
	t.mu.Lock()
	d := t.byID[id]
	t.mu.Unlock()
	if d != nil {
		t.finish(d, lost)
	}
}

// untrack stops following d without granting credit (its subscription is gone); false when d
// was finished already.
func (t *leaseTable) untrack(d *Delivery) bool {
	if !d.finished.CompareAndSwap(false, true) {
		return false
	}
	t.mu.Lock()
	if t.byID[d.ID] == d {
		delete(t.byID, d.ID)
	}
	t.mu.Unlock()
	return true
}

// extended records the answer to one ExtendLease item sent at sentAt.
func (t *leaseTable) extended(id MessageID, code fibp.ErrorCode, sentAt time.Time, by time.Duration) {
	t.mu.Lock()
	d := t.byID[id]
	wake := false
	if d != nil && code == fibp.CodeOk {
		d.expires = sentAt.Add(by)
		d.due = sentAt.Add(by / 2)
		wake = t.earlierLocked(d)
	}
	t.mu.Unlock()
	switch {
	case wake:
		t.signal()
	case d == nil || code == fibp.CodeOk:
	case code == fibp.CodeMessageNotFound:
		t.finish(d, true)
	default:
		t.retryLater(d, t.clock.Now())
	}
}

// retryLater schedules another extension attempt for d soon, before its lease runs out.
func (t *leaseTable) retryLater(d *Delivery, now time.Time) {
	t.mu.Lock()
	wait := min(maxRetryDelay, max(10*time.Millisecond, d.expires.Sub(now)/4))
	d.due = now.Add(wait)
	wake := t.earlierLocked(d)
	t.mu.Unlock()
	if wake {
		t.signal()
	}
}

func (t *leaseTable) run() {
	var stop <-chan struct{} = t.c.done
	for {
		now := t.clock.Now()
		batch, expired, next := t.scan(now)
		for _, d := range expired {
			t.finish(d, true)
		}
		if len(batch) > 0 {
			t.extend(batch, now)
			continue
		}
		if next.IsZero() {
			next = now.Add(time.Hour)
		}
		at, release := t.clock.At(next)
		select {
		case <-at:
		case <-t.wake:
		case <-stop:
			if stop = t.outlive(stop); stop == nil {
				release()
				return
			}
		}
		release()
	}
}

// outlive is what run stops with once stop, the client's end, has come: a node connection of a
// Cluster that lost its node keeps its deliveries' leases alive through the Cluster, which
// reaches their queues' new leaders (extend), until the Cluster closes; any other client stops
// (nil).
//
// Every kept-alive delivery is extended at once then, without waiting for its turn: the queue's
// new leader honours a committed queue's leases anyway, but a fast queue's takes them back only
// during its reclaim grace, which may end before half of a lease.
func (t *leaseTable) outlive(stop <-chan struct{}) <-chan struct{} {
	l, ok := t.c.router.(interface{ lifeDone() <-chan struct{} })
	if !ok || stop != t.c.done {
		return nil
	}
	now := t.clock.Now()
	t.mu.Lock()
	for _, d := range t.byID {
		if d.keepAlive {
			d.due = now
		}
	}
	t.mu.Unlock()
	return l.lifeDone()
}

// scan returns the deliveries whose extension is due (or nearly: within an eighth of their
// lease, so that neighbours share a frame), those whose lease has run out, and when to look again.
func (t *leaseTable) scan(now time.Time) (batch, expired []*Delivery, next time.Time) {
	t.mu.Lock()
	defer func() {
		t.nextScan = next
		if len(batch) > 0 || len(expired) > 0 {
			t.nextScan = now // run acts, then scans again at once
		}
		t.mu.Unlock()
	}()
	earliest := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	for _, d := range t.byID {
		switch {
		case !d.keepAlive && !now.Before(d.expires.Add(expiryGrace)):
			expired = append(expired, d)
		case !d.keepAlive:
			earliest(d.expires.Add(expiryGrace))
		case !now.Before(d.expires):
			expired = append(expired, d)
		case !d.due.After(now.Add(d.extendBy / 8)):
			batch = append(batch, d)
		default:
			earliest(d.due)
		}
	}
	return batch, expired, next
}

// extend sends one ExtendLease frame for batch and waits for it, at most until the first of the
// leases would run out.
func (t *leaseTable) extend(batch []*Delivery, now time.Time) {
	items := make([]ExtendLeaseItem, 0, len(batch))
	deadline := now.Add(time.Hour)
	t.mu.Lock()
	for _, d := range batch {
		by, ok := d.extensionLocked(now)
		if !ok {
			continue
		}
		items = append(items, ExtendLeaseItem{Queue: d.Queue, ID: d.ID, By: by})
		if d.expires.Before(deadline) {
			deadline = d.expires
		}
	}
	t.mu.Unlock()
	if len(items) == 0 {
		return
	}
	ctx, cancel := t.clock.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := t.c.ExtendLease(ctx, items...)
	// A node connection whose node is gone (it failed with the loss, or the Cluster closed it)
	// sends them through its Cluster, as one whose node answered that it no longer leads.
	if r := t.c.router; r != nil && (err != nil && (r.rerouteable(err) || t.c.Err() != nil) || err == nil && anyRerouteable(r, res)) {
		err = t.reroute(ctx, r, items)
	}
	if err != nil {
		for _, d := range batch {
			t.retryLater(d, t.clock.Now())
		}
	}
}

// reroute extends items at their queues' current leaders through the Cluster the client is a
// node of, when the node that delivered them is gone or no longer leads (a failover): the new
// leader of a committed queue knows the leases, and a fast queue's takes them back during its
// reclaim grace. The answers are recorded here, where the deliveries are tracked.
func (t *leaseTable) reroute(ctx context.Context, r settleRouter, items []ExtendLeaseItem) error {
	sentAt := t.clock.Now()
	res, err := r.ExtendLease(ctx, items...)
	if err != nil {
		return err
	}
	for i, it := range items {
		code := fibp.CodeOk
		if res[i].Err != nil {
			if code, _ = ErrorCode(res[i].Err); code == fibp.CodeOk {
				code = fibp.CodeNodeNotReady // no broker code (a connection failed): tried again later
			}
		}
		t.extended(it.ID, code, sentAt, it.By)
	}
	return nil
}

// anyRerouteable reports whether an item of an ExtendLease answer failed in a way another node
// may not.
func anyRerouteable(r settleRouter, res []ExtendLeaseResult) bool {
	for _, x := range res {
		if x.Err != nil && r.rerouteable(x.Err) {
			return true
		}
	}
	return false
}

// extensionLocked is how far keep-alive extends d's lease at now: by its duration, shortened to
// end at keepUntil. Once the lease lasts until keepUntil, keep-alive ends (ok false) and the
// lease runs out as a lease without keep-alive does. t.mu is held.
func (d *Delivery) extensionLocked(now time.Time) (by time.Duration, ok bool) {
	if d.keepUntil.IsZero() {
		return d.extendBy, true
	}
	if !d.keepUntil.After(d.expires) {
		d.keepAlive = false
		return 0, false
	}
	return min(d.extendBy, d.keepUntil.Sub(now)), true
}
