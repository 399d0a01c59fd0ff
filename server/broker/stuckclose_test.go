package broker

import (
	"errors"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/server/storage"
)

// A store that gets stuck while the broker closes must not hang Close: the queue groups wait on
// appends that never return (a commit that panicked inside Pebble's commit pipeline leaves it
// locked, and every commit waiting on it waits for good), so Close gives up on them and says
// why (the process exits, and the next start replays the log). Before, Close waited for ever.
func TestCloseOfAStoreStuckWithWritesInFlightReturns(t *testing.T) {
	for _, stuckFirst := range []bool{true, false} {
		name := map[bool]string{true: "stuck before Close", false: "stuck during Close"}[stuckFirst]
		t.Run(name, func(t *testing.T) {
			st := storage.NewMem()
			b, err := Open(Options{Store: st, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
				t.Fatal(e)
			}
			hanging := st.HangAppends()
			b.Enqueue([]Message{{Queue: "q", Payload: []byte("m")}}, func([]EnqueueResult, *Error) {})
			<-hanging // the Enqueue's round is inside the store, and stays there
			if stuckFirst {
				st.Stick(syscall.EIO)
			}
			closed := make(chan error, 1)
			go func() { closed <- b.Close() }()
			if !stuckFirst {
				st.Stick(syscall.EIO)
			}
			select {
			case err = <-closed:
			case <-time.After(time.Minute):
				t.Fatal("Close of a stuck store has not returned after a minute")
			}
			if !errors.Is(err, ErrStorageStuck) {
				t.Fatalf("Close of a stuck store returned %v, want ErrStorageStuck", err)
			}
		})
	}
}
