package fibp

// Continuation frames: a body too large for one frame is sent as several frames with the same
// opcode and request ID, every one but the last flagged FlagContinuation. The split is at raw byte
// boundaries; the receiver concatenates the chunks and parses the result as one body.

import (
	"errors"
	"fmt"
	"time"

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
	// Budget, when set, approves every byte of memory held for partial bodies; a reassembled body
	// stays charged to it until the caller hands it back with Release.
	Budget wire.BufferBudget

	partial map[uint32]*partialBody
	handed  int // bytes charged for the last reassembled body Add returned, until Release
}

type partialBody struct {
	op   Opcode
	body []byte
	last time.Time // when the last chunk arrived
}

// Add takes one received frame, which arrived at now. When the frame completes a body, Add
// returns it with done set: a frame without continuation and no partial state returns chunk
// itself (no copy); a completed reassembly returns a body that the Reassembler no longer
// references. On error, the partial body for that request ID is discarded.
func (r *Reassembler) Add(h Header, chunk []byte) (body []byte, done bool, err error) {
	return r.AddAt(h, chunk, time.Time{})
}

// AddAt is Add for a frame that arrived at now, the time Expire compares with.
func (r *Reassembler) AddAt(h Header, chunk []byte, now time.Time) (body []byte, done bool, err error) {
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
	p.last = now
	if p.op != h.Opcode {
		r.discard(h.RequestID, p)
		return nil, false, fmt.Errorf("%w: %v then %v", ErrReassemblyOpcode, p.op, h.Opcode)
	}
	if r.MaxBody > 0 && len(p.body)+len(chunk) > r.MaxBody {
		r.discard(h.RequestID, p)
		return nil, false, ErrReassemblyTooLarge
	}
	if err := r.grow(p, len(chunk)); err != nil {
		r.discard(h.RequestID, p)
		return nil, false, err
	}
	p.body = append(p.body, chunk...)
	if h.Flags.Has(FlagContinuation) {
		return nil, false, nil
	}
	delete(r.partial, h.RequestID)
	r.Release()
	r.handed = cap(p.body)
	return p.body, true, nil
}

// grow makes room for n more bytes in p's body, with the budget's approval.
func (r *Reassembler) grow(p *partialBody, n int) error {
	need := len(p.body) + n
	if need <= cap(p.body) {
		return nil
	}
	newCap := max(need, 2*cap(p.body))
	if r.MaxBody > 0 {
		newCap = min(newCap, r.MaxBody)
	}
	if r.Budget != nil {
		if err := r.Budget.Grow(newCap - cap(p.body)); err != nil {
			return err
		}
	}
	nb := make([]byte, len(p.body), newCap)
	copy(nb, p.body)
	p.body = nb
	return nil
}

func (r *Reassembler) discard(id uint32, p *partialBody) {
	delete(r.partial, id)
	if r.Budget != nil && cap(p.body) > 0 {
		r.Budget.Shrink(cap(p.body))
	}
	p.body = nil
}

// Release hands the Budget back the memory of the last body that Add returned from a
// reassembly; call it once that body is no longer used. It does nothing when there is none.
func (r *Reassembler) Release() {
	if r.Budget != nil && r.handed > 0 {
		r.Budget.Shrink(r.handed)
	}
	r.handed = 0
}

// Expire discards the partial bodies whose last chunk arrived before cutoff and returns their
// request IDs (appended to ids).
func (r *Reassembler) Expire(cutoff time.Time, ids []uint32) []uint32 {
	for id, p := range r.partial {
		if p.last.Before(cutoff) {
			r.discard(id, p)
			ids = append(ids, id)
		}
	}
	return ids
}

// Close discards every partial body and releases the last reassembled one.
func (r *Reassembler) Close() {
	for id, p := range r.partial {
		r.discard(id, p)
	}
	r.Release()
}

// Pending returns how many request IDs are mid-continuation.
func (r *Reassembler) Pending() int { return len(r.partial) }
