package events_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/events"
)

var _ broker.Events = (*events.Events)(nil)

func TestBrokerEventsArePublished(t *testing.T) {
	b := bus.New(bus.Options{})
	sub, _ := b.Subscribe("rift.events.>", "")
	e := events.New(b)
	e.QueueCreated("orders")
	e.QueueDeleted("orders")
	e.DeadLettered("orders", engine.MsgID{1})
	e.AuthFailure("127.0.0.1:1", "bad token")
	for _, want := range []string{events.QueueCreated, events.QueueDeleted, events.DeadLettered, events.AuthFailed} {
		m, err := sub.Next(context.Background())
		var ev events.Event
		if err != nil || m.Subject != want || json.Unmarshal(m.Payload, &ev) != nil || ev.Time.IsZero() {
			t.Fatalf("got %s %s %v, want %s", m.Subject, m.Payload, err, want)
		}
		if want == events.DeadLettered && (ev.Queue != "orders" || ev.MessageID != (engine.MsgID{1}).String()) {
			t.Fatalf("dead-letter event %+v", ev)
		}
	}
	var nilEvents *events.Events
	nilEvents.QueueCreated("x") // a nil Events drops events
}
