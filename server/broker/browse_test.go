package broker

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/storage"
)

// Pages read while messages are enqueued and deleted beside them are consistent: each message
// with the body it was enqueued with (read from the store, the body cache holding next to
// nothing), pages in enqueue order, no message twice. Run with -race: bodies are read off the
// queue's goroutine.
func TestPeekWhileTheQueueChanges(t *testing.T) {
	db, err := storage.Open(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(Options{Store: db, BodyCacheBytes: 1, IdleTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	var mu sync.Mutex
	var ids []engine.MsgID // enqueued, in order
	enqueue := func(from, n int) {
		msgs := make([]Message, n)
		for i := range msgs {
			k := fmt.Sprint(from + i)
			msgs[i] = Message{Queue: "q", Headers: map[string]string{"n": k}, Payload: []byte("payload " + k)}
		}
		done := make(chan []EnqueueResult, 1)
		b.Enqueue(msgs, func(res []EnqueueResult, e *Error) {
			if e != nil {
				t.Error(e)
			}
			done <- res
		})
		mu.Lock()
		for _, r := range <-done {
			ids = append(ids, engine.MsgID(r.ID))
		}
		mu.Unlock()
	}
	enqueue(0, 500)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // enqueue more and delete the oldest while pages are read
		defer wg.Done()
		for round := range 20 {
			enqueue(500+round*50, 50)
			mu.Lock()
			victim := ids[round*10]
			mu.Unlock()
			if e := b.DeleteMessage("q", victim); e != nil {
				t.Error(e)
			}
		}
	}()
	for range 10 {
		seen := map[engine.MsgID]bool{}
		var after *engine.MsgID
		for {
			page, e := b.Peek("q", after, 37)
			if e != nil {
				t.Fatal(e)
			}
			for _, m := range page.Messages {
				if seen[m.ID] {
					t.Fatalf("message %v came twice", m.ID)
				}
				seen[m.ID] = true
				if m.BodyMissing || !bytes.Equal(m.Payload, []byte("payload "+m.Headers["n"])) || m.Attempts != 0 || m.State != "ready" {
					t.Fatalf("message %v peeked as %+v", m.ID, m)
				}
			}
			if !page.More {
				break
			}
			last := page.Messages[len(page.Messages)-1].ID
			after = &last
		}
		if len(seen) < 500-20 {
			t.Fatalf("a pass through the queue saw %d messages", len(seen))
		}
	}
	wg.Wait()
	stats, e := b.GetStats("q")
	if e != nil {
		t.Fatal(e)
	}
	if stats.Depth != 500+20*50-20 {
		t.Fatalf("depth %d after the deletions, want %d", stats.Depth, 500+20*50-20)
	}
	if _, e := b.Message("q", ids[0]); e == nil || e.Code != CodeMessageNotFound {
		t.Fatalf("a deleted message read back: %v", e)
	}
	if e := b.DeleteMessage("q", ids[0]); e == nil || e.Code != CodeMessageNotFound {
		t.Fatalf("a second delete answered %v", e)
	}
	if _, e := b.Peek("q", nil, MaxPeekCount+1); e == nil || e.Code != CodeInvalidConfigValue {
		t.Fatalf("a peek of %d answered %v", MaxPeekCount+1, e)
	}
}
