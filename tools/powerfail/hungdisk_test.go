package powerfail

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// closeTimeoutLog is what fila-server logs when its stores do not close within shutdown_timeout
// (cmd/fila-server closeStores).
const closeTimeoutLog = "did not close within shutdown_timeout"

// TestShutdownWithAHungDiskEnds: SIGTERM while the disk answers no write at all (every write,
// fsync and allocation waits) and an Enqueue waits inside the store. The server still gives its
// shutdown up, with the line saying its stores did not close in time, and exits 1; the next
// start has every message it acknowledged. Before, the shutdown waited for the store for as
// long as the disk did.
func TestShutdownWithAHungDiskEnds(t *testing.T) {
	r := newRun(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := fila.Dial(ctx, r.srv.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const acked = 5
	for i := range acked {
		res, err := c.Enqueue(ctx, fila.Message{Queue: queueName, Payload: []byte{byte(i)}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("enqueue %d: %v %+v", i, err, res)
		}
	}
	r.fs.HoldWrites()
	t.Cleanup(r.fs.ReleaseWrites) // before the unmount and the server's stop
	go c.Enqueue(context.Background(), fila.Message{Queue: queueName, Payload: []byte("hangs")})
	time.Sleep(200 * time.Millisecond) // lets it reach the store; a short wait only weakens the test
	r.srv.cmd.Process.Signal(syscall.SIGTERM)
	// The server gives its shutdown up by itself. Its exit then waits in the kernel, which closes
	// its files on the mount only once their writes are answered (as on a real disk that hangs):
	// so the disk answers again once the server has said it is exiting.
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(r.srv.logs.String(), closeTimeoutLog); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) { // two shutdown_timeouts of 10 s, with room to spare
			t.Fatalf("fila-server did not give its shutdown up within 2 minutes of SIGTERM with the disk hung; its log:\n%s", r.srv.logs.tail(20))
		}
	}
	r.fs.ReleaseWrites()
	<-r.srv.exited
	if code := r.srv.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit code %d, want 1; its log:\n%s", code, r.srv.logs.tail(20))
	}
	r.start()
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute) // the restart's own minute: the first one has paid for the shutdown
	defer cancel()
	c2, err := fila.Dial(ctx, r.srv.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	st, err := c2.GetStats(ctx, queueName)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth < acked {
		t.Fatalf("after the restart the queue holds %d messages, want at least the %d acknowledged", st.Depth, acked)
	}
}
