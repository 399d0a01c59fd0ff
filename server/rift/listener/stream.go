package listener

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/membudget"
	"github.com/filamq/fila/server/rift/service"
	"github.com/filamq/fila/server/rift/stream"
)

// op is one operation stream being served.
type op struct {
	s       *Server
	sess    *service.Session
	str     *quic.Stream
	in      *frames
	out     *writer
	acct    *membudget.Account // the connection's memory account
	credits *credits           // the connection's parked stream credit
	parked  bool               // the stream's credit was handed to credits
}

// serveStream reads a stream's first frame and runs the operation it starts.
func (s *Server) serveStream(ctx context.Context, sess *service.Session, acct *membudget.Account, cr *credits, str *quic.Stream) {
	o := &op{s: s, sess: sess, str: str, acct: acct, credits: cr, out: &writer{s: str, timeout: s.opts.WriteTimeout}}
	defer func() {
		if !o.parked {
			str.ReleaseStreamCredit()
		}
	}()
	in, err := newFrames(str, acct, time.Now().Add(s.opts.AuthTimeout), s.opts.FrameTimeout)
	if err != nil { // the connection's memory bound (or the server's) is reached
		o.out.fail(riftproto.CodeOperation, "stream refused: "+err.Error())
		return
	}
	o.in = in
	defer o.in.release()
	code, body, err := o.in.next()
	if err != nil {
		o.readFailed(err)
		return
	}
	switch code {
	case riftproto.OpPublish, riftproto.OpPublishAck, riftproto.OpPing:
		o.publisher(code, body)
	case riftproto.OpSubscribe:
		o.subscribe(body)
	default:
		o.single(ctx, code, body)
	}
}

// readFailed answers a frame that could not be read, when an answer is still possible.
func (o *op) readFailed(err error) {
	var size *wire.FrameSizeError
	var mem *wire.BufferError
	switch {
	case errors.As(err, &size):
		o.out.fail(riftproto.CodeOperation, fmt.Sprintf("frame length %d outside %d..%d", size.Length, size.Min, size.Max))
	case errors.As(err, &mem): // the body is not read: the stream ends, the connection stays
		o.out.fail(riftproto.CodeOperation, mem.Error())
	case errors.Is(err, io.EOF):
		o.str.Close() // the client finished without a command
	case errors.Is(err, io.ErrUnexpectedEOF):
		o.out.fail(riftproto.CodeOperation, "stream ended inside a frame")
	default: // deadline, reset or connection loss
		var se *quic.StreamError
		if errors.As(err, &se) {
			o.abort()
			return
		}
		o.out.fail(riftproto.CodeOperation, "read: "+err.Error())
	}
}

// decode decodes body as a frame of opcode code into fr, answering ERROR on failure.
func (o *op) decode(fr riftproto.Frame, body []byte) bool {
	if err := fr.Decode(body); err != nil {
		o.out.fail(riftproto.CodeOperation, err.Error())
		return false
	}
	return true
}

// unexpected answers a frame that does not belong where it was sent.
func (o *op) unexpected(code riftproto.Opcode, where string) {
	if !code.Known() {
		o.out.fail(riftproto.CodeOperation, fmt.Sprintf("unknown opcode %d", uint8(code)))
		return
	}
	o.out.fail(riftproto.CodeOperation, fmt.Sprintf("%v is not valid %s", code, where))
}

// failWith answers err with its code and terminates the stream.
func (o *op) failWith(err error) {
	o.out.fail(service.Code(err), err.Error())
}

// abort resets both directions of the stream (after a cancellation or a failed write). Both
// calls are needed for QUIC to count the stream as finished and return its credit.
func (o *op) abort() {
	o.str.CancelWrite(ResetCancelled)
	o.str.CancelRead(ResetCancelled)
}

// finish ends a single-call stream after its answer: the credit of the calls answered before
// it is released now, so that their MAX_STREAMS frame joins this answer, and its own is parked
// (see credits).
func (o *op) finish() {
	o.str.Close()
	o.str.CancelRead(ResetCancelled)
	o.credits.release()
	o.credits.park(o.str)
	o.parked = true
}

// pubDecoder decodes PUBLISH and PUBLISH_ACK bodies (one layout: subject, reply, payload) for a
// publisher stream. A body whose subject and reply are byte for byte those of the previous one
// reuses their strings, already validated, without allocating or checking them again; any other
// goes through the generated decoder (whose reader also remembers recent strings).
type pubDecoder struct {
	r           wire.Reader
	f           riftproto.Publish
	subj, reply string
	valid       bool
}

// maxPayload is the payload limit of PUBLISH and PUBLISH_ACK frames.
const maxPayload = 1 << 20

func (d *pubDecoder) decode(code riftproto.Opcode, body []byte) (subj, reply string, payload []byte, err error) {
	if d.valid {
		if p, ok := d.same(body); ok {
			return d.subj, d.reply, p, nil
		}
	}
	d.r.Reset(body)
	d.f.DecodeFrom(&d.r)
	d.r.ExpectEnd()
	if err := d.r.Err(); err != nil {
		d.valid = false
		return "", "", nil, &riftproto.FrameError{Opcode: code, Err: err}
	}
	d.subj, d.reply, d.valid = d.f.Subject, d.f.Reply, true
	return d.f.Subject, d.f.Reply, d.f.Payload, nil
}

// same returns the payload of body when its subject and reply are the remembered ones.
func (d *pubDecoder) same(body []byte) ([]byte, bool) {
	n := len(d.subj)
	if len(body) < 4+n+len(d.reply) || int(binary.BigEndian.Uint16(body)) != n || string(body[2:2+n]) != d.subj {
		return nil, false
	}
	rest := body[2+n:]
	m := len(d.reply)
	if int(binary.BigEndian.Uint16(rest)) != m || string(rest[2:2+m]) != d.reply {
		return nil, false
	}
	payload := rest[2+m:]
	switch {
	case len(payload) > maxPayload:
		return nil, false
	case len(payload) == 0:
		return nil, true // as the generated decoder: an empty payload is nil
	}
	return payload[:len(payload):len(payload)], true
}

// publisher serves PUBLISH, PUBLISH_ACK and PING frames in order until the client finishes.
func (o *op) publisher(code riftproto.Opcode, body []byte) {
	var dec pubDecoder
	p := o.sess.Publisher()
	for {
		var err error
		switch code {
		case riftproto.OpPublish, riftproto.OpPublishAck:
			subj, reply, payload, derr := dec.decode(code, body)
			if derr != nil {
				o.out.fail(riftproto.CodeOperation, derr.Error())
				return
			}
			if _, err = p.Publish(subj, reply, payload); err == nil && code == riftproto.OpPublishAck {
				err = o.out.send(&riftproto.Ok{})
			}
		case riftproto.OpPing:
			if !o.decode(&riftproto.Ping{}, body) {
				return
			}
			err = o.out.send(&riftproto.Ok{})
		default:
			o.unexpected(code, "on a publisher stream")
			return
		}
		if err != nil {
			o.failWith(err)
			return
		}
		if code, body, err = o.in.next(); err != nil {
			o.readFailed(err)
			return
		}
	}
}

// single serves the one-call operations.
func (o *op) single(ctx context.Context, code riftproto.Opcode, body []byte) {
	var err error
	switch code {
	case riftproto.OpRequest:
		err = o.request(ctx, body)
	case riftproto.OpStreamPublish:
		var f riftproto.StreamPublish
		if !o.decode(&f, body) {
			return
		}
		var seq, ts uint64
		if seq, ts, err = o.sess.StreamPublish(f.Stream, f.Subject, f.Reply, f.Payload); err == nil {
			err = o.out.send(&riftproto.Stored{Sequence: seq, TimestampMillis: ts})
		}
	case riftproto.OpConsumerOpen:
		var f riftproto.ConsumerOpen
		if !o.decode(&f, body) {
			return
		}
		cfg := stream.ConsumerConfig{Filter: f.Filter, StartSequence: f.StartSequence,
			AckWait: time.Duration(f.AckWaitMs) * time.Millisecond, MaxAckPending: int(f.MaxAckPending)}
		if err = o.sess.ConsumerOpen(f.Stream, f.Name, cfg); err == nil {
			err = o.out.send(&riftproto.Ok{})
		}
	case riftproto.OpConsumerFetch:
		err = o.fetch(body)
	case riftproto.OpAck:
		var f riftproto.Ack
		if !o.decode(&f, body) {
			return
		}
		if err = o.sess.Ack(f.Stream, f.Name, f.Sequence); err == nil {
			err = o.out.send(&riftproto.Ok{})
		}
	case riftproto.OpAuth:
		o.out.fail(riftproto.CodeOperation, "AUTH is only valid on the first stream")
		return
	default:
		o.unexpected(code, "from a client")
		return
	}
	if err != nil {
		if !errors.Is(err, errDecode) {
			o.failWith(err)
		}
		return
	}
	o.finish()
}

// errDecode marks a failure already answered by decode.
var errDecode = errors.New("decode failed")

func (o *op) request(ctx context.Context, body []byte) error {
	var f riftproto.Request
	if !o.decode(&f, body) {
		return errDecode
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(o.str.Context(), cancel) // the client gave up (STOP_SENDING)
	defer stop()
	m, err := o.sess.Request(ctx, f.Subject, f.Payload, time.Duration(f.TimeoutMs)*time.Millisecond)
	if err != nil {
		return err
	}
	return o.out.send(&riftproto.Message{Subject: m.Subject, Reply: m.Reply, Payload: m.Payload})
}

func (o *op) fetch(body []byte) error {
	var f riftproto.ConsumerFetch
	if !o.decode(&f, body) {
		return errDecode
	}
	if f.Limit < 1 || f.Limit > stream.MaxFetch {
		return fmt.Errorf("%w: fetch limit must be 1-256", service.ErrOperation)
	}
	ds, err := o.sess.Fetch(f.Stream, f.Name, int(f.Limit))
	if err != nil {
		return err
	}
	for _, d := range ds {
		o.out.buf = riftproto.AppendFrame(o.out.buf, &riftproto.Delivery{Sequence: d.Sequence, TimestampMillis: d.TimestampMillis,
			DeliveryCount: d.DeliveryCount, Subject: d.Subject, Reply: d.Reply, Payload: d.Payload})
		if len(o.out.buf) >= 64<<10 {
			if err := o.out.flush(); err != nil {
				return err
			}
		}
	}
	o.out.buf = riftproto.AppendFrame(o.out.buf, &riftproto.Ok{})
	return o.out.flush()
}
