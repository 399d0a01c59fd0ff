package chaos

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// sim is a model broker driven by simulated clients, producing histories for the checker's
// tests. Its broker applies each operation at one step between the operation's invocation and
// its answer. With commitLag false it commits what it applies at once (a correct broker); with
// commitLag true it answers before committing (commits only now and then), and a crash rolls
// its state back to the last commit: the broker that acknowledges before the commit.
type sim struct {
	rng       *rand.Rand
	commitLag bool
	now       time.Duration
	rec       []Op
	nextID    int

	live        map[string]*simMsg // value -> stored message
	durable     map[string]string  // committed: value -> ID
	pending     []func()           // applied to durable at the next commit (commitLag)
	clients     []*simClient
	uncommitted map[string]bool // values with an applied enqueue or ack not yet committed
	rolled      map[string]bool // values whose applied enqueue or ack a crash rolled back
	enqueued    int
	maxValues   int

	// A grouped queue with deduplication (newGroupedSim): each message is in one of a few
	// ordering groups, delivered one at a time in the order applied; producers repeat an
	// enqueue now and then with its idempotency key, which the broker answers with the first ID.
	grouped bool
	order   map[string][]string // group -> its stored values in enqueue order
	dedup   map[string]string   // idempotency key -> the ID it was first answered with
}

type simMsg struct {
	id     string
	leased bool
	group  string
}

type simClient struct {
	id       int
	producer bool
	op       *Op // in flight
	applied  bool
	held     *Op // a delivery to ack next
	n        int
	last     *Op // the last enqueue, to repeat (grouped)
}

func newSim(seed uint64, commitLag bool) *sim {
	s := &sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), commitLag: commitLag,
		live: map[string]*simMsg{}, durable: map[string]string{}, rolled: map[string]bool{}, uncommitted: map[string]bool{}}
	s.maxValues = 20 + s.rng.IntN(60)
	for i := range 2 + s.rng.IntN(4) {
		s.clients = append(s.clients, &simClient{id: i, producer: i%2 == 0})
	}
	return s
}

// newGroupedSim is a correct broker of a grouped queue with deduplication.
func newGroupedSim(seed uint64) *sim {
	s := newSim(seed, false)
	s.grouped, s.order, s.dedup = true, map[string][]string{}, map[string]string{}
	return s
}

// deliverable reports whether v may be delivered: not leased, and (grouped) the head of its
// group, which no lease of an earlier message holds.
func (s *sim) deliverable(v string, m *simMsg) bool {
	if m.leased {
		return false
	}
	return !s.grouped || s.order[m.group][0] == v
}

// stored takes v's message off its group when it is acked.
func (s *sim) unorder(v string, m *simMsg) {
	if s.grouped {
		o := s.order[m.group]
		for i := range o {
			if o[i] == v {
				s.order[m.group] = append(o[:i:i], o[i+1:]...)
				break
			}
		}
	}
}

// nextEnqueue is a producer's next enqueue: a new value, or (grouped, now and then) its last
// enqueue again.
func (s *sim) nextEnqueue(c *simClient) *Op {
	if s.grouped && c.last != nil && s.chance(0.3) {
		op := *c.last
		op.Outcome, op.ID, op.Err, op.Complete, op.Invoke = 0, "", "", 0, s.tick()
		return &op
	}
	s.enqueued++
	c.n++
	op := &Op{Client: c.id, Kind: Enqueue, Value: fmt.Sprintf("c%d-%d", c.id, c.n), Invoke: s.tick()}
	if s.grouped {
		op.Group, op.Seq, op.Key = fmt.Sprintf("g%d", s.rng.IntN(3)), c.n, op.Value
		c.last = op
	}
	return op
}

func (s *sim) tick() time.Duration { s.now += time.Millisecond; return s.now }

func (s *sim) chance(p float64) bool { return s.rng.Float64() < p }

// effect applies f to the durable state now, or at the next commit.
func (s *sim) effect(value string, f func()) {
	if !s.commitLag {
		f()
		return
	}
	s.pending = append(s.pending, func() { f() })
	s.uncommitted[value] = true
}

func (s *sim) commit() {
	for _, f := range s.pending {
		f()
	}
	s.pending = nil
	clear(s.uncommitted)
}

func (s *sim) crash() {
	start := s.tick()
	for v := range s.uncommitted {
		s.rolled[v] = true
	}
	clear(s.uncommitted)
	s.pending = nil
	old := s.live
	s.live = map[string]*simMsg{}
	for v, id := range s.durable {
		m := &simMsg{id: id}
		if o := old[v]; o != nil {
			m.group = o.group
		}
		s.live[v] = m
	}
	for _, c := range s.clients {
		if c.op != nil {
			c.op.Outcome, c.op.Complete, c.op.Err = Unknown, s.tick(), "connection lost"
			s.rec = append(s.rec, *c.op)
			c.op = nil
		}
	}
	s.rec = append(s.rec, Op{Client: -1, Kind: Fault, Value: "crash", Outcome: Ok, Invoke: start, Complete: s.tick()})
}

// step advances one client, or the broker (a lease expiring, a commit, a crash).
func (s *sim) step() {
	switch {
	case s.commitLag && s.chance(0.15):
		s.commit()
		return
	case s.chance(0.01):
		s.crash()
		return
	case s.chance(0.03):
		for _, m := range s.live {
			if m.leased {
				m.leased = false // the lease ran out: deliverable again
				break
			}
		}
		return
	}
	c := s.clients[s.rng.IntN(len(s.clients))]
	switch {
	case c.op == nil && c.producer:
		if s.enqueued >= s.maxValues {
			return
		}
		c.op = s.nextEnqueue(c)
		c.applied = false
	case c.op == nil && c.held != nil:
		c.op = &Op{Client: c.id, Kind: Ack, Value: c.held.Value, ID: c.held.ID, Invoke: s.tick()}
		c.held, c.applied = nil, false
	case c.op == nil:
		for v, m := range s.live {
			if s.deliverable(v, m) {
				m.leased = true
				d := Op{Client: c.id, Kind: Deliver, Value: v, ID: m.id, Outcome: Ok, Invoke: s.tick()}
				d.Complete = d.Invoke
				s.rec = append(s.rec, d)
				c.held = &d
				break
			}
		}
	case !c.applied && s.chance(0.05):
		c.op.Outcome, c.op.Complete, c.op.Err = Unknown, s.tick(), "timeout"
		s.finish(c)
	case !c.applied:
		s.apply(c)
	default:
		c.op.Complete = s.tick()
		if c.op.Outcome == Ok && s.chance(0.05) {
			c.op.Outcome, c.op.ID, c.op.Err = Unknown, "", "connection lost"
		}
		s.finish(c)
	}
}

func (s *sim) apply(c *simClient) {
	op := c.op
	c.applied = true
	s.tick()
	switch op.Kind {
	case Enqueue:
		if s.chance(0.05) {
			op.Outcome, op.Err = Fail, "StorageError"
			return
		}
		if id, ok := s.dedup[op.Key]; ok && op.Key != "" {
			op.Outcome, op.ID = Ok, id // a repeat: the first message's ID, nothing stored
			return
		}
		s.nextID++
		id := fmt.Sprintf("m%d", s.nextID)
		s.live[op.Value] = &simMsg{id: id, group: op.Group}
		if s.grouped {
			s.order[op.Group] = append(s.order[op.Group], op.Value)
			s.dedup[op.Key] = id
		}
		v := op.Value
		s.effect(v, func() { s.durable[v] = id })
		op.Outcome, op.ID = Ok, id
	case Ack:
		if _, ok := s.live[op.Value]; !ok {
			op.Outcome, op.Err = Fail, "MessageNotFound"
			return
		}
		s.unorder(op.Value, s.live[op.Value])
		delete(s.live, op.Value)
		v := op.Value
		s.effect(v, func() { delete(s.durable, v) })
		op.Outcome = Ok
	}
}

// drained records the final drain's delivery of v.
func (s *sim) drained(v, id string) {
	d := Op{Client: 99, Kind: Deliver, Value: v, ID: id, Outcome: Ok, Invoke: s.tick(), Final: true}
	d.Complete = d.Invoke
	s.rec = append(s.rec, d)
}

func (s *sim) finish(c *simClient) {
	s.rec = append(s.rec, *c.op)
	c.op = nil
}

// run simulates steps, then lets every client finish, crashes once more (a committed broker
// loses nothing by it) and drains the queue as the final drain does.
func (s *sim) run(steps int) []Op {
	for range steps {
		s.step()
	}
	for _, c := range s.clients {
		for c.op != nil {
			if !c.applied {
				s.apply(c)
			}
			c.op.Complete = s.tick()
			s.finish(c)
		}
	}
	if s.chance(0.5) {
		s.crash()
	}
	start := s.tick()
	for v, m := range s.live {
		if !s.grouped {
			s.drained(v, m.id)
		}
	}
	for g := range 3 { // a grouped queue's messages in their groups' order
		for _, v := range s.order[fmt.Sprintf("g%d", g)] {
			s.drained(v, s.live[v].id)
		}
	}
	s.rec = append(s.rec, Op{Client: 99, Kind: Drained, Outcome: Ok, Invoke: start, Complete: s.tick()})
	return s.rec
}
