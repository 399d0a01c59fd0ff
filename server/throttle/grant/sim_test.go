package grant

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/filamq/fila/server/throttle"
)

// sim is a cluster for the protocol: one owner (crashing and replaced at will), borrowers on other
// nodes, a network that delays, reorders and loses messages, and one clock every node reads
// (injected: sim.now). It records every delivery.
type sim struct {
	rnd      *rand.Rand
	cfg      Config
	limits   []throttle.Limit
	now      int64
	owner    *Owner // nil while down
	epoch    uint64
	upAt     int64 // when a down owner's replacement takes over
	downAt   int64
	borrows  []*Borrower
	inflight []msg
	// network: delay in [0, maxDelay] ms, loss probability
	maxDelay int64
	loss     float64
	// delivered holds each bucket's deliveries, in the order made (times non-decreasing).
	delivered map[string][]delivery
	issued    map[GrantID]issue
	issues    int // issues so far
}

// delivery is one delivery: its time, and when its token was issued with the limits effective
// then (the owner admits a token under the limits it knows when it issues it).
type delivery struct {
	at     int64
	issued int // the issue's place in the owners' order of issues
	lims   []throttle.Limit
}

// issue is the place of a grant in the order of issues, and the limits it was issued under.
type issue struct {
	seq  int
	lims []throttle.Limit
}

// times are the deliveries' times.
func times(ds []delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.at
	}
	return out
}

// msg is a message in flight: to the owner (req or rets) or to borrower `to` (grant).
type msg struct {
	at    int64
	to    int // -1: the owner
	req   *Request
	rets  []Return
	rb    string // bucket of rets
	grant Grant
	from  int
}

func newSim(rnd *rand.Rand, cfg Config, limits []throttle.Limit, borrowers int) *sim {
	s := &sim{rnd: rnd, cfg: cfg, limits: limits, epoch: 1, delivered: map[string][]delivery{}, issued: map[GrantID]issue{}}
	o, err := NewOwner(cfg, limits, 1)
	if err != nil {
		panic(err)
	}
	s.owner = o
	for range borrowers {
		s.borrows = append(s.borrows, NewBorrower(cfg))
	}
	return s
}

func (s *sim) send(m msg) {
	if s.loss > 0 && s.rnd.Float64() < s.loss {
		return
	}
	m.at = s.now
	if s.maxDelay > 0 {
		m.at += s.rnd.Int64N(s.maxDelay + 1)
	}
	s.inflight = append(s.inflight, m)
}

// deliverDue hands every message due by now to its node, in random order.
func (s *sim) deliverDue() {
	var due, later []msg
	for _, m := range s.inflight {
		if m.at <= s.now {
			due = append(due, m)
		} else {
			later = append(later, m)
		}
	}
	s.inflight = later
	s.rnd.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, m := range due {
		switch {
		case m.to >= 0:
			s.borrows[m.to].Granted(s.now, m.grant)
		case s.owner == nil:
			// the owner is down: lost
		case m.req != nil:
			g := s.owner.Serve(s.now, *m.req)
			if g.N > 0 {
				s.issues++
				s.issued[g.ID] = issue{s.issues, s.limits}
			}
			s.send(msg{to: m.from, grant: g})
		default:
			s.owner.Settle(s.now, m.rb, m.rets)
		}
	}
}

// tryBorrower is a delivery attempt by borrower i on bucket k at now.
func (s *sim) tryBorrower(i int, k string) bool {
	ok, id, req, _ := s.borrows[i].spend(s.now, k)
	if req != nil {
		s.send(msg{to: -1, req: req, from: i})
	}
	if ok {
		is := s.issued[id]
		s.delivered[k] = append(s.delivered[k], delivery{s.now, is.seq, is.lims})
	}
	return ok
}

// tryOwner is a delivery attempt by the owner's own node.
func (s *sim) tryOwner(k string) bool {
	if s.owner == nil {
		return false
	}
	ok, _ := s.owner.Take(s.now, k)
	if ok {
		s.issues++
		s.delivered[k] = append(s.delivered[k], delivery{s.now, s.issues, s.limits})
	}
	return ok
}

// setLimits changes the effective limits (declarations came and went) at now.
func (s *sim) setLimits(ls []throttle.Limit) {
	s.limits = ls
	if s.owner != nil {
		if err := s.owner.SetLimits(ls); err != nil {
			panic(err)
		}
	}
}

// crash ends the owner at now; its replacement takes over after down ms, from the crash on.
func (s *sim) crash(down int64) {
	if s.owner == nil {
		return
	}
	s.owner, s.downAt, s.upAt = nil, s.now, s.now+down
}

func (s *sim) tick() {
	if s.owner == nil && s.now >= s.upAt {
		s.epoch++
		o, err := TakeOver(s.cfg, s.limits, s.epoch, s.downAt)
		if err != nil {
			panic(err)
		}
		s.owner = o
	}
	s.deliverDue()
}

// twinCheck replays bucket's deliveries on a naive single-node twin: a list of every delivery
// time. A delivery at t is allowed when fewer than Max earlier deliveries lie in (t−W, t] for
// every limit the window is held to: a limit binds a window when it was effective at the last
// issue of the window's tokens (a limit declared later binds the tokens issued after it; those
// already granted were admitted under the limits before). It reports the first delivery the
// twin would not have allowed.
func twinCheck(ds []delivery) error {
	seen := map[throttle.Limit]bool{}
	for idx, d := range ds {
		for _, l := range d.lims {
			seen[l] = true
		}
		for l := range seen {
			var in uint64
			latest := d
			for _, u := range ds[:idx] {
				if u.at > d.at-l.Span() {
					in++
					if u.issued > latest.issued {
						latest = u
					}
				}
			}
			if in >= l.Max && slices.Contains(latest.lims, l) {
				return fmt.Errorf("delivery %d at %d (issued %d): the twin counts %d in (%d, %d] under %v", idx, d.at, d.issued, in, d.at-l.Span(), d.at, l)
			}
		}
	}
	return nil
}

// windowCheck is an independent check over every window: for each limit, a window of W ending
// at a delivery holds at most Max deliveries when the limit was effective at the latest issue
// of the window's tokens (two pointers per limit over the deliveries, in time order).
func windowCheck(ds []delivery) error {
	seen := map[throttle.Limit]bool{}
	for _, d := range ds {
		for _, l := range d.lims {
			seen[l] = true
		}
	}
	for l := range seen {
		lo := 0
		for hi := range ds {
			for ds[lo].at <= ds[hi].at-l.Span() {
				lo++
			}
			latest := ds[lo]
			for _, u := range ds[lo : hi+1] {
				if u.issued > latest.issued {
					latest = u
				}
			}
			if n := uint64(hi - lo + 1); n > l.Max && slices.Contains(latest.lims, l) {
				return fmt.Errorf("%d deliveries in the window (%d, %d] under %v: %+v", n, ds[hi].at-l.Span(), ds[hi].at, l, ds[lo:hi+1])
			}
		}
	}
	return nil
}
