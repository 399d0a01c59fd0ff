package engine

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// mid makes a distinct, deterministic message ID from n (UUIDv7-like: big-endian counter
// first, so IDs of one test sort by n).
func mid(n uint64) MsgID {
	var id MsgID
	binary.BigEndian.PutUint64(id[0:8], n)
	binary.BigEndian.PutUint64(id[8:16], n*0x9E3779B97F4A7C15)
	return id
}

// msg is a message with ID mid(n), fairness key key and weight w.
func msg(n uint64, key string, w uint32) Message {
	return Message{ID: mid(n), FairnessKey: key, Weight: w}
}

// tb is what the helpers need from *testing.T, *testing.B and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

var (
	_ tb = (*testing.T)(nil)
	_ tb = testing.TB(nil)
)

func newTestQueue(t tb, cfg Config) *Queue {
	t.Helper()
	if cfg.Alloc == nil {
		cfg.Alloc = testAlloc
	}
	q, err := NewQueue("q", cfg)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	return q
}

func must(t tb, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func enqueue(t tb, q *Queue, at int64, msgs ...Message) {
	t.Helper()
	must(t, q.ApplyEnqueue(Enqueue{At: at, Msgs: msgs}))
}

// keysOf returns the fairness keys of leases, in order.
func keysOf(t tb, q *Queue, ls []Lease) []string {
	t.Helper()
	out := make([]string, len(ls))
	for i, l := range ls {
		m, ok := q.Get(l.ID)
		if !ok {
			t.Fatalf("leased %v not stored", l.ID)
		}
		out[i] = m.FairnessKey
	}
	return out
}

// checkInvariants verifies every internal structure of q against the others; it returns the
// first inconsistency found.
func checkInvariants(q *Queue) error {
	for _, check := range []func() error{
		q.checkRecords, q.checkKeys, q.checkDelayedHeap, q.checkLeases,
		func() error { return checkRing(&q.active, "active") },
		func() error { return checkRing(&q.credited, "credited") },
		q.checkSubs, q.checkGroups,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func (q *Queue) checkRecords() error {
	var n, ready, held, delayed, leased, parked int
	refs := map[uint32]uint32{}
	prev := nilIdx
	for slot := q.ohead; slot != nilIdx; slot = q.slab.at(slot).onext {
		r := q.slab.at(slot)
		if r.oprev != prev {
			return fmt.Errorf("order list: slot %d oprev %d, want %d", slot, r.oprev, prev)
		}
		prev = slot
		n++
		if n > int(q.slab.live) {
			return fmt.Errorf("order list longer than %d live slots", q.slab.live)
		}
		if got, ok := q.index.find(r.id, q.slab); !ok || got != slot {
			return fmt.Errorf("index: %v at %d, found %d %v", r.id, slot, got, ok)
		}
		switch r.state() {
		case stReady:
			ready++
		case stHeld:
			held++
		case stDelayed:
			delayed++
		case stLeased:
			leased++
		case stParked:
			parked++
		case stWaiting:
		default:
			return fmt.Errorf("slot %d in order list has state %d", slot, r.state())
		}
		if (r.meta&metaHasError != 0) != (q.errs[slot] != "") {
			return fmt.Errorf("slot %d error flag disagrees with errs", slot)
		}
		refs[r.key()]++
	}
	if prev != q.otail {
		return fmt.Errorf("order list tail %d, want %d", q.otail, prev)
	}
	if n != int(q.slab.live) || n != q.index.len() {
		return fmt.Errorf("order list %d, live %d, index %d", n, q.slab.live, q.index.len())
	}
	if ready != q.ready || held != q.nHeld || delayed != q.nDelayed || leased != q.inFlight || parked != q.park.n {
		return fmt.Errorf("states %d/%d/%d/%d/%d, counters %d/%d/%d/%d/%d",
			ready, held, delayed, leased, parked, q.ready, q.nHeld, q.nDelayed, q.inFlight, q.park.n)
	}
	if len(q.errs) > n {
		return fmt.Errorf("%d errors for %d messages", len(q.errs), n)
	}
	for k := range q.keys {
		if q.keys[k].refs != refs[uint32(k)] {
			return fmt.Errorf("key %d refs %d, counted %d", k, q.keys[k].refs, refs[uint32(k)])
		}
	}
	return nil
}

func (q *Queue) checkKeys() error {
	live := 0
	for k := range q.keys {
		ks := &q.keys[k]
		if ks.refs == 0 {
			if ks.name != "" || q.active.contains(uint32(k)) {
				return fmt.Errorf("free key %d not clear", k)
			}
			continue
		}
		live++
		if q.keyIdx[ks.name] != uint32(k) {
			return fmt.Errorf("key %q not indexed at %d", ks.name, k)
		}
		if err := q.checkList(uint32(k), ks.head, ks.tail, ks.pending, stReady, "FIFO"); err != nil {
			return err
		}
		if err := q.checkList(uint32(k), ks.heldHead, ks.heldTail, ks.held, stHeld, "held list"); err != nil {
			return err
		}
		if q.active.contains(uint32(k)) != (ks.pending > 0) {
			return fmt.Errorf("key %q active %v with pending %d", ks.name, q.active.contains(uint32(k)), ks.pending)
		}
		if ks.pending == 0 && ks.deficit != 0 {
			return fmt.Errorf("idle key %q has deficit %d", ks.name, ks.deficit)
		}
	}
	if live != len(q.keyIdx) {
		return fmt.Errorf("%d live keys, %d indexed", live, len(q.keyIdx))
	}
	return nil
}

// checkList verifies one of key k's lists (FIFO or held list): links, states, key and length.
// A held list must also be in enqueue order.
func (q *Queue) checkList(k, head, tail, n, state uint32, what string) error {
	name := q.keys[k].name
	var got uint32
	prev := nilIdx
	for slot := head; slot != nilIdx; slot = q.slab.at(slot).next {
		r := q.slab.at(slot)
		if r.prev != prev || r.state() != state || r.key() != k {
			return fmt.Errorf("key %q %s broken at slot %d", name, what, slot)
		}
		if state == stHeld && prev != nilIdx && !q.orderedBefore(prev, slot) {
			return fmt.Errorf("key %q %s not in enqueue order at slot %d", name, what, slot)
		}
		prev = slot
		if got++; got > n {
			return fmt.Errorf("key %q %s longer than %d", name, what, n)
		}
	}
	if got != n || prev != tail {
		return fmt.Errorf("key %q %s %d long, counted %d", name, what, got, n)
	}
	return nil
}

// orderedBefore reports whether slot a comes before slot b in enqueue order (a slow walk).
func (q *Queue) orderedBefore(a, b uint32) bool {
	for s := q.slab.at(a).onext; s != nilIdx; s = q.slab.at(s).onext {
		if s == b {
			return true
		}
	}
	return false
}

func checkHeap(h *timeHeap, name string) error {
	for i := 1; i < len(h.ents); i++ {
		if h.less(h.ents[i], h.ents[(i-1)/2]) {
			return fmt.Errorf("%s heap order broken at %d", name, i)
		}
	}
	return nil
}

func (q *Queue) checkDelayedHeap() error {
	if err := checkTieBreak(&q.delayed, "delayed"); err != nil {
		return err
	}
	if err := checkHeap(&q.delayed, "delayed"); err != nil {
		return err
	}
	if q.delayed.len() != q.nDelayed {
		return fmt.Errorf("delayed heap %d, counter %d", q.delayed.len(), q.nDelayed)
	}
	for i, e := range q.delayed.ents {
		r := q.slab.at(e.ref)
		if r.state() != stDelayed || r.next != uint32(i) || r.notBefore != e.at {
			return fmt.Errorf("delayed heap entry %d (slot %d) inconsistent", i, e.ref)
		}
	}
	return nil
}

// checkTieBreak verifies that equal times in h are ordered by message ID along every
// parent–child edge (a heap ordered by slot would break this).
func checkTieBreak(h *timeHeap, name string) error {
	for i := 1; i < len(h.ents); i++ {
		p := (i - 1) / 2
		if h.ents[i].at == h.ents[p].at && compareIDs(&h.slab.at(h.ents[p].ref).id, &h.slab.at(h.ents[i].ref).id) >= 0 {
			return fmt.Errorf("%s heap tie at %d not ordered by ID", name, i)
		}
	}
	return nil
}

func (q *Queue) checkLeases() error {
	if err := checkTieBreak(&q.leaseHeap, "lease"); err != nil {
		return err
	}
	if err := checkHeap(&q.leaseHeap, "lease"); err != nil {
		return err
	}
	if q.leaseHeap.len() != q.inFlight {
		return fmt.Errorf("lease heap %d, in flight %d", q.leaseHeap.len(), q.inFlight)
	}
	for i, e := range q.leaseHeap.ents {
		r := q.slab.at(e.ref)
		if r.state() != stLeased {
			return fmt.Errorf("lease heap entry %d (slot %d) is not leased", i, e.ref)
		}
		if l := &q.leases[r.next]; l.pos != uint32(i) || l.expiresAt != e.at || l.slot != e.ref {
			return fmt.Errorf("lease heap entry %d (slot %d) inconsistent", i, e.ref)
		}
	}
	return nil
}

func checkRing(r *ring, name string) error {
	if r.n == 0 {
		if r.head != nilIdx {
			return fmt.Errorf("%s ring empty with head %d", name, r.head)
		}
		return nil
	}
	i := r.head
	for range r.n {
		if r.prev[r.next[i]] != i {
			return fmt.Errorf("%s ring links broken at %d", name, i)
		}
		i = r.next[i]
	}
	if i != r.head {
		return fmt.Errorf("%s ring of %d does not close", name, r.n)
	}
	members := 0
	for j := range r.next {
		if r.next[j] != nilIdx {
			members++
		}
	}
	if members != r.n {
		return fmt.Errorf("%s ring has %d members, n %d", name, members, r.n)
	}
	return nil
}

func (q *Queue) checkSubs() error {
	for id, i := range q.subIdx {
		s := &q.subs[i]
		if s.id != id {
			return fmt.Errorf("subscription %q at %d named %q", id, i, s.id)
		}
		if q.credited.contains(i) != (s.unlimited || s.credit > 0) {
			return fmt.Errorf("subscription %q credited %v with credit %d", id, q.credited.contains(i), s.credit)
		}
	}
	return nil
}

// restore snapshots q through Messages, SnapshotKeys and ReadyOrder into a Restorer and returns
// the restored queue.
func restore(t tb, q *Queue) *Queue {
	t.Helper()
	r, err := NewRestorer(q.Name(), q.Config())
	must(t, err)
	if q.groups.off {
		r.DisableOrdering()
	}
	for m := range q.Messages() {
		must(t, r.AddMessage(m))
	}
	for k := range q.SnapshotKeys() {
		must(t, r.AddKey(k))
		for id := range q.ReadyOrder(k.Name) {
			must(t, r.AddReady(id))
		}
	}
	out, err := r.Queue()
	must(t, err)
	if err := checkInvariants(out); err != nil {
		t.Fatalf("restored queue: %v", err)
	}
	return out
}
