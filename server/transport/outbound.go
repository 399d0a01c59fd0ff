package transport

import (
	"net"
	"sync"
	"time"

	"github.com/filamq/fila/server/membudget"
)

// Memory one queued frame costs beyond its bytes: its slot in the queue (a slice header, twice
// over while the queue grows by doubling) and allocation rounding; a write notification adds its
// slot and its closure.
const (
	queuedFrameOverhead  = 64
	queuedNotifyOverhead = 64
	// keptQueueSlots bounds the queue slices kept between bursts.
	keptQueueSlots = 4096
)

// outbound is a connection's bounded write queue. Producers (the reader goroutine, queue actors)
// append encoded frames without blocking; one writer goroutine takes everything queued and writes
// it with one writev, under a deadline, with no lock held during I/O. Queued frames are counted in
// memory (bytes and per-frame overhead), against the queue's limit and the connection's Account;
// a connection that passes either is too slow to keep: push reports overflow and the connection
// is closed.
type outbound struct {
	mu      sync.Mutex
	items   [][]byte
	notify  []func()
	bytes   int // memory of the queued frames
	limit   int
	acct    *membudget.Account
	closed  bool
	flushed chan struct{} // closed when the writer has written everything after close
	signal  chan struct{}
}

func newOutbound(limit int, acct *membudget.Account) *outbound {
	return &outbound{limit: limit, acct: acct, signal: make(chan struct{}, 1), flushed: make(chan struct{})}
}

// frameMemory is what a queued frame costs.
func frameMemory(frame []byte, onWritten func()) int {
	n := cap(frame) + queuedFrameOverhead
	if onWritten != nil {
		n += queuedNotifyOverhead
	}
	return n
}

// push queues a frame; onWritten (may be nil) runs after it reaches the socket. It reports
// whether the frame was queued, and whether it was refused because the queue is over its limit.
func (o *outbound) push(frame []byte, onWritten func()) (ok, overflow bool) {
	mem := frameMemory(frame, onWritten)
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false, false
	}
	if o.bytes+mem > o.limit || o.acct.Hold(int64(mem)) != nil {
		o.closed = true
		o.mu.Unlock()
		return false, true
	}
	o.items = append(o.items, frame)
	o.bytes += mem
	if onWritten != nil {
		o.notify = append(o.notify, onWritten)
	}
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
	return true, false
}

// close stops accepting frames; the writer finishes what is queued, then exits.
func (o *outbound) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
}

// run writes queued frames to c until close, a write error or an expired deadline. Frames still
// queued when it returns are dropped and their memory released.
func (o *outbound) run(c net.Conn, writeTimeout time.Duration) error {
	defer close(o.flushed)
	defer o.drop()
	var items [][]byte
	var notify []func()
	for {
		o.mu.Lock()
		for len(o.items) == 0 && !o.closed {
			o.mu.Unlock()
			<-o.signal
			o.mu.Lock()
		}
		if len(o.items) == 0 && o.closed {
			o.mu.Unlock()
			return nil
		}
		items, o.items = o.items, items[:0]
		notify, o.notify = o.notify, notify[:0]
		mem := o.bytes
		o.bytes = 0
		o.mu.Unlock()

		_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		bufs := net.Buffers(items)
		_, err := bufs.WriteTo(c)
		o.acct.Release(int64(mem))
		if err != nil {
			o.mu.Lock()
			o.closed = true
			o.mu.Unlock()
			return err
		}
		for _, f := range notify {
			f()
		}
		clear(items)
		items = items[:0]
		clear(notify)
		notify = notify[:0]
		if cap(items) > keptQueueSlots {
			items = nil
		}
		if cap(notify) > keptQueueSlots {
			notify = nil
		}
	}
}

// drop discards what is still queued.
func (o *outbound) drop() {
	o.mu.Lock()
	o.closed = true
	mem := o.bytes
	o.items, o.notify, o.bytes = nil, nil, 0
	o.mu.Unlock()
	o.acct.Release(int64(mem))
}
