package rift_test

import (
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/client/rift"
)

// A control identity creates, lists, describes and deletes streams through the SDK against a
// real server; the new stream takes records at once; refusals are typed.
func TestStreamAdministration(t *testing.T) {
	s := startServer(t)
	c := s.client(t, "admin-token")
	ctx := t.Context()
	cfg := rift.StreamConfig{Name: "orders", Subjects: []string{"orders.>"}, Durability: "os", MaxMsgs: 100, MaxAge: time.Hour}
	in, created, err := c.CreateStream(ctx, cfg)
	if err != nil || !created || in.Name != "orders" || in.Source != "runtime" || in.MaxAge() != time.Hour || in.Durability != "os" {
		t.Fatalf("create: %+v, %v, %v", in, created, err)
	}
	if _, created, err := c.CreateStream(ctx, cfg); err != nil || created {
		t.Errorf("the same definition again: created %v, %v", created, err)
	}
	cfg.MaxMsgs = 5
	if _, _, err := c.CreateStream(ctx, cfg); !errors.Is(err, rift.ErrStreamExists) {
		t.Errorf("another definition: %v", err)
	}
	if _, err := c.StreamPublish(ctx, "orders", "orders.new", "", []byte("one")); err != nil {
		t.Fatal(err)
	}
	list, err := c.Streams(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "events" || list[0].Source != "config" || list[1].Name != "orders" || list[1].Messages != 1 {
		t.Errorf("list: %+v, %v", list, err)
	}
	if err := c.DeleteStream(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StreamInfo(ctx, "orders"); !errors.Is(err, rift.ErrStreamNotFound) {
		t.Errorf("info after delete: %v", err)
	}
	if _, err := c.StreamPublish(ctx, "orders", "orders.new", "", []byte("two")); err == nil {
		t.Error("published to a deleted stream")
	}
	var se *rift.StreamError
	if err := c.DeleteStream(ctx, "events"); !errors.As(err, &se) || se.Code != "invalid" {
		t.Errorf("deleting a configured stream: %v", err)
	}
	if _, _, err := c.CreateStream(ctx, rift.StreamConfig{Name: "bad", Subjects: []string{"a.>.b"}}); !errors.As(err, &se) || se.Code != "invalid" {
		t.Errorf("a bad pattern: %v", err)
	}
	// An identity without control = true may not administer streams.
	g := s.client(t, "game-token")
	if _, _, err := g.CreateStream(ctx, rift.StreamConfig{Name: "game", Subjects: []string{"game.>"}}); !rift.IsPermission(err) {
		t.Errorf("game created a stream: %v", err)
	}
}
