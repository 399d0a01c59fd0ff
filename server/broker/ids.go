package broker

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
)

// idGen makes UUIDv7 message IDs (RFC 9562) that increase strictly within this process, so that
// ID order is enqueue order: the 12-bit rand_a field counts IDs made in the same millisecond, and
// a full counter borrows the next millisecond.
type idGen struct {
	mu     sync.Mutex
	lastMs int64
	seq    uint16
	rnd    *rand.ChaCha8
}

func newIDGen() *idGen {
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], rand.Uint64())
	binary.LittleEndian.PutUint64(seed[8:], rand.Uint64())
	binary.LittleEndian.PutUint64(seed[16:], rand.Uint64())
	binary.LittleEndian.PutUint64(seed[24:], rand.Uint64())
	return &idGen{rnd: rand.NewChaCha8(seed)}
}

// next returns a new ID for a message accepted at nowMs (Unix milliseconds).
func (g *idGen) next(nowMs int64) (id [16]byte) {
	g.mu.Lock()
	switch {
	case nowMs > g.lastMs:
		g.lastMs, g.seq = nowMs, 0
	case g.seq < 0x0FFF:
		g.seq++
	default:
		g.lastMs++
		g.seq = 0
	}
	ms, seq, r := g.lastMs, g.seq, g.rnd.Uint64()
	g.mu.Unlock()

	binary.BigEndian.PutUint64(id[0:8], uint64(ms)<<16|0x7000|uint64(seq))
	binary.BigEndian.PutUint64(id[8:16], r&0x3FFFFFFFFFFFFFFF|0x8000000000000000)
	return id
}
