package broker

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/filamq/fila/server/storage"
)

// failDropStore is the storage twin whose next DropQueue fails, as when the disk fails between a
// DeleteQueue's commit and the removal of the queue's data.
type failDropStore struct {
	*storage.Mem
	failNext bool
}

func (s *failDropStore) DropQueue(queue string) error {
	if s.failNext {
		s.failNext = false
		return errors.New("disk full")
	}
	return s.Mem.DropQueue(queue)
}

// A queue created again under the name of a deleted queue whose data could not be removed must
// start empty: before the fix it reopened the deleted queue's Raft log, and its messages came back.
func TestQueueCreatedAfterAFailedDropStartsEmpty(t *testing.T) {
	st := &failDropStore{Mem: storage.NewMem()}
	b, err := Open(Options{Store: st, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	done := make(chan *Error, 1)
	b.Enqueue([]Message{{Queue: "q", Payload: []byte("old")}}, func(_ []EnqueueResult, e *Error) { done <- e })
	if e := <-done; e != nil {
		t.Fatal(e)
	}
	st.failNext = true
	if e := b.DeleteQueue("q"); e != nil {
		t.Fatal(e)
	}
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	stats, e := b.GetStats("q")
	if e != nil {
		t.Fatal(e)
	}
	if stats.Depth != 0 {
		t.Fatalf("the new queue holds %d messages, want none: the deleted queue's came back", stats.Depth)
	}
}
