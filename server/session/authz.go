package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/auth"
)

// Need is what an admin request requires of the caller's API key (security.md).
type Need struct {
	// Superadmin: key management, ACLs, config and cluster operations (and admin requests this
	// table does not know, so that a new one is closed until it is classified).
	Superadmin bool
	// Filtered: any key may ask; the answer lists only the queues the key has a permission on.
	Filtered bool
	// Otherwise the request needs Kind on Queue (a throttle's name, for auth.Throttle).
	Kind  auth.Kind
	Queue string
}

// Permits reports whether p may make a request that needs n.
func (n Need) Permits(p *auth.Principal) bool {
	switch {
	case n.Superadmin:
		return p.Superadmin()
	case n.Filtered:
		return true
	default:
		return p.Allowed(n.Kind, n.Queue)
	}
}

// onQueue decodes an admin request into a fresh frame and names the queue it acts on.
func onQueue[T any, P interface {
	*T
	fibp.Frame
}](queue func(P) string) func([]byte) (Need, error) {
	return func(body []byte) (Need, error) {
		req := P(new(T))
		if err := req.Decode(body); err != nil {
			return Need{}, err
		}
		return Need{Kind: auth.Admin, Queue: queue(req)}, nil
	}
}

// queueAdmin lists the admin requests that act on one queue and need admin on it.
var queueAdmin = map[fibp.Opcode]func([]byte) (Need, error){
	fibp.OpCreateQueue: onQueue(func(r *fibp.CreateQueue) string { return r.Name }),
	fibp.OpUpdateQueue: onQueue(func(r *fibp.UpdateQueue) string { return r.Queue }),
	fibp.OpDeleteQueue: onQueue(func(r *fibp.DeleteQueue) string { return r.Queue }),
	fibp.OpGetStats:    onQueue(func(r *fibp.GetStats) string { return r.Queue }),
	fibp.OpRedrive:     onQueue(func(r *fibp.Redrive) string { return r.DLQQueue }),
}

// onThrottle decodes a throttle request and names the throttle: the request needs the throttle
// permission on it, as declaring it does (a tenant inspects its own throttles; the answer's
// queues are filtered, see Filter).
func onThrottle[T any, P interface {
	*T
	fibp.Frame
}](name func(P) string) func([]byte) (Need, error) {
	return func(body []byte) (Need, error) {
		req := P(new(T))
		if err := req.Decode(body); err != nil {
			return Need{}, err
		}
		return Need{Kind: auth.Throttle, Queue: name(req)}, nil
	}
}

// throttleAdmin lists the admin requests that read one throttle.
var throttleAdmin = map[fibp.Opcode]func([]byte) (Need, error){
	fibp.OpGetThrottleStats:  onThrottle(func(r *fibp.GetThrottleStats) string { return r.Name }),
	fibp.OpGetThrottleBucket: onThrottle(func(r *fibp.GetThrottleBucket) string { return r.Name }),
}

// AdminNeed says what an admin request needs; a malformed body is the decoding error.
func AdminNeed(op fibp.Opcode, body []byte) (Need, error) {
	if need, ok := queueAdmin[op]; ok {
		return need(body)
	}
	if need, ok := throttleAdmin[op]; ok {
		return need(body)
	}
	switch op {
	case fibp.OpListQueues, fibp.OpGetRoutes:
		return Need{Filtered: true}, nil
	}
	return Need{Superadmin: true}, nil
}

// Filter removes from an admin answer the queues p has no permission on (ListQueues, GetRoutes,
// and the queues where a throttle is active in GetThrottleStats), then bounds its lists (Bound).
func Filter(p *auth.Principal, res fibp.Frame) {
	defer Bound(res)
	if p.Superadmin() {
		return
	}
	switch r := res.(type) {
	case *fibp.ListQueuesResult:
		r.Queues = keep(r.Queues, func(q *fibp.QueueInfo) bool { return p.Any(q.Name) })
	case *fibp.GetRoutesResult:
		r.Entries = keep(r.Entries, func(e *fibp.RouteEntry) bool { return p.Any(e.Queue) })
	case *fibp.GetThrottleStatsResult: // a throttle may be shared with queues of other tenants
		r.Queues = keep(r.Queues, func(q *fibp.QueueRef) bool { return p.Any(q.Queue) })
	}
}

// DeniedThrottle names the first throttle of ds that p may not declare (auth.Throttle on its
// name); ok when p may declare them all.
func DeniedThrottle(p *auth.Principal, ds []fibp.ThrottleDeclaration) (name string, ok bool) {
	for i := range ds {
		if !p.Allowed(auth.Throttle, ds[i].Name) {
			return ds[i].Name, false
		}
	}
	return "", true
}

func keep[T any](s []T, ok func(*T) bool) []T {
	out := s[:0]
	for i := range s {
		if ok(&s[i]) {
			out = append(out, s[i])
		}
	}
	return out
}
