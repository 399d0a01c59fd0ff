package grant

// Borrower is a queue leader's side for one throttle's buckets on a node that does not own it:
// the tokens it was granted, spent on deliveries. It is not safe for concurrent use.
//
// Its caller sends each Request Spend or Flush gives it to the owner, hands each Grant that
// comes back to Granted, and sends the Returns Flush gives it (or lets the next Request carry
// them).
type Borrower struct {
	cfg     Config
	buckets map[string]*cache
	seq     uint64
	sweepAt int // bucket count at which the next new bucket sweeps the idle ones
}

// NewBorrower is a borrower holding no token, under the owners' Config.
func NewBorrower(cfg Config) *Borrower { return &Borrower{cfg: cfg, buckets: map[string]*cache{}} }

// cache is one bucket's granted tokens.
type cache struct {
	held    []held
	returns []Return // settled grants not yet sent
	batch   uint64   // tokens the next Request asks for
	// pending is the Request out (pendingSeq ≠ 0), sent at pendingAt.
	pendingSeq uint64
	pendingAt  int64
	retryAt    int64 // the owner said to ask again then
	lease      int64 // Config.LeaseMs
}

type held struct {
	id       GrantID
	left     uint64
	n        uint64
	sentAt   int64
	deadline int64 // last time a token may be spent: the Request's SentAt + LeaseMs
}

// MaxBatch bounds what a borrower asks for at once (the owner bounds it further).
const MaxBatch = 1 << 16

func (b *Borrower) cache(k string) *cache {
	c := b.buckets[k]
	if c == nil {
		if len(b.buckets) >= b.sweepAt {
			b.sweep() // amortized: the buckets at most double between sweeps
			b.sweepAt = max(64, 2*len(b.buckets))
		}
		c = &cache{batch: 1, lease: b.cfg.LeaseMs}
		b.buckets[k] = c
	}
	return c
}

// sweep forgets the buckets that hold nothing: no token, no settlement to send, no request out
// and no word from the owner to wait for (their batch size starts over).
func (b *Borrower) sweep() {
	for k, c := range b.buckets {
		if len(c.held) == 0 && len(c.returns) == 0 && c.pendingSeq == 0 && c.retryAt == 0 {
			delete(b.buckets, k)
		}
	}
}

// Spend spends one token of bucket on a delivery at now if the borrower holds one it may still
// spend. Otherwise ok is false, and req is the Request to send now (nil when one is already out
// or the owner said to wait: retryAt then, or 0 until a Grant arrives).
func (b *Borrower) Spend(now int64, bucket string) (ok bool, req *Request, retryAt int64) {
	ok, _, req, retryAt = b.spend(now, bucket)
	return ok, req, retryAt
}

// spend is Spend, and the grant the token was of.
func (b *Borrower) spend(now int64, bucket string) (ok bool, id GrantID, req *Request, retryAt int64) {
	c := b.cache(bucket)
	c.expire(now)
	for i := range c.held {
		h := &c.held[i]
		if h.left == 0 || now > h.deadline {
			continue
		}
		h.left--
		id = h.id
		if h.left == 0 {
			c.finish(i, now)
		}
		return true, id, nil, 0
	}
	if c.pendingSeq != 0 {
		return false, id, nil, 0
	}
	if now < c.retryAt {
		return false, id, nil, c.retryAt
	}
	c.retryAt = 0
	b.seq++
	c.pendingSeq, c.pendingAt = b.seq, now
	r := &Request{Bucket: bucket, Seq: b.seq, SentAt: now, Want: c.batch, Returns: c.returns}
	c.returns = nil
	return false, id, r, 0
}

// finish settles held grant i, used up at now: a grant used within half its lease asks for
// twice as many next time.
func (c *cache) finish(i int, now int64) {
	h := c.held[i]
	c.returns = append(c.returns, Return{ID: h.id})
	if now-h.sentAt <= (h.deadline-h.sentAt)/2 {
		c.batch = min(MaxBatch, max(c.batch, h.n)*2)
	}
	c.held = append(c.held[:i], c.held[i+1:]...)
}

// expire drops the grants whose deadline passed before now, returning their unspent tokens;
// a grant that expired unspent halves the batch. A Request out for longer than a lease is
// given up (its Grant, if it comes, is returned whole).
func (c *cache) expire(now int64) {
	kept := c.held[:0]
	for _, h := range c.held {
		if now <= h.deadline {
			kept = append(kept, h)
			continue
		}
		c.returns = append(c.returns, Return{ID: h.id, Unspent: h.left})
		if h.left > 0 {
			c.batch = max(1, c.batch/2)
		}
	}
	c.held = kept
	if c.pendingSeq != 0 && now > c.pendingAt+c.lease {
		c.pendingSeq = 0 // its Grant, were it to come, could no longer be spent
	}
}

// Granted takes a Grant arriving at now. A Grant of N = 0 sets when to ask again; one answering
// a Request the borrower gave up is returned whole.
func (b *Borrower) Granted(now int64, g Grant) {
	c := b.cache(g.Bucket)
	if g.ReqSeq != c.pendingSeq || c.pendingSeq == 0 {
		if g.N > 0 {
			c.returns = append(c.returns, Return{ID: g.ID, Unspent: g.N})
		}
		return
	}
	c.pendingSeq = 0
	if g.N == 0 {
		c.retryAt = g.RetryAt
		return
	}
	c.retryAt = 0
	c.held = append(c.held, held{id: g.ID, left: g.N, n: g.N, sentAt: c.pendingAt, deadline: c.pendingAt + g.LeaseMs})
	c.expire(now)
}

// Flush gives back the unspent tokens of bucket (a subscription ended, or the leader stops
// delivering), and returns every settlement not yet sent. The Returns go to the owner on their
// own (Owner.Settle).
func (b *Borrower) Flush(now int64, bucket string, giveBack bool) []Return {
	c := b.cache(bucket)
	c.expire(now)
	if giveBack {
		for _, h := range c.held {
			c.returns = append(c.returns, Return{ID: h.id, Unspent: h.left})
		}
		c.held = nil
	}
	r := c.returns
	c.returns = nil
	return r
}

// Held is how many tokens of bucket the borrower may still spend at now.
func (b *Borrower) Held(now int64, bucket string) uint64 {
	c := b.cache(bucket)
	c.expire(now)
	var n uint64
	for _, h := range c.held {
		n += h.left
	}
	return n
}
