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
	// delivered holds each bucket's delivery times, in the order made (non-decreasing).
	delivered map[string][]int64
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
	s := &sim{rnd: rnd, cfg: cfg, limits: limits, epoch: 1, delivered: map[string][]int64{}}
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
			s.send(msg{to: m.from, grant: s.owner.Serve(s.now, *m.req)})
		default:
			s.owner.Settle(s.now, m.rb, m.rets)
		}
	}
}

// tryBorrower is a delivery attempt by borrower i on bucket k at now.
func (s *sim) tryBorrower(i int, k string) bool {
	ok, req, _ := s.borrows[i].Spend(s.now, k)
	if req != nil {
		s.send(msg{to: -1, req: req, from: i})
	}
	if ok {
		s.delivered[k] = append(s.delivered[k], s.now)
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
		s.delivered[k] = append(s.delivered[k], s.now)
	}
	return ok
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

// twinCheck replays bucket k's deliveries on a naive single-node twin: a list of every delivery
// time, a delivery allowed when fewer than Max earlier ones lie in (t−W, t] for every limit. It
// reports the first delivery the twin would not have allowed.
func twinCheck(limits []throttle.Limit, times []int64) error {
	var twin []int64
	for idx, t := range times {
		for _, l := range limits {
			var in uint64
			for _, u := range twin {
				if u > t-l.Span() {
					in++
				}
			}
			if in >= l.Max {
				return fmt.Errorf("delivery %d at %d: the twin counts %d in (%d, %d] under %v", idx, t, in, t-l.Span(), t, l)
			}
		}
		twin = append(twin, t)
	}
	return nil
}

// windowCheck is an independent check over all delivery times: for every limit, the largest
// number of deliveries in any window of W (two pointers over the sorted times) is at most Max.
func windowCheck(limits []throttle.Limit, times []int64) error {
	ts := slices.Clone(times)
	slices.Sort(ts)
	for _, l := range limits {
		lo := 0
		for hi := range ts {
			for ts[lo] <= ts[hi]-l.Span() {
				lo++
			}
			if n := uint64(hi - lo + 1); n > l.Max {
				return fmt.Errorf("%d deliveries in the window (%d, %d] under %v", n, ts[hi]-l.Span(), ts[hi], l)
			}
		}
	}
	return nil
}
