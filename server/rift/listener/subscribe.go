package listener

import (
	"errors"
	"io"
	"time"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/server/rift/bus"
)

// maxBatch is how many bytes of MESSAGE frames a subscription writes at once.
const maxBatch = 64 << 10

// subscribe registers the subscription, answers OK and delivers MESSAGE frames until the
// subscription ends: the client cancels (STOP_SENDING or reset), the subscriber falls behind
// (ERROR "slow consumer", or a reset with ResetSlowConsumer when even that cannot be written), a
// write stays blocked past the write deadline, or the connection closes.
func (o *op) subscribe(body []byte) {
	var f riftproto.Subscribe
	if !o.decode(&f, body) {
		return
	}
	// A delivery stream takes no frames: bytes already received after SUBSCRIBE end it, like
	// anything watchInput reads later. The read buffer is not needed any more.
	early := o.in.fr.Unread() > 0
	o.in.release()
	sub, err := o.sess.Subscribe(f.Pattern, f.Queue, bus.SubOptions{QueueMsgs: o.s.opts.SubQueueMsgs, QueueBytes: o.s.opts.SubQueueBytes, Account: o.acct})
	if err != nil {
		o.failWith(err)
		return
	}
	defer func() {
		sub.Unsubscribe()
		sub.Drain()
	}()
	if err := o.out.send(&riftproto.Ok{}); err != nil {
		o.abort()
		return
	}
	readerDone := make(chan error, 1)
	if early {
		readerDone <- errors.New("frame on a delivery stream")
	} else {
		go func() { readerDone <- o.watchInput() }()
	}
	// A subscription that fails while the writer is blocked on flow control unblocks it.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-sub.Done():
			o.str.SetWriteDeadline(time.Now())
		case <-stop:
		}
	}()
	for {
		select {
		case <-sub.Ready():
			m, ok := sub.TryNext()
			if !ok {
				continue
			}
			if err := o.deliver(sub, m); err != nil {
				// A failed write may have left half a frame: no ERROR can follow it.
				code := ResetWriteDeadline
				if errors.Is(sub.Err(), bus.ErrSlowConsumer) {
					code = ResetSlowConsumer
				}
				o.str.CancelWrite(code)
				o.str.CancelRead(ResetCancelled)
				return
			}
		case <-sub.Done():
			o.endDelivery(sub.Err())
			return
		case err := <-readerDone:
			if err != nil {
				o.abort()
				return
			}
			readerDone = nil // the client finished its sending half: keep delivering
		case <-o.str.Context().Done(): // STOP_SENDING from the client
			o.abort()
			return
		}
	}
}

// deliver writes m and whatever else is queued, up to maxBatch bytes, in one write.
func (o *op) deliver(sub *bus.Subscription, m bus.Message) error {
	var msg riftproto.Message
	for {
		msg.Subject, msg.Reply, msg.Payload = m.Subject, m.Reply, m.Payload
		o.out.buf = riftproto.AppendFrame(o.out.buf, &msg)
		if len(o.out.buf) >= maxBatch {
			sub.Rearm() // the rest waits for the next turn of the delivery loop
			break
		}
		var ok bool
		if m, ok = sub.TryNext(); !ok {
			break
		}
	}
	return o.out.flush()
}

// endDelivery terminates the delivery stream, between frames, with the reason the subscription
// ended.
func (o *op) endDelivery(err error) {
	switch {
	case errors.Is(err, bus.ErrSlowConsumer):
		// The ERROR goes out when flow control has room for it now; otherwise the stream is reset.
		frame := riftproto.AppendFrame(o.out.buf[:0], &riftproto.Error{Code: riftproto.CodeOperation, Message: "slow consumer"})
		if e := o.str.TryWriteAll(frame); e != nil {
			o.str.CancelWrite(ResetSlowConsumer)
		} else {
			o.str.Close()
		}
		o.str.CancelRead(ResetCancelled)
	case errors.Is(err, bus.ErrClosed):
		o.out.fail(riftproto.CodeOperation, "server shutting down")
	default:
		o.abort()
	}
}

// watchInput reads what the client sends after SUBSCRIBE: nil when it finishes its sending half,
// an error when it resets the stream or sends anything (a delivery stream takes no frames).
func (o *op) watchInput() error {
	var b [1]byte
	o.str.SetReadDeadline(time.Time{})
	n, err := o.str.Read(b[:])
	if n > 0 {
		return errors.New("frame on a delivery stream")
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
