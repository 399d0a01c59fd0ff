package offheap

import (
	"slices"
	"sync"
)

// Making a region (open, fallocate, mmap) costs tens of microseconds, up to milliseconds on a
// busy disk, and a Queue asks for one each time a chunk fills: on its goroutine that would be a
// stall in its deliveries. So each scratch directory keeps one region made ahead for each of the last
// maxSpares sizes asked for (in a filling queue: a record chunk and an ordered-index chunk), made
// by a goroutine of its own after each is taken; a Queue makes one itself only when none is
// ready (the first of a size, or two asked for faster than the maker makes them). A region made
// ahead is untouched, so it costs its disk space and a mapping but no memory; it is not in the
// sweep registry nor in Stats until taken. The maker makes nothing after a failure (a full
// disk, the mapping share) until a region is asked for again, so it never spins.
const maxSpares = 2

type spares struct {
	make func(n int) ([]byte, error) // the scratch directory's makeRegion
	give func(b []byte)              // the unmapper's give

	mu     sync.Mutex
	cond   sync.Cond      // signalled when asked, busy or closed change
	sizes  []int          // the sizes asked for, least recently first (at most maxSpares)
	ready  map[int][]byte // the region made ahead for each size, where there is one
	asked  bool           // a size was asked for since the maker last looked
	busy   bool           // the maker is making regions
	closed bool
	done   chan struct{} // closed when the maker has returned
}

func startSpares(mk func(n int) ([]byte, error), give func(b []byte)) *spares {
	p := &spares{make: mk, give: give, ready: make(map[int][]byte, maxSpares), done: make(chan struct{})}
	p.cond.L = &p.mu
	go p.loop()
	return p
}

// take returns the region of n bytes made ahead, or nil if none is ready, and has the maker make
// the next one.
func (p *spares) take(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	b := p.ready[n]
	delete(p.ready, n)
	if i := slices.Index(p.sizes, n); i >= 0 {
		p.sizes = slices.Delete(p.sizes, i, i+1)
	}
	p.sizes = append(p.sizes, n)
	if len(p.sizes) > maxSpares {
		old := p.sizes[0]
		p.sizes = slices.Delete(p.sizes, 0, 1)
		if r := p.ready[old]; r != nil {
			delete(p.ready, old)
			p.give(r)
		}
	}
	p.asked = true
	p.cond.Broadcast()
	return b
}

func (p *spares) loop() {
	defer close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.asked && !p.closed {
			p.cond.Wait()
		}
		if p.closed {
			return
		}
		p.asked, p.busy = false, true
		for _, n := range slices.Clone(p.sizes) {
			if p.ready[n] != nil {
				continue
			}
			p.mu.Unlock()
			b, err := p.make(n)
			p.mu.Lock()
			if err != nil {
				break
			}
			if p.closed {
				p.give(b)
				break
			}
			if !slices.Contains(p.sizes, n) {
				p.give(b) // pushed out by other sizes meanwhile
				continue
			}
			p.ready[n] = b
		}
		p.busy = false
		p.cond.Broadcast()
	}
}

// wait returns once the maker has made what was asked for so far (or failed to); for tests.
func (p *spares) wait() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for (p.asked || p.busy) && !p.closed {
		p.cond.Wait()
	}
}

// count returns how many regions are made ahead now.
func (p *spares) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ready)
}

// close stops the maker and gives back the regions made ahead.
func (p *spares) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, b := range p.ready {
		delete(p.ready, n)
		p.give(b)
	}
}
