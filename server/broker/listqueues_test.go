package broker

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/filamq/fila/server/storage"
)

// ListQueues reads each queue's counters without the per-key statistics: it built and sorted
// every fairness key's (8 MB and 146 ms for a queue of 200,000 keys, with the queue's actor busy
// meanwhile) to report three counters. The bytes it allocates for a queue of 100,000 keys stay
// far below one entry per key (40 bytes each: 4 MB).
func TestListQueuesDoesNotReadEveryKey(t *testing.T) {
	b, err := Open(Options{Store: storage.NewMem(), IdleTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	const keys = 100_000
	for i := 0; i < keys; i += 1000 {
		msgs := make([]Message, 0, 1000)
		for j := range 1000 {
			msgs = append(msgs, Message{Queue: "q", FairnessKey: fmt.Sprint("k", i+j), Payload: []byte("m")})
		}
		done := make(chan *Error, 1)
		b.Enqueue(msgs, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	list := b.ListQueues()
	runtime.ReadMemStats(&after)
	if len(list) != 2 || list[0].Depth != keys {
		t.Fatalf("ListQueues: %+v", list)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("ListQueues allocated %d bytes for a queue of %d keys, want at most 1 MiB", got, keys)
	}
}
