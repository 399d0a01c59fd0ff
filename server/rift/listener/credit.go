package listener

import (
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Stream credit. The listener runs QUIC with RequireStreamCreditRelease: a stream the client
// opened keeps counting against its MaxStreams until the stream has completed (both halves
// finished, the answer acknowledged) and the server has released its credit. quic-go queues a
// MAX_STREAMS frame the moment both are true, and sends it at once. Released when its handler
// returns, a single call's stream completes when the client acknowledges the answer, so every
// call would cost one more packet from the server carrying only MAX_STREAMS, and that packet
// would make the client acknowledge at once (two ack-eliciting packets in a row) instead of in
// its next request: two packets per call that carry nothing.
//
// credits therefore parks the stream of a single call that answered, and releases it right after
// the next answer on the same connection was queued: by then the client's next request has
// acknowledged the parked answer, so the stream has completed and its MAX_STREAMS frame rides in
// the packet of the new answer. A parked stream the next answer does not release (no next call
// within releaseDelay) is released by a timer. Every other stream releases its credit when its
// handler returns. At most the streams that answered since the last answer are parked at any
// moment, so the client's stream limit is reduced by about one at most, for at most releaseDelay.
type credits struct {
	mu     sync.Mutex
	parked []*quic.Stream
	timer  *time.Timer
	closed bool
}

// releaseDelay bounds how long a parked stream's credit is held: quic-go's maximum ACK delay,
// after which the client has acknowledged the answer anyway.
const releaseDelay = 25 * time.Millisecond

// park holds back the credit of s, a single call that has answered and finished.
func (c *credits) park(s *quic.Stream) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		s.ReleaseStreamCredit()
		return
	}
	c.parked = append(c.parked, s)
	if len(c.parked) > 1 {
		return
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(releaseDelay, c.release)
	} else {
		c.timer.Reset(releaseDelay)
	}
}

// release releases the credit of every parked stream.
func (c *credits) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.releaseLocked()
}

func (c *credits) releaseLocked() {
	for _, s := range c.parked {
		s.ReleaseStreamCredit()
	}
	clear(c.parked)
	c.parked = c.parked[:0]
}

// close releases what is parked and stops the timer; later streams release their credit at once.
func (c *credits) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.releaseLocked()
}
