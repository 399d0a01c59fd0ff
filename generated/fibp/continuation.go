package fibp

// Continuation frames: a body too large for one frame is sent as several frames with the same
// opcode and request ID, every one but the last flagged FlagContinuation. The split is at raw byte
// boundaries; the receiver concatenates the chunks and parses the result as one body.

import (
	"errors"
	"fmt"

	"github.com/filamq/fila/generated/wire"
)

// AppendContinued appends body as frames of at most maxFrame bytes each (length prefix excluded;
// 0 means MaxFrameSize): one plain frame when it fits, continuation frames otherwise.
func AppendContinued(b []byte, op Opcode, requestID uint32, body []byte, maxFrame int) []byte {
	if maxFrame <= 0 {
		maxFrame = MaxFrameSize
	}
	chunk := maxFrame - HeaderSize
	for {
		n, flags := len(body), FrameFlags(0)
		if n > chunk {
			n, flags = chunk, FlagContinuation
		}
		b = wire.AppendU32(b, uint32(HeaderSize+n))
		b = Header{Opcode: op, Flags: flags, RequestID: requestID}.AppendTo(b)
		b = append(b, body[:n]...)
		body = body[n:]
		if flags == 0 {
			return b
		}
	}
}

// Reassembly errors.
var (
	ErrReassemblyTooLarge = errors.New("fibp: continued body exceeds the reassembly limit")
	ErrReassemblyOpcode   = errors.New("fibp: continuation frame changes opcode")
	ErrTooManyPartials    = errors.New("fibp: too many partially received bodies")
)

// Reassembler joins continuation frames per request ID. It is not safe for concurrent use; one
// connection owns one Reassembler. The zero value has no limits.
type Reassembler struct {
	// MaxBody caps a reassembled body (0 = unlimited).
	MaxBody int
	// MaxPartials caps how many request IDs may be mid-continuation at once (0 = unlimited).
	MaxPartials int

	partial map[uint32]*partialBody
}

type partialBody struct {
	op   Opcode
	body []byte
}

// Add takes one received frame. When the frame completes a body, Add returns it with done set:
// a frame without continuation and no partial state returns chunk itself (no copy); a completed
// reassembly returns a body that the Reassembler no longer references. On error, the partial body
// for that request ID is discarded.
func (r *Reassembler) Add(h Header, chunk []byte) (body []byte, done bool, err error) {
	p := r.partial[h.RequestID]
	if p == nil && !h.Flags.Has(FlagContinuation) {
		return chunk, true, nil
	}
	if p == nil {
		if r.MaxPartials > 0 && len(r.partial) >= r.MaxPartials {
			return nil, false, ErrTooManyPartials
		}
		if r.partial == nil {
			r.partial = map[uint32]*partialBody{}
		}
		p = &partialBody{op: h.Opcode}
		r.partial[h.RequestID] = p
	}
	if p.op != h.Opcode {
		delete(r.partial, h.RequestID)
		return nil, false, fmt.Errorf("%w: %v then %v", ErrReassemblyOpcode, p.op, h.Opcode)
	}
	if r.MaxBody > 0 && len(p.body)+len(chunk) > r.MaxBody {
		delete(r.partial, h.RequestID)
		return nil, false, ErrReassemblyTooLarge
	}
	p.body = append(p.body, chunk...)
	if h.Flags.Has(FlagContinuation) {
		return nil, false, nil
	}
	delete(r.partial, h.RequestID)
	return p.body, true, nil
}

// Pending returns how many request IDs are mid-continuation.
func (r *Reassembler) Pending() int { return len(r.partial) }
