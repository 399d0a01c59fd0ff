package rift_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"
)

// A publisher's writer batches publications: order is kept, payloads larger than its buffer
// bound go through, and Close sends what is still buffered before finishing the stream.
func TestPublisherBatchesInOrderAndCloseSendsTheRest(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	c := s.client(t, "admin-token")
	sub, err := c.Subscribe(ctx, "game.>", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.client(t, "admin-token").Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	payload := func(i int) []byte {
		size := 8
		switch {
		case i == 1000:
			size = 1 << 20 // larger than the writer's 512 KiB bound on its own
		case i%97 == 0:
			size = 70 << 10
		}
		b := bytes.Repeat([]byte{byte(i)}, size)
		binary.BigEndian.PutUint32(b, uint32(i))
		return b
	}
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if err := pub.Publish(ctx, fmt.Sprintf("game.%d", i%7), "", payload(i)); err != nil {
				errc <- err
				return
			}
		}
		errc <- pub.Close() // no Flush: Close must still send everything
	}()
	for i := range n {
		m, err := sub.Recv(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Subject != fmt.Sprintf("game.%d", i%7) || !bytes.Equal(m.Payload, payload(i)) {
			t.Fatalf("message %d: subject %s, %d bytes, first %d", i, m.Subject, len(m.Payload), binary.BigEndian.Uint32(m.Payload))
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, "game.x", "", nil); err == nil {
		t.Fatal("publish after Close succeeded")
	}
}

// Concurrent Publish and Flush calls on one Publisher: each goroutine's publications arrive in
// its order, and a Flush returns only after the publications made before it were routed.
func TestPublisherConcurrentUse(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	c := s.client(t, "admin-token")
	sub, err := c.Subscribe(ctx, "game.>", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := c.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := pub.Publish(ctx, fmt.Sprintf("game.w%d", w), "", binary.BigEndian.AppendUint32(nil, uint32(i))); err != nil {
					t.Error(err)
					return
				}
				if i%100 == 99 {
					if err := pub.Flush(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	next := make([]uint32, writers)
	for range writers * each {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		m, err := sub.Recv(rctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var w int
		fmt.Sscanf(m.Subject, "game.w%d", &w)
		if got := binary.BigEndian.Uint32(m.Payload); got != next[w] {
			t.Fatalf("writer %d: message %d, want %d", w, got, next[w])
		}
		next[w]++
	}
	wg.Wait()
}
