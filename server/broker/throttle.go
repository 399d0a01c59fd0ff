package broker

import (
	"encoding/binary"
	"errors"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/keys"
	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/throttle"
)

// Throttles (throttling.md): the broker owns one throttle.Registry, shared by every queue actor;
// each lane of an actor with throttled subscriptions installs a laneThrottles as its engine
// Admission. A message's class is the tuple of its buckets in the lane's throttles, so the
// engine parks a throttled bucket's backlog as one class and asks again when the registry says
// the bucket has room.

// ThrottleDeclaration, ThrottleLimit and ThrottlePolicy are a subscription's throttles.
type (
	ThrottleDeclaration = throttle.Declaration
	ThrottleLimit       = throttle.Limit
	ThrottlePolicy      = throttle.Policy
	// ThrottleSummary describes a throttle (GetStats, GetThrottleStats).
	ThrottleSummary = throttle.Summary
)

// laneThrottles is the Admission of one lane: the distinct throttles its subscriptions declare.
// It runs on the actor's goroutine.
type laneThrottles struct {
	a       *actor
	lane    queuegroup.Lane
	ths     []*throttle.Throttle
	refs    []int            // declaring subscriptions of each of ths
	subs    map[string][]int // consumer → its throttles, as indices into ths
	headers bool             // some key reads a header: Class needs the message's headers

	// The last class decoded, for Admit.
	class   string
	buckets []laneBucket
	refBuf  []throttle.Ref
	buf     []byte // Class's encoding, reused
}

// laneBucket is a message's bucket in one throttle of the lane; !throttled when the message is
// missing the key and the throttle lets such messages pass.
type laneBucket struct {
	key       throttle.BucketKey
	throttled bool
}

var _ engine.Admission = (*laneThrottles)(nil)

// add registers consumer's throttles; it reports whether the lane's set of throttles changed.
func (lt *laneThrottles) add(consumer string, ts []*throttle.Throttle) (changed bool) {
	idx := make([]int, 0, len(ts))
	for _, t := range ts {
		i := -1
		for j, have := range lt.ths {
			if have == t {
				i = j
			}
		}
		if i < 0 {
			i, changed = len(lt.ths), true
			lt.ths, lt.refs = append(lt.ths, t), append(lt.refs, 0)
		}
		lt.refs[i]++
		idx = append(idx, i)
	}
	lt.subs[consumer] = idx
	if changed {
		lt.reindex()
	}
	return changed
}

// remove forgets consumer's throttles; it reports whether the lane's set of throttles changed.
func (lt *laneThrottles) remove(consumer string) (changed bool) {
	idx, ok := lt.subs[consumer]
	if !ok {
		return false
	}
	delete(lt.subs, consumer)
	for _, i := range idx {
		lt.refs[i]--
		changed = changed || lt.refs[i] == 0
	}
	if !changed {
		return false
	}
	// Compact the throttles and renumber every subscription's indices.
	renum := make([]int, len(lt.ths))
	var ths []*throttle.Throttle
	var refs []int
	for i, t := range lt.ths {
		renum[i] = len(ths)
		if lt.refs[i] > 0 {
			ths, refs = append(ths, t), append(refs, lt.refs[i])
		}
	}
	lt.ths, lt.refs = ths, refs
	for c, idx := range lt.subs {
		for j, i := range idx {
			idx[j] = renum[i]
		}
		lt.subs[c] = idx
	}
	lt.reindex()
	return true
}

func (lt *laneThrottles) reindex() {
	lt.headers = false
	for _, t := range lt.ths {
		for _, p := range t.Key() {
			lt.headers = lt.headers || p.Kind == keys.Header
		}
	}
	lt.class, lt.buckets = "", nil
}

// Class encodes the message's bucket in every throttle of the lane: per throttle one byte
// (0 unthrottled, 1 the shared bucket of messages missing the key, 2 keyed) and, when keyed, the
// u32-length-prefixed group.
func (lt *laneThrottles) Class(c engine.Candidate) string {
	s := keys.Subject{FairnessKey: c.FairnessKey, Attributes: c.Attributes}
	if lt.headers {
		s.Headers = lt.headersOf(c.ID)
	}
	buf := lt.buf[:0]
	for _, t := range lt.ths {
		at := len(buf)
		var ok bool
		buf, ok = t.Key().AppendGroup(append(buf, 2, 0, 0, 0, 0), &s)
		switch {
		case ok: // keyed (or unkeyed: no values): the group as keys.Group encodes it
			binary.BigEndian.PutUint32(buf[at+1:], uint32(len(buf)-at-5))
		case t.Policy() == throttle.Unthrottled:
			buf = append(buf[:at], 0)
		default:
			buf = append(buf[:at], 1)
		}
	}
	lt.buf = buf
	return string(buf)
}

// headersOf reads a message's headers: from the body cache, or else from the store, keeping the
// body read for the delivery that may follow in the same dispatch (actor.fetched).
func (lt *laneThrottles) headersOf(id engine.MsgID) map[string]string {
	a := lt.a
	if b, ok := a.bodies.get(id); ok {
		return b.headers
	}
	if b, ok := a.fetched[id]; ok {
		return b.headers
	}
	b, err := a.loadBody(id)
	if err != nil {
		a.log.Error("reading a message's headers for its throttle bucket failed", "id", id, "err", err)
		return nil
	}
	if a.fetched == nil {
		a.fetched = map[engine.MsgID]body{}
	}
	if len(a.fetched) < maxDispatchPerRound { // bounded: the message may be parked, not delivered
		a.fetched[id] = b
	}
	return b.headers
}

// decode fills lt.buckets from class (cached: Admit follows Class for the same message).
func (lt *laneThrottles) decode(class string) {
	if class == lt.class && lt.buckets != nil {
		return
	}
	lt.class = class
	lt.buckets = lt.buckets[:0]
	for range lt.ths {
		tag := class[0]
		class = class[1:]
		switch tag {
		case 0:
			lt.buckets = append(lt.buckets, laneBucket{})
		case 1:
			lt.buckets = append(lt.buckets, laneBucket{key: throttle.BucketKey{Missing: true}, throttled: true})
		default:
			n := binary.BigEndian.Uint32([]byte(class[:4]))
			lt.buckets = append(lt.buckets, laneBucket{key: throttle.BucketKey{Group: class[4 : 4+n]}, throttled: true})
			class = class[4+n:]
		}
	}
}

// Admit asks the registry for room in the message's bucket of every throttle consumer declares,
// counting the delivery when there is.
func (lt *laneThrottles) Admit(consumer, class string, now int64) (bool, int64) {
	idx := lt.subs[consumer]
	if len(idx) == 0 {
		return true, 0
	}
	lt.decode(class)
	refs := lt.refBuf[:0]
	for _, i := range idx {
		if b := lt.buckets[i]; b.throttled {
			refs = append(refs, throttle.Ref{T: lt.ths[i], B: b.key})
		}
	}
	lt.refBuf = refs
	if len(refs) == 0 {
		return true, 0
	}
	if ct := lt.a.b.ct; ct != nil {
		return ct.take(waiter{lt.a, lt.lane}, refs, now) // a cluster's: counted by each throttle's owner
	}
	return lt.a.b.throttles.Take(now, refs)
}

// waiting adds, for each parked class of lane q that throttle t buckets, its messages to the
// bucket's count in w.
func (lt *laneThrottles) waiting(q *engine.Queue, t *throttle.Throttle, w map[throttle.BucketKey]uint64) {
	ti := -1
	for i, have := range lt.ths {
		if have == t {
			ti = i
		}
	}
	if ti < 0 {
		return
	}
	for class, n := range q.ParkedClasses() {
		lt.decode(class)
		if b := lt.buckets[ti]; b.throttled {
			w[b.key] += uint64(n)
		}
	}
}

// declareThrottles registers the declarations of holder's subscription (nil when it declares
// none).
func (b *Broker) declareThrottles(queue, holder string, ds []ThrottleDeclaration) (*throttle.Subscription, *Error) {
	if len(ds) == 0 {
		return nil, nil
	}
	if e := b.markThrottles(); e != nil {
		return nil, e
	}
	ts, err := b.throttles.DeclareAs(holder, queue, ds)
	switch {
	case errors.Is(err, throttle.ErrInvalid):
		return nil, errorf(CodeInvalidThrottle, "%v", err)
	case errors.Is(err, throttle.ErrConflict):
		return nil, errorf(CodeThrottleConflict, "%v", err)
	case errors.Is(err, throttle.ErrFull):
		return nil, &Error{Code: CodeChannelFull, Message: err.Error(), RetryAfterMs: b.opts.RetryAfterMs}
	case err != nil:
		return nil, errorf(CodeInternalError, "%v", err)
	}
	return ts, nil
}

// addThrottles installs a new subscription's throttles on its lane.
func (a *actor) addThrottles(sub *subscription) {
	if sub.throttles == nil {
		return
	}
	lt := a.lanes[sub.lane].throttles
	if lt == nil {
		lt = &laneThrottles{a: a, lane: sub.lane, subs: map[string][]int{}}
		a.lanes[sub.lane].throttles = lt
	}
	if lt.add(sub.id, sub.throttles.Throttles()) {
		a.st.Lane(sub.lane).SetAdmission(lt)
	}
}

// dropThrottles ends an ended subscription's declarations; queues where its throttles stay
// active look at their parked messages again (the limits may have loosened).
func (a *actor) dropThrottles(sub *subscription) {
	if sub.throttles == nil {
		return
	}
	lt := a.lanes[sub.lane].throttles
	if lt.remove(sub.id) {
		if len(lt.ths) == 0 {
			a.st.Lane(sub.lane).SetAdmission(nil)
			a.lanes[sub.lane].throttles = nil
		} else {
			a.st.Lane(sub.lane).SetAdmission(lt)
		}
	}
	for _, q := range sub.throttles.Close() {
		if r := a.b.lookup(q); r.a != nil {
			r.a.postAwake(func(a *actor) { a.st.Lane(r.lane).WakeParked() }) // a sleeping group has no admission
		}
	}
}

// reinstallThrottles gives a reloaded group's lanes their admissions back.
func (a *actor) reinstallThrottles() {
	for l := range a.lanes {
		if lt := a.lanes[l].throttles; lt != nil {
			lt.class, lt.buckets = "", nil
			a.st.Lane(queuegroup.Lane(l)).SetAdmission(lt)
		}
	}
}

// unparkAll returns every parked message to its FIFO (before a snapshot).
func (a *actor) unparkAll() {
	for l := range a.lanes {
		a.st.Lane(queuegroup.Lane(l)).Unpark()
	}
}
