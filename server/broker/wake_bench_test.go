package broker

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/filamq/fila/server/queuegroup"
	"github.com/filamq/fila/server/raftgroup"
)

// BenchmarkWakeBacklog wakes a hibernated queue whose log holds 50,000 entries (one message
// each, no snapshot yet) on the real store: ns/op is an Enqueue to the sleeping queue, from the
// call until it is answered, which opens the group (raft's restore reads and applies the whole
// log). "verify" times raftgroup.Verify over the same log: the extra read of the log every wake
// made before Open stopped calling it, so the old wake took about wake + verify.
func BenchmarkWakeBacklog(b *testing.B) {
	const entries = 50_000
	o := DefaultOptions(b.TempDir())
	o.Sync = false
	o.IdleTimeout = 20 * time.Millisecond
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	br, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	if e := br.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		b.Fatal(e)
	}
	enqueue := func() {
		done := make(chan *Error, 1)
		br.Enqueue([]Message{{Queue: "q", Payload: make([]byte, 100)}}, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			b.Fatal(e)
		}
	}
	for range entries {
		enqueue()
	}
	asleep := func() {
		for br.AwakeQueues() != 0 {
			time.Sleep(time.Millisecond)
		}
	}
	logs, _, err := br.db.QueueLog("q", queuegroup.Bodies{})
	if err != nil {
		b.Fatal(err)
	}
	first, _ := logs.FirstIndex()
	last, _ := logs.LastIndex()
	if last-first < entries {
		b.Fatalf("the log holds %d entries, want %d or more", last-first, entries)
	}
	b.Run("wake", func(b *testing.B) {
		b.StopTimer()
		for range b.N {
			asleep()
			b.StartTimer()
			enqueue()
			b.StopTimer()
		}
	})
	b.Run("verify", func(b *testing.B) {
		asleep()
		for b.Loop() {
			if err := raftgroup.Verify(logs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
