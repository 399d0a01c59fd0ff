package nodelink

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
)

// writesConn is a net.Conn that records each Write and reads nothing until closed.
type writesConn struct {
	net.Conn // nil: only what the writer calls is implemented
	writes   chan []byte
}

func (w *writesConn) Write(b []byte) (int, error) {
	w.writes <- bytes.Clone(b)
	return len(b), nil
}
func (w *writesConn) SetWriteDeadline(time.Time) error { return nil }
func (w *writesConn) Close() error                     { return nil }

func newWritesConn(t *testing.T, delay time.Duration) (*conn, *writesConn) {
	w := &writesConn{writes: make(chan []byte, 16)}
	c := newConn(&Link{cfg: Config{Timeout: time.Second, MaxFrame: cluster.MaxFrameSize}}, "peer", w)
	c.delay = delay
	go c.writeLoop()
	t.Cleanup(func() { c.close(nil) })
	return c, w
}

func frameBytes(id uint32, fr cluster.Frame) []byte { return cluster.AppendFrame(nil, 0, id, fr) }

// A lazy frame (a heartbeat) does not wake the writer: it goes in the same write as the next
// frame that does, before it.
func TestALazyFrameGoesWithTheNextFrame(t *testing.T) {
	c, w := newWritesConn(t, time.Hour)
	hb := &cluster.TimeoutNow{Group: "lazy"}
	now := &cluster.TimeoutNow{Group: "eager"}
	if err := c.sendLazy(0, 1, hb); err != nil {
		t.Fatal(err)
	}
	if err := c.send(0, 2, now); err != nil {
		t.Fatal(err)
	}
	want := append(frameBytes(1, hb), frameBytes(2, now)...)
	select {
	case got := <-w.writes:
		if !bytes.Equal(got, want) {
			t.Fatalf("the first write holds %d bytes, want the lazy frame and the next one (%d bytes) in order", len(got), len(want))
		}
	case <-time.After(time.Minute):
		t.Fatal("nothing was written")
	}
}

// A lazy frame alone is written once its delay has passed.
func TestALazyFrameAloneIsWrittenAfterItsDelay(t *testing.T) {
	c, w := newWritesConn(t, time.Millisecond)
	hb := &cluster.TimeoutNow{Group: "lazy"}
	for i := range 3 { // the timer is armed again after each write
		if err := c.sendLazy(0, uint32(i+1), hb); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-w.writes:
			if want := frameBytes(uint32(i+1), hb); !bytes.Equal(got, want) {
				t.Fatalf("write %d holds %d bytes, want the lazy frame's %d", i, len(got), len(want))
			}
		case <-time.After(time.Minute):
			t.Fatalf("lazy frame %d was never written", i)
		}
	}
}
