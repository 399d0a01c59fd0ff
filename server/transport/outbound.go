package transport

import (
	"net"
	"sync"
	"time"
)

// outbound is a connection's bounded write queue. Producers (the reader goroutine, queue actors)
// append encoded frames without blocking; one writer goroutine takes everything queued and writes
// it with one writev, under a deadline, with no lock held during I/O. A connection whose queue
// exceeds its byte limit is too slow to keep: push reports false and the connection is closed.
type outbound struct {
	mu      sync.Mutex
	items   [][]byte
	notify  []func()
	bytes   int
	limit   int
	closed  bool
	flushed chan struct{} // closed when the writer has written everything after close
	signal  chan struct{}
}

func newOutbound(limit int) *outbound {
	return &outbound{limit: limit, signal: make(chan struct{}, 1), flushed: make(chan struct{})}
}

// push queues a frame; onWritten (may be nil) runs after it reaches the socket. It reports
// whether the frame was queued, and whether it was refused because the queue is over its limit.
func (o *outbound) push(frame []byte, onWritten func()) (ok, overflow bool) {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false, false
	}
	if o.bytes+len(frame) > o.limit {
		o.closed = true
		o.mu.Unlock()
		return false, true
	}
	o.items = append(o.items, frame)
	o.bytes += len(frame)
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

// run writes queued frames to c until close, a write error or an expired deadline.
func (o *outbound) run(c net.Conn, writeTimeout time.Duration) error {
	defer close(o.flushed)
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
		o.bytes = 0
		o.mu.Unlock()

		_ = c.SetWriteDeadline(time.Now().Add(writeTimeout))
		bufs := net.Buffers(items)
		if _, err := bufs.WriteTo(c); err != nil {
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
	}
}
