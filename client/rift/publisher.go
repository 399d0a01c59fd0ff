package rift

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/filamq/fila/generated/riftproto"
)

// maxPending bounds the bytes of frames a Publisher holds for its writer; Publish waits when
// they are exceeded (a single larger frame is always accepted).
const maxPending = 512 << 10

// inlineMax is the largest PUBLISH frame that Publish hands to QUIC itself (see pubStream).
const inlineMax = 16 << 10

// pubStream is one publisher stream (see Publisher).
//
// Publish appends the frame to a buffer that a writer goroutine hands to QUIC, one write for
// everything that accumulated meanwhile (a QUIC write of more than a packet waits until it is
// sent, so writing each publication would make every publisher wait for the network). Publish
// waits only while 512 KiB are already waiting. When nothing is waiting, the writer is idle and
// its last write returned (which QUIC does once it has sent what was queued before), Publish
// instead queues one frame (up to inlineMax) in QUIC itself (TryWriteAll: a copy, no waiting),
// which saves the hand-off to the writer goroutine: the latency of a reply published in answer
// to a request. Only one such frame between two writes of the writer, so that QUIC never holds
// more than that beyond the writer's batch; more would also make the writer's next write wait
// for QUIC to take the frame, with smaller batches (measured: 64 B publications 20% slower with
// 16 KiB of such frames per write, none slower with one). A nil error from Publish therefore
// means the publication was accepted for sending; a failure to send it makes the publisher
// unusable and surfaces on a later operation. PUBLISH is never answered anyway: Flush confirms.
type pubStream struct {
	c *Client
	s *call

	op sync.Mutex // serializes Flush and PublishAck, so that answers are read in order

	mu          sync.Mutex
	buf         []byte        // frames the writer has not taken yet
	spare       []byte        // the writer's previous batch, reused
	err         error         // why the publisher is unusable
	closing     bool          // Close was called: the writer sends buf, then finishes the stream
	writeFailed bool          // a write failed; the server may have sent ERROR explaining why
	wake        chan struct{} // (capacity 1) buf became non-empty, or err was set
	space       chan struct{} // closed (and replaced) when the writer takes a batch, for waiters
	waiters     int
	writing     bool   // the writer took a batch and is writing it
	inlined     bool   // Publish queued a frame in QUIC itself since the writer last wrote
	frame       []byte // the frame Publish queues itself, reused
}

// openPubStream opens a publisher stream.
func (c *Client) openPubStream(ctx context.Context) (*pubStream, error) {
	ctx, cancel := c.opContext(ctx, 0)
	defer cancel()
	s, err := c.openLongStream(ctx, 4<<10) // answers are OK and ERROR frames only
	if err != nil {
		return nil, err
	}
	s.unbind()
	s.str.SetDeadline(time.Time{})
	p := &pubStream{c: c, s: s, wake: make(chan struct{}, 1), space: make(chan struct{})}
	go p.writeLoop()
	return p, nil
}

// lost reports whether the stream is unusable because its connection ended (and not because it
// was closed).
func (p *pubStream) lost() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil && !p.closing && lost(p.s.conn, p.err)
}

func (p *pubStream) Publish(ctx context.Context, subject, reply string, payload []byte) error {
	f := riftproto.Publish{Subject: subject, Reply: reply, Payload: payload}
	if err := f.Check(); err != nil {
		return fmt.Errorf("rift: publish: %w", err)
	}
	return p.enqueuePublish(ctx, &f)
}

func (p *pubStream) PublishAck(ctx context.Context, subject, reply string, payload []byte) error {
	f := &riftproto.PublishAck{Subject: subject, Reply: reply, Payload: payload}
	if err := f.Check(); err != nil {
		return fmt.Errorf("rift: publish: %w", err)
	}
	return p.call(ctx, f)
}

func (p *pubStream) Flush(ctx context.Context) error {
	return p.call(ctx, &riftproto.Ping{})
}

func (p *pubStream) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *pubStream) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.err == nil:
		p.err, p.closing = ErrClosed, true
		p.signal()
	case p.writeFailed: // nobody asked for the server's explanation
		p.writeFailed = false
		p.s.str.CancelRead(resetCancelled)
	}
	return nil
}

// enqueue appends f to the buffer (see reserve).
func (p *pubStream) enqueue(ctx context.Context, f riftproto.Frame) error {
	if err := p.reserve(ctx, riftproto.LengthSize+riftproto.HeaderSize+f.Size()); err != nil {
		return err
	}
	if len(p.buf) == 0 {
		p.signal()
	}
	p.buf = riftproto.AppendFrame(p.buf, f)
	p.mu.Unlock()
	return nil
}

// enqueuePublish is enqueue for PUBLISH, without converting f to an interface (which would
// allocate it).
func (p *pubStream) enqueuePublish(ctx context.Context, f *riftproto.Publish) error {
	size := riftproto.HeaderSize + f.Size()
	if err := p.reserve(ctx, riftproto.LengthSize+size); err != nil {
		return err
	}
	if len(p.buf) == 0 && !p.writing && !p.inlined && riftproto.LengthSize+size <= inlineMax {
		p.frame = appendPublish(p.frame[:0], f, size)
		if p.s.str.TryWriteAll(p.frame) == nil {
			p.inlined = true
			p.mu.Unlock()
			return nil
		}
		// No flow-control credit now, or the stream failed: the writer takes the frame (and
		// reports the failure).
	}
	if len(p.buf) == 0 {
		p.signal()
	}
	p.buf = appendPublish(p.buf, f, size)
	p.mu.Unlock()
	return nil
}

func appendPublish(b []byte, f *riftproto.Publish, size int) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	return f.AppendTo(append(b, byte(riftproto.OpPublish)))
}

// reserve locks p.mu and waits (within ctx and the operation timeout) until size more bytes
// fit in the buffer; on success it returns with p.mu held. A cancelled
// context breaks the publisher, as any failed operation does.
func (p *pubStream) reserve(ctx context.Context, size int) error {
	p.mu.Lock()
	var timer *time.Timer
	for {
		if p.err != nil {
			err := p.err
			p.mu.Unlock()
			return fmt.Errorf("%w: %v", ErrBroken, err)
		}
		if err := ctx.Err(); err != nil {
			p.failLocked(err)
			p.mu.Unlock()
			return err
		}
		if len(p.buf) == 0 || len(p.buf)+size <= maxPending {
			break
		}
		if timer == nil {
			timer = time.NewTimer(p.c.timeout)
			defer timer.Stop()
		}
		space := p.space
		p.waiters++
		p.mu.Unlock()
		var err error
		select {
		case <-space:
		case <-ctx.Done():
		case <-timer.C:
			err = fmt.Errorf("rift: %w (waiting to send)", context.DeadlineExceeded)
		}
		p.mu.Lock()
		p.waiters--
		if err != nil {
			p.failLocked(err)
		}
	}
	return nil
}

// signal wakes the writer; p.mu is held.
func (p *pubStream) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// failLocked makes the publisher unusable because of err and resets its stream; p.mu is held.
func (p *pubStream) failLocked(err error) {
	if p.err == nil {
		p.breakLocked(err)
		p.s.cancel()
	}
}

// breakLocked makes the publisher unusable; p.mu is held.
func (p *pubStream) breakLocked(err error) {
	p.err = err
	p.buf = nil
	p.signal()
	p.freeWaiters()
}

// freeWaiters wakes the publishers waiting for room; p.mu is held.
func (p *pubStream) freeWaiters() {
	if p.waiters > 0 {
		close(p.space)
		p.space = make(chan struct{})
	}
}

// call queues f and reads its answer, which must be OK.
func (p *pubStream) call(ctx context.Context, f riftproto.Frame) error {
	p.op.Lock()
	defer p.op.Unlock()
	ctx, cancel := p.c.opContext(ctx, 0)
	defer cancel()
	if err := p.enqueue(ctx, f); err != nil {
		return p.explain(ctx, err)
	}
	d, _ := ctx.Deadline()
	p.s.str.SetReadDeadline(d)
	stop := context.AfterFunc(ctx, func() { p.s.str.SetReadDeadline(time.Now()) })
	_, err := p.s.expectOk()
	stop()
	p.s.str.SetReadDeadline(time.Time{})
	if err != nil {
		err = p.s.ctxErr(ctx, err)
		p.mu.Lock()
		p.writeFailed = false
		p.failLocked(err)
		p.s.str.CancelRead(resetCancelled) // also when the writer failed first
		p.mu.Unlock()
	}
	return err
}

// explain returns the server's ERROR when a failed write was its consequence (the server
// refuses a publication with ERROR and stops reading), and err otherwise.
func (p *pubStream) explain(ctx context.Context, err error) error {
	p.mu.Lock()
	failed := p.writeFailed
	p.writeFailed = false
	p.mu.Unlock()
	if !failed {
		return err
	}
	d, _ := ctx.Deadline()
	p.s.str.SetReadDeadline(d)
	stop := context.AfterFunc(ctx, func() { p.s.str.SetReadDeadline(time.Now()) })
	defer stop()
	_, _, rerr := p.s.next()
	p.s.str.CancelRead(resetCancelled)
	var e *Error
	if errors.As(rerr, &e) {
		return rerr
	}
	return err
}

// writeFailedLocked makes the publisher unusable after a failed write; p.mu is held. The receiving half stays open: the server may have explained the failure with
// an ERROR, which the next Flush or PublishAck reads (see explain).
func (p *pubStream) writeFailedLocked(err error) {
	err = fmt.Errorf("rift: publish: %w", connErr(p.s.conn, err))
	switch {
	case p.closing:
		p.s.cancel()
	case p.err == nil:
		p.writeFailed = true
		p.breakLocked(err)
		p.s.str.CancelWrite(resetCancelled)
	}
}

// writeLoop hands the buffered frames to QUIC until the publisher fails, or is closed and has
// written everything.
func (p *pubStream) writeLoop() {
	done := p.s.conn.Context().Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		switch {
		case len(p.buf) > 0 && (p.err == nil || p.closing):
			batch := p.buf
			p.buf, p.spare, p.writing = p.spare[:0], nil, true
			p.freeWaiters()
			p.mu.Unlock()
			p.s.str.SetWriteDeadline(time.Now().Add(p.c.timeout))
			_, err := p.s.str.Write(batch)
			p.mu.Lock()
			p.writing = false
			if err != nil {
				p.writeFailedLocked(err)
				return
			}
			p.spare, p.inlined = batch[:0], false
			continue
		case p.err != nil:
			if p.closing {
				p.s.finish()
				p.s.str.CancelRead(resetCancelled)
			}
			return
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
			p.mu.Lock()
		case <-done:
			p.mu.Lock()
			p.failLocked(connErr(p.s.conn, context.Canceled))
		}
	}
}

// Publisher publishes on one stream at a time: publications on it are routed in order. It is
// safe for concurrent use, but becomes unusable (ErrBroken) after any failed or cancelled
// operation.
//
// Publish never waits for the network: it appends the frame to a buffer that a writer goroutine
// hands to QUIC, one write for everything that accumulated meanwhile, or, when nothing is waiting,
// queues it in QUIC itself. Publish waits only while 512 KiB are already waiting. A nil error
// from Publish therefore means the publication was accepted for sending; a failure to send it
// makes the publisher unusable and surfaces on a later operation. PUBLISH is never answered
// anyway: Flush confirms.
//
// With reconnection (WithMaxReconnects), a stream that failed because its connection ended is
// replaced on the next operation by a new stream on the next connection (waiting for it within
// the operation's context): the Publisher stays usable. What was queued but not yet received
// by the broker when the connection ended is lost, and the Flush after a replacement reports it
// (an error wrapping ErrConnectionLost) once.
type Publisher struct {
	c      *Client
	reopen sync.Mutex // serializes replacing cur

	mu       sync.Mutex
	cur      *pubStream
	closed   bool
	replaced bool // cur replaced a lost stream since the last Flush
}

// Publisher opens a publisher stream.
func (c *Client) Publisher(ctx context.Context) (*Publisher, error) {
	s, err := c.openPubStream(ctx)
	if err != nil {
		return nil, err
	}
	return &Publisher{c: c, cur: s}, nil
}

// stream returns the current stream, first replacing one lost with its connection.
func (p *Publisher) stream(ctx context.Context) (*pubStream, error) {
	p.mu.Lock()
	s := p.cur
	p.mu.Unlock()
	if !p.c.reconnecting() || !s.lost() {
		return s, nil
	}
	p.reopen.Lock()
	defer p.reopen.Unlock()
	p.mu.Lock()
	s, closed := p.cur, p.closed
	p.mu.Unlock()
	if closed || !s.lost() {
		return s, nil
	}
	ns, err := p.c.openPubStream(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ns.Close()
		return s, nil
	}
	p.cur, p.replaced = ns, true
	p.c.log.Debug("rift: publisher stream reopened")
	return ns, nil
}

// Publish queues a message for sending without waiting for an answer; Flush confirms it. reply
// is "" or a literal _INBOX.<...> subject the identity may subscribe to.
func (p *Publisher) Publish(ctx context.Context, subject, reply string, payload []byte) error {
	s, err := p.stream(ctx)
	if err != nil {
		return err
	}
	return s.Publish(ctx, subject, reply, payload)
}

// PublishAck publishes and waits until the broker has routed the message.
func (p *Publisher) PublishAck(ctx context.Context, subject, reply string, payload []byte) error {
	s, err := p.stream(ctx)
	if err != nil {
		return err
	}
	return s.PublishAck(ctx, subject, reply, payload)
}

// Flush sends a PING and waits for its OK: every earlier publication on this stream was routed by
// the broker (which does not mean processed by subscribers). A refused publication surfaces here
// as an *Error. After the stream was replaced because the connection ended, Flush returns an
// error wrapping ErrConnectionLost once: publications before the replacement may be lost.
func (p *Publisher) Flush(ctx context.Context) error {
	s, err := p.stream(ctx)
	if err != nil {
		return err
	}
	if err := s.Flush(ctx); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.replaced && p.cur == s {
		p.replaced = false
		return fmt.Errorf("%w: publications before the reconnection may be lost", ErrConnectionLost)
	}
	return nil
}

// Err returns why the publisher is unusable, or nil. With reconnection a stream lost with its
// connection is not reported: the next operation replaces it.
func (p *Publisher) Err() error {
	p.mu.Lock()
	s := p.cur
	p.mu.Unlock()
	if p.c.reconnecting() && s.lost() {
		return nil
	}
	return s.Err()
}

// Close finishes the publisher stream once what was published has been handed to QUIC.
func (p *Publisher) Close() error {
	p.mu.Lock()
	p.closed = true
	s := p.cur
	p.mu.Unlock()
	return s.Close()
}

// Publish publishes on the client's shared publisher stream, opening a new stream when the
// previous one failed. It never retries: a failed publication may or may not have reached the
// broker.
func (c *Client) Publish(ctx context.Context, subject, reply string, payload []byte) error {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.shared == nil || c.shared.Err() != nil {
		p, err := c.Publisher(ctx)
		if err != nil {
			return err
		}
		c.shared = p
	}
	return c.shared.Publish(ctx, subject, reply, payload)
}

// Flush flushes the shared publisher (see Publisher.Flush).
func (c *Client) Flush(ctx context.Context) error {
	c.pubMu.Lock()
	defer c.pubMu.Unlock()
	if c.shared == nil {
		return nil
	}
	return c.shared.Flush(ctx)
}
