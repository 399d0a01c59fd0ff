// Package fibpconn is a small pipelined FIBP connection for load tools: many requests in flight,
// answers matched by request ID, deliveries handed to a callback. It uses the generated codecs and
// nothing else, so the benchmarks measure the broker rather than an SDK.
package fibpconn

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Conn is one connection. Its methods are safe for concurrent use.
type Conn struct {
	nc  net.Conn
	wmu sync.Mutex
	w   *bufio.Writer
	buf []byte

	next    atomic.Uint32
	mu      sync.Mutex
	pending map[uint32]func(fibp.Frame, error)
	subs    map[uint32]func(*fibp.Delivery)
	ends    map[uint32]chan *fibp.Error // a subscription's end, when the server ends it (an Error frame)
	err     error
	done    chan struct{}
}

// ErrClosed reports a call on a closed connection.
var ErrClosed = errors.New("fibpconn: connection closed")

// Dial connects and performs the handshake.
func Dial(addr string) (*Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &Conn{nc: nc, w: bufio.NewWriterSize(nc, 256<<10), pending: map[uint32]func(fibp.Frame, error){},
		subs: map[uint32]func(*fibp.Delivery){}, ends: map[uint32]chan *fibp.Error{}, done: make(chan struct{})}
	fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.Handshake{ProtocolVersion: 1, ClientCapabilities: fibp.CapCreditFlowControl})); err != nil {
		nc.Close()
		return nil, err
	}
	body, err := fr.Next()
	if err != nil {
		nc.Close()
		return nil, err
	}
	if h, _, _ := fibp.ParseHeader(body); h.Opcode != fibp.OpHandshakeOk {
		nc.Close()
		return nil, fmt.Errorf("handshake answered %v", h.Opcode)
	}
	go c.read(fr)
	return c, nil
}

// Close closes the connection.
func (c *Conn) Close() error {
	err := c.nc.Close()
	<-c.done
	return err
}

func (c *Conn) read(fr *wire.FrameReader) {
	defer close(c.done)
	var reasm fibp.Reassembler
	var delivery fibp.Delivery
	for {
		body, err := fr.Next()
		if err != nil {
			c.fail(err)
			return
		}
		h, rest, _ := fibp.ParseHeader(body)
		full, complete, err := reasm.Add(h, rest)
		if err != nil {
			c.fail(err)
			return
		}
		if !complete {
			continue
		}
		switch {
		case h.Opcode == fibp.OpPing:
			c.send(h.RequestID, &fibp.Pong{})
		case h.Opcode == fibp.OpDelivery:
			c.mu.Lock()
			sub := c.subs[h.RequestID]
			c.mu.Unlock()
			if sub != nil && delivery.Decode(full) == nil {
				sub(&delivery)
			}
		default:
			c.mu.Lock()
			cb := c.pending[h.RequestID]
			delete(c.pending, h.RequestID)
			end := c.ends[h.RequestID]
			if cb == nil && end != nil && h.Opcode == fibp.OpError { // the server ended a subscription
				delete(c.subs, h.RequestID)
			} else {
				end = nil
			}
			c.mu.Unlock()
			switch {
			case cb != nil:
				cb(fibp.Decode(h.Opcode, full))
			case end != nil:
				f, _ := fibp.Decode(h.Opcode, full)
				e, _ := f.(*fibp.Error)
				select {
				case end <- e:
				default: // the end is reported once; a second Error frame for it must not stop the reader
				}
			}
		}
	}
}

func (c *Conn) fail(err error) {
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = map[uint32]func(fibp.Frame, error){}
	c.mu.Unlock()
	for _, cb := range pending {
		cb(nil, ErrClosed)
	}
}

func (c *Conn) send(id uint32, f fibp.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.buf = fibp.AppendFrame(c.buf[:0], 0, id, f)
	if _, err := c.w.Write(c.buf); err != nil {
		return err
	}
	return c.w.Flush()
}

func (c *Conn) id() uint32 {
	for {
		id := c.next.Add(1) & 0x7FFFFFFF
		if id != 0 {
			return id
		}
	}
}

// Go sends a request; cb runs on the reader goroutine with the answer.
func (c *Conn) Go(f fibp.Frame, cb func(fibp.Frame, error)) {
	id := c.id()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		cb(nil, ErrClosed)
		return
	}
	c.pending[id] = cb
	c.mu.Unlock()
	if err := c.send(id, f); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		cb(nil, err)
	}
}

// Call sends a request and waits for its answer. An Error frame becomes an error.
func (c *Conn) Call(f fibp.Frame) (fibp.Frame, error) {
	ch := make(chan struct{})
	var res fibp.Frame
	var err error
	c.Go(f, func(r fibp.Frame, e error) { res, err = r, e; close(ch) })
	<-ch
	if e, ok := res.(*fibp.Error); ok {
		return nil, fmt.Errorf("%v: %s", e.ErrorCode, e.Message)
	}
	return res, err
}

// Consume subscribes; onDelivery runs on the reader goroutine and must not keep the Delivery
// (its slices alias the read buffer). It returns the subscription's request ID for Credit.
func (c *Conn) Consume(queue string, credit uint32, onDelivery func(*fibp.Delivery)) (uint32, error) {
	return c.ConsumeWith(&fibp.Consume{Queue: queue, Credit: credit}, onDelivery)
}

// ConsumeWith is Consume with every field of the request (throttle declarations).
func (c *Conn) ConsumeWith(req *fibp.Consume, onDelivery func(*fibp.Delivery)) (uint32, error) {
	queue := req.Queue
	id := c.id()
	c.mu.Lock()
	c.subs[id] = onDelivery
	c.ends[id] = make(chan *fibp.Error, 1)
	ch := make(chan fibp.Frame, 1)
	c.pending[id] = func(f fibp.Frame, _ error) { ch <- f }
	c.mu.Unlock()
	if err := c.send(id, req); err != nil {
		return 0, err
	}
	select {
	case f := <-ch:
		if f == nil || f.Opcode() != fibp.OpConsumeOk {
			return 0, fmt.Errorf("consume %s answered %#v", queue, f)
		}
	case <-time.After(10 * time.Second):
		return 0, errors.New("consume: no answer")
	}
	return id, nil
}

// Ended receives the Error with which the server ended subscription sub (a NotLeader when its
// node stopped leading the queue, say); nil for a subscription this connection never made.
func (c *Conn) Ended(sub uint32) <-chan *fibp.Error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ends[sub]
}

// Credit grants a subscription more credit (no answer).
func (c *Conn) Credit(sub uint32, n uint32) error {
	return c.send(sub, &fibp.Credit{AdditionalCredit: n})
}
