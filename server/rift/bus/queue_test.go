package bus

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/filamq/fila/server/membudget"
)

// An idle subscription holds no slots of its queue in its account, a backlog holds what it
// needs (a ring of a power of two slots, at most twice the messages waiting), and a drained
// backlog gives them back; the queue's bound still ends a subscription that reaches it.
func TestAQueueHoldsSlotsOnlyForWaitingMessages(t *testing.T) {
	acct := membudget.New(1<<30).Open(1<<30, nil)
	b := New(Options{QueueMsgs: 8192})
	s, err := b.SubscribeWith("x", "", SubOptions{Account: acct})
	if err != nil {
		t.Fatal(err)
	}
	if used := acct.Used(); used != 0 {
		t.Fatalf("an idle subscription holds %d bytes, want 0", used)
	}
	const waiting = 1000
	for range waiting {
		if n, _ := b.Publish("x", "", []byte("p")); n != 1 {
			t.Fatal("the subscription refused a message below its bound")
		}
	}
	perMessage := messageMemory(Message{Subject: "x", Payload: []byte("p")})
	slots := (acct.Used() - waiting*perMessage) / slotBytes
	if slots < waiting || slots > 2*waiting {
		t.Fatalf("%d messages waiting hold %d slots, want %d to %d", waiting, slots, waiting, 2*waiting)
	}
	for range waiting {
		if _, ok := s.TryNext(); !ok {
			t.Fatal("a waiting message was lost")
		}
	}
	if used := acct.Used(); used != minSlots*slotBytes {
		t.Fatalf("a drained subscription holds %d bytes, want its %d smallest slots' %d", used, minSlots, minSlots*slotBytes)
	}
	s.Unsubscribe()
	if used := acct.Used(); used != 0 {
		t.Fatalf("an ended subscription holds %d bytes, want 0", used)
	}

	small, _ := b.Subscribe("y", "")
	small.q.max = 3
	for i := range 4 {
		b.Publish("y", "", []byte{byte(i)})
	}
	if !errors.Is(small.Err(), ErrSlowConsumer) {
		t.Fatalf("a queue past its bound: %v, want ErrSlowConsumer", small.Err())
	}
	for i := range 3 { // what was queued before the end is still delivered, in order
		if m, err := small.Next(context.Background()); err != nil || m.Payload[0] != byte(i) {
			t.Fatalf("message %d after the end: %v %v", i, m.Payload, err)
		}
	}
	if _, err := small.Next(context.Background()); !errors.Is(err, ErrSlowConsumer) {
		t.Fatalf("after the queued messages: %v, want ErrSlowConsumer", err)
	}
}

// 2,000 idle subscriptions with the default bound of 8,192 messages each cost a few hundred
// bytes apiece on the heap (a channel of the bound cost 448 KiB each, 896 MiB for these).
func TestIdleSubscriptionsAreSmall(t *testing.T) {
	b := New(Options{})
	const subs = 2000
	before := heapInUse()
	keep := make([]*Subscription, 0, subs)
	for range subs {
		s, err := b.Subscribe("idle.>", "")
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, s)
	}
	per := (heapInUse() - before) / subs
	if per > 2048 {
		t.Fatalf("an idle subscription costs %d bytes of heap, want at most 2 KiB", per)
	}
	t.Logf("an idle subscription: %d bytes of heap", per)
	runtime.KeepAlive(keep)
}

func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
