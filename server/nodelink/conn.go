package nodelink

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/meta"
)

// conn is the connection to one peer: a reader (this goroutine of run) and a writer that
// flushes what every sender appended since its last write, in one write. A frame sent lazily
// does not wake the writer: it goes with the next frame that does, or lazyDelay after it was
// appended.
type conn struct {
	l    *Link
	peer meta.NodeID
	nc   net.Conn
	fr   *wire.FrameReader

	wmu    sync.Mutex
	wbuf   []byte // frames appended, not written yet
	spare  []byte
	wake   chan struct{}
	lazy   *time.Timer // wakes the writer for lazy frames; armed while one waits alone
	armed  bool
	delay  time.Duration // lazyDelay (tests set their own)
	closed bool
	err    error // why it closed
	done   chan struct{}

	// heard is when the last frame arrived (Unix nanoseconds; Link.Heard).
	heard atomic.Int64

	mu      sync.Mutex
	nextID  uint32
	pending map[uint32]func(op cluster.Opcode, body []byte, err error) // this node's requests, by ID
	inSnaps map[uint32]*snapReader                                     // the peer's snapshots being received
	outSnap map[uint32]*snapWriter                                     // this node's snapshots being sent
}

const maxSpare = 1 << 20 // a write buffer kept for the next write is at most this large

// lazyDelay is how long a lazy frame waits for a frame that wakes the writer. Heartbeats and
// their answers are lazy: a leader sends each follower of each awake group one every tenth to
// fifth of a second, and 300 idle groups on three nodes, each heartbeat in a write of its own and
// a read on the other side, took 19.6 % of a core; written a few at a time, 15.2 %
// (docs/benchmarks.md, Run AN). Against a heartbeat timeout of half a second and more, 5 ms
// either way is immaterial.
const lazyDelay = 5 * time.Millisecond

func newConn(l *Link, peer meta.NodeID, nc net.Conn) *conn {
	return &conn{l: l, peer: peer, nc: nc, fr: wire.NewFrameReader(nc, cluster.MinFrameSize, l.cfg.MaxFrame),
		wake: make(chan struct{}, 1), done: make(chan struct{}), delay: lazyDelay,
		pending: map[uint32]func(cluster.Opcode, []byte, error){}, inSnaps: map[uint32]*snapReader{},
		outSnap: map[uint32]*snapWriter{}}
}

// run serves the connection until it breaks.
func (c *conn) run() {
	var wg sync.WaitGroup
	wg.Go(c.writeLoop)
	err := c.readLoop()
	c.close(err)
	wg.Wait()
	c.l.detach(c)
}

// send appends a frame for the writer and wakes it. It fails only when the connection is closed.
func (c *conn) send(flags cluster.FrameFlags, id uint32, fr cluster.Frame) error {
	return c.post(flags, id, fr, false)
}

// sendLazy appends a frame for the writer without waking it (lazyDelay).
func (c *conn) sendLazy(flags cluster.FrameFlags, id uint32, fr cluster.Frame) error {
	return c.post(flags, id, fr, true)
}

func (c *conn) post(flags cluster.FrameFlags, id uint32, fr cluster.Frame, lazy bool) error {
	c.wmu.Lock()
	if c.closed {
		err := c.err
		c.wmu.Unlock()
		return err
	}
	c.wbuf = cluster.AppendFrame(c.wbuf, flags, id, fr)
	if lazy && !c.armed {
		c.armed = true
		if c.lazy == nil {
			c.lazy = time.AfterFunc(c.delay, c.wakeWriter)
		} else {
			c.lazy.Reset(c.delay)
		}
	}
	c.wmu.Unlock()
	c.l.stats.FramesSent.Add(1)
	if !lazy {
		c.wakeWriter()
	}
	return nil
}

func (c *conn) wakeWriter() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *conn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		buf := c.wbuf
		if len(buf) == 0 { // woken for frames an earlier turn wrote: both buffers stay
			c.wmu.Unlock()
			continue
		}
		c.wbuf = c.spare[:0]
		c.spare = nil
		if c.armed { // the lazy frames go now
			c.armed = false
			c.lazy.Stop()
		}
		c.wmu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.l.cfg.Timeout))
		n, err := c.nc.Write(buf)
		c.l.stats.BytesSent.Add(uint64(n))
		if err != nil {
			c.close(fmt.Errorf("nodelink: write to %s: %w", c.peer, err))
			return
		}
		if cap(buf) <= maxSpare {
			c.wmu.Lock()
			c.spare = buf[:0]
			c.wmu.Unlock()
		}
	}
}

// close closes the connection once and fails what waits on it.
func (c *conn) close(why error) {
	c.wmu.Lock()
	if c.closed {
		c.wmu.Unlock()
		return
	}
	if why == nil {
		why = errors.New("nodelink: connection closed")
	}
	c.closed, c.err = true, fmt.Errorf("%w: %s: %v", ErrUnreachable, c.peer, why)
	if c.lazy != nil {
		c.lazy.Stop()
	}
	close(c.done)
	c.wmu.Unlock()
	_ = c.nc.Close()
	c.mu.Lock()
	pending, in, out := c.pending, c.inSnaps, c.outSnap
	c.pending, c.inSnaps, c.outSnap = map[uint32]func(cluster.Opcode, []byte, error){}, map[uint32]*snapReader{}, map[uint32]*snapWriter{}
	c.mu.Unlock()
	for _, f := range pending {
		f(0, nil, c.err)
	}
	for _, r := range in {
		r.fail(c.err)
	}
	for _, w := range out {
		w.fail(c.err)
	}
}

// call sends a request and has onAnswer called (on the reader's goroutine: it must not block,
// and body is valid only during the call) with its answer, or with the error that ends it.
func (c *conn) call(fr cluster.Frame, onAnswer func(op cluster.Opcode, body []byte, err error)) (uint32, error) {
	return c.request(fr, false, onAnswer)
}

// request is call, the frame sent lazily when lazy is set.
func (c *conn) request(fr cluster.Frame, lazy bool, onAnswer func(op cluster.Opcode, body []byte, err error)) (uint32, error) {
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		return 0, c.closedErr()
	}
	c.nextID++
	for c.nextID == 0 || c.pending[c.nextID] != nil {
		c.nextID++
	}
	id := c.nextID
	c.pending[id] = onAnswer
	c.mu.Unlock()
	if err := c.post(0, id, fr, lazy); err != nil {
		c.forget(id)
		return 0, err
	}
	return id, nil
}

// forget drops a request nobody waits for any longer (its answer, if any, is ignored).
func (c *conn) forget(id uint32) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *conn) closedErr() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.err
}

// roundTrip sends a request and waits for its answer, at most timeout; decode reads it.
func (c *conn) roundTrip(fr cluster.Frame, timeout time.Duration, decode func(op cluster.Opcode, body []byte) error) error {
	return c.roundTripAs(fr, false, timeout, decode)
}

// roundTripAs is roundTrip, the request sent lazily when lazy is set.
func (c *conn) roundTripAs(fr cluster.Frame, lazy bool, timeout time.Duration, decode func(op cluster.Opcode, body []byte) error) error {
	ch := make(chan error, 1)
	id, err := c.request(fr, lazy, func(op cluster.Opcode, body []byte, err error) {
		if err == nil {
			err = decode(op, body)
		}
		ch <- err
	})
	if err != nil {
		return err
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		c.forget(id)
		return fmt.Errorf("nodelink: %s did not answer %s within %v", c.peer, fr.Opcode(), timeout)
	}
}

// readLoop reads frames until the connection breaks: answers go to their requests, requests to
// their groups.
func (c *conn) readLoop() error {
	for {
		body, err := c.fr.Next()
		if err != nil {
			return err
		}
		c.heard.Store(time.Now().UnixNano())
		c.l.stats.FramesReceived.Add(1)
		c.l.stats.BytesReceived.Add(uint64(cluster.LengthSize + len(body)))
		h, rest, err := cluster.ParseHeader(body)
		if err != nil {
			return err
		}
		if err := c.dispatch(h, rest); err != nil {
			return err
		}
	}
}

func (c *conn) dispatch(h cluster.Header, body []byte) error {
	switch h.Opcode {
	case cluster.OpAppendEntriesResult, cluster.OpRequestVoteResult, cluster.OpRequestPreVoteResult,
		cluster.OpTimeoutNowResult, cluster.OpInstallSnapshotResult, cluster.OpProposeMetaResult, cluster.OpJoinOk, cluster.OpError,
		cluster.OpForwardEnqueueResult, cluster.OpForwardSettleResult, cluster.OpMoveLeaderResult, cluster.OpForwardAdminResult, cluster.OpForwardHTTPResult,
		cluster.OpTokenGrant, cluster.OpTokenReturnResult, cluster.OpThrottleCountsResult, cluster.OpThrottleWaitingResult:
		c.mu.Lock()
		f := c.pending[h.RequestID]
		delete(c.pending, h.RequestID)
		c.mu.Unlock()
		if f != nil {
			f(h.Opcode, body, nil)
		}
		return nil
	case cluster.OpSnapshotCredit:
		var x cluster.SnapshotCredit
		if err := x.Decode(body); err != nil {
			return err
		}
		c.mu.Lock()
		w := c.outSnap[h.RequestID]
		c.mu.Unlock()
		if w != nil {
			w.credit(int(x.Chunks))
		}
		return nil
	case cluster.OpSnapshotChunk:
		return c.snapshotChunk(h, body)
	case cluster.OpProposeMeta:
		var x cluster.ProposeMeta
		if err := x.Decode(body); err != nil {
			return err
		}
		entry := clone(x.Entry)
		go c.proposeMeta(h.RequestID, entry)
		return nil
	case cluster.OpJoin:
		return c.joinRequest(h.RequestID, body)
	case cluster.OpForwardEnqueue:
		return c.forwardedEnqueue(h.RequestID, body) // forward.go
	case cluster.OpForwardSettle:
		return c.forwardedSettle(h.RequestID, body)
	case cluster.OpMoveLeader:
		return c.moveLeader(h.RequestID, body) // move.go
	case cluster.OpForwardAdmin:
		return c.forwardedAdmin(h.RequestID, body) // forwardadmin.go
	case cluster.OpForwardHTTP:
		return c.forwardedHTTP(h.RequestID, body) // forwardhttp.go
	case cluster.OpTokenRequest:
		return c.tokenRequest(h.RequestID, body) // tokens.go
	case cluster.OpTokenReturn:
		return c.tokenReturn(h.RequestID, body)
	case cluster.OpThrottleCounts:
		return c.throttleCounts(h.RequestID, body)
	case cluster.OpThrottleWaiting:
		return c.throttleWaiting(h.RequestID, body)
	case cluster.OpAppendEntries, cluster.OpRequestVote, cluster.OpRequestPreVote, cluster.OpTimeoutNow, cluster.OpInstallSnapshot:
		return c.raftRequest(h, body)
	}
	return c.send(0, h.RequestID, &cluster.Error{Code: cluster.CodeProtocol, Message: "unknown opcode " + h.Opcode.String()})
}
