package broker

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
	"github.com/filamq/fila/server/storage"
)

// wedgedStore is the storage twin whose log appends, once wedge is called, never return: the
// requests in flight inside a stuck store (a commit that panicked inside Pebble's commit pipeline
// leaves it locked, and every commit waiting on it waits for good).
type wedgedStore struct {
	*storage.Mem
	once    sync.Once
	wedged  chan struct{} // closed by wedge
	entered chan struct{} // one per append that found the store wedged
}

func newWedgedStore() *wedgedStore {
	return &wedgedStore{Mem: storage.NewMem(), wedged: make(chan struct{}), entered: make(chan struct{}, 64)}
}

func (s *wedgedStore) wedge() { s.once.Do(func() { close(s.wedged) }) }

func (s *wedgedStore) QueueLog(queue string) (raftstore.LogStableStore, raft.SnapshotStore, error) {
	logs, snaps, err := s.Mem.QueueLog(queue)
	return wedgedLog{LogStableStore: logs, s: s}, snaps, err
}

type wedgedLog struct {
	raftstore.LogStableStore
	s *wedgedStore
}

func (l wedgedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l wedgedLog) StoreLogs(logs []*raft.Log) error {
	select {
	case <-l.s.wedged:
		select {
		case l.s.entered <- struct{}{}:
		default:
		}
		select {} // never returns, as a commit behind a locked pipeline
	default:
	}
	return l.LogStableStore.StoreLogs(logs)
}

// A store that gets stuck while the broker closes must not hang Close: the queue groups wait on
// appends that never return, so Close gives up on them and says why (the process exits, and the
// next start replays the log). Before, Close waited for them for ever.
func TestCloseOfAStoreStuckWithWritesInFlightReturns(t *testing.T) {
	for _, stuckFirst := range []bool{true, false} {
		name := map[bool]string{true: "stuck before Close", false: "stuck during Close"}[stuckFirst]
		t.Run(name, func(t *testing.T) {
			st := newWedgedStore()
			b, err := Open(Options{Store: st, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
				t.Fatal(e)
			}
			st.wedge()
			b.Enqueue([]Message{{Queue: "q", Payload: []byte("m")}}, func([]EnqueueResult, *Error) {})
			<-st.entered // the Enqueue's round is inside the store, and stays there
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
