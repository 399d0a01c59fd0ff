package rift_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/filamq/fila/client/rift"
)

func TestConnectNeedsExplicitRootsAndAValidToken(t *testing.T) {
	s := startServer(t)
	if _, err := rift.Connect(t.Context(), s.addr, "localhost", &tls.Config{}, "admin-token"); !errors.Is(err, rift.ErrNoTrustRoots) {
		t.Fatalf("no roots: %v", err)
	}
	if _, err := s.connect(t.Context(), "wrong"); err == nil {
		t.Fatal("a wrong token authenticated")
	}
	tc, _ := rift.TLSConfig(s.ca)
	if _, err := rift.Connect(t.Context(), s.addr, "example.org", tc, "admin-token"); err == nil {
		t.Fatal("the server name was not verified")
	}
}

func TestPublishSubscribeFlush(t *testing.T) {
	s := startServer(t)
	c := s.client(t, "admin-token")
	ctx := t.Context()
	sub, err := c.Subscribe(ctx, "game.score.*", "")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := c.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := pub.Publish(ctx, "game.score.player42", "", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Recv is cancellation safe: a cancelled wait loses nothing.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := sub.Recv(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Recv: %v", err)
	}
	seen := 0
	for seen < 100 {
		wait, cancel := context.WithTimeout(ctx, time.Millisecond)
		m, err := sub.Recv(wait)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			continue // cancelled mid-wait: the next Recv still gets every message in order
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != "game.score.player42" || string(m.Payload) != fmt.Sprint(seen) {
			t.Fatalf("message %d: %+v", seen, m)
		}
		seen++
	}
	if err := pub.PublishAck(ctx, "game.score.x", "", nil); err != nil {
		t.Fatal(err)
	}
	sub.Close()
}

func TestPublisherBreaksAfterAFailureAndSharedPublishReopens(t *testing.T) {
	s := startServer(t)
	c := s.client(t, "game-token")
	ctx := t.Context()
	watcher := s.client(t, "admin-token")
	sub, err := watcher.Subscribe(ctx, "game.>", "")
	if err != nil {
		t.Fatal(err)
	}

	pub, err := c.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pub.Publish(ctx, "chat.x", "", nil) // refused by the server: seen at the flush
	if err := pub.Flush(ctx); !rift.IsPermission(err) {
		t.Fatalf("flush after a refused publish: %v", err)
	}
	if err := pub.Publish(ctx, "game.a", "", nil); !errors.Is(err, rift.ErrBroken) {
		t.Fatalf("publish on a broken publisher: %v", err)
	}
	// A cancelled operation breaks a publisher too.
	pub2, _ := c.Publisher(ctx)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := pub2.Publish(cancelled, "game.a", "", nil); err == nil {
		t.Fatal("publish with a cancelled context succeeded")
	}
	if err := pub2.Publish(ctx, "game.a", "", nil); !errors.Is(err, rift.ErrBroken) {
		t.Fatalf("after a cancelled publish: %v", err)
	}

	// The shared publisher: a failure, then the next call opens a new stream; nothing is retried.
	if err := c.Publish(ctx, "chat.x", "", []byte("refused")); err != nil {
		t.Fatal(err) // PUBLISH is not answered: the refusal shows at the flush
	}
	if err := c.Flush(ctx); !rift.IsPermission(err) {
		t.Fatalf("shared flush: %v", err)
	}
	if err := c.Publish(ctx, "game.ok", "", []byte("after")); err != nil {
		t.Fatalf("shared publish after a failure: %v", err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := sub.Recv(ctx)
	if err != nil || string(m.Payload) != "after" {
		t.Fatalf("got %+v %v, want only the publication after the failure", m, err)
	}
}

func TestRequestReply(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	responder := s.client(t, "svc-token")
	sub, err := responder.Subscribe(ctx, "svc.echo", "workers")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			m, err := sub.Recv(ctx)
			if err != nil {
				return
			}
			responder.Publish(ctx, m.Reply, "", append([]byte("echo:"), m.Payload...))
			responder.Flush(ctx)
		}
	}()
	c := s.client(t, "game-token")
	m, err := c.Request(ctx, "svc.echo", []byte("hi"), 10*time.Second)
	if err != nil || string(m.Payload) != "echo:hi" {
		t.Fatalf("request: %+v %v", m, err)
	}
	if _, err := c.Request(ctx, "svc.nobody", nil, 10*time.Second); err == nil {
		t.Fatal("request without responders succeeded")
	}
	if _, err := c.Request(ctx, "chat.x", nil, time.Second); !rift.IsPermission(err) {
		t.Fatalf("request outside the ACL: %v", err)
	}
}

func TestStreamsAndConsumers(t *testing.T) {
	s := startServer(t)
	ctx := t.Context()
	c := s.client(t, "admin-token")
	var stored []rift.Stored
	for i := range 3 {
		st, err := c.StreamPublish(ctx, "events", "events.a", "", []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, st)
	}
	if stored[0].Sequence != 1 || stored[2].Sequence != 3 {
		t.Fatalf("stored %+v", stored)
	}
	if _, err := c.StreamPublish(ctx, "nope", "events.a", "", nil); err == nil {
		t.Fatal("unknown stream accepted")
	}
	k, err := c.Consumer(ctx, "events", "work", rift.ConsumerConfig{AckWait: time.Hour, MaxAckPending: 10})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := k.Fetch(ctx, 10)
	if err != nil || len(ds) != 3 || ds[1].TimestampMillis != stored[1].TimestampMillis || ds[0].DeliveryCount != 1 {
		t.Fatalf("fetch %+v %v", ds, err)
	}
	for _, d := range ds {
		if err := k.Ack(ctx, d.Sequence); err != nil {
			t.Fatal(err)
		}
	}
	if ds, err := k.Fetch(ctx, 10); err != nil || len(ds) != 0 {
		t.Fatalf("after acks: %+v %v", ds, err)
	}
	if _, err := c.Consumer(ctx, "events", "work", rift.ConsumerConfig{AckWait: time.Minute, MaxAckPending: 10}); err == nil {
		t.Fatal("reopened with another configuration")
	}
}
