package listener_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/service"

	"github.com/quic-go/quic-go"
)

// admin sends a REQUEST to a stream administration subject and decodes the JSON reply.
func admin(t *testing.T, c *quic.Conn, subj, body string) service.StreamReply {
	t.Helper()
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Request{TimeoutMs: 10_000, Subject: subj, Payload: []byte(body)})
	m := rt.Expect[*riftproto.Message](t, s)
	var r service.StreamReply
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		t.Fatalf("%s answered %q: %v", subj, m.Payload, err)
	}
	return r
}

// Over the wire, a control identity creates a stream with a REQUEST to
// rift.control.stream.create; it is usable at once, listed, described, there after a restart,
// and deleted with its records.
func TestStreamsCreatedAndDeletedOverRift(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	evs := rt.Subscribe(t, c, "rift.events.stream.>", "")
	r := admin(t, c, service.StreamCreateSubject, `{"name":"orders","subjects":["orders.>"],"durability":"os","max_msgs":1000,"max_age_ms":60000}`)
	if r.Error != "" || !r.Created || r.Stream == nil || r.Stream.Name != "orders" || r.Stream.Source != "runtime" || r.Stream.MaxAgeMs != 60000 {
		t.Fatalf("create: %+v", r)
	}
	if again := admin(t, c, service.StreamCreateSubject, `{"name":"orders","subjects":["orders.>"],"durability":"os","max_msgs":1000,"max_age_ms":60000}`); again.Error != "" || again.Created {
		t.Errorf("the same create again: %+v", again)
	}
	if m := rt.Expect[*riftproto.Message](t, evs); m.Subject != "rift.events.stream.created" || !strings.Contains(string(m.Payload), `"stream":"orders"`) {
		t.Errorf("event %s %s", m.Subject, m.Payload)
	}
	publish(t, c, "orders", "orders.new", "one")
	publish(t, c, "orders", "orders.new", "two")
	call(t, c, &riftproto.ConsumerOpen{Stream: "orders", Name: "billing", AckWaitMs: 60_000, MaxAckPending: 10})

	r = admin(t, c, service.StreamListSubject, "")
	if len(r.Streams) != len(streams)+1 || r.Streams[len(streams)].Name != "orders" || r.Streams[0].Source != "config" {
		t.Errorf("list: %+v", r.Streams)
	}

	f.restart()
	c = rt.Connect(t, f.addr, "admin-token")
	r = admin(t, c, service.StreamInfoSubject, `{"name":"orders"}`)
	if r.Error != "" || r.Stream.Messages != 2 || r.Stream.Consumers != 1 || r.Stream.Durability != "os" {
		t.Fatalf("info after the restart: %+v", r)
	}
	if ds := fetch(t, c, "orders", "billing", 10); len(ds) != 2 || string(ds[1].Payload) != "two" {
		t.Errorf("fetch after the restart: %+v", ds)
	}

	evs = rt.Subscribe(t, c, "rift.events.stream.>", "")
	if r = admin(t, c, service.StreamDeleteSubject, `{"name":"orders"}`); r.Error != "" || r.Deleted != "orders" {
		t.Fatalf("delete: %+v", r)
	}
	if m := rt.Expect[*riftproto.Message](t, evs); m.Subject != "rift.events.stream.deleted" {
		t.Errorf("event %s %s", m.Subject, m.Payload)
	}
	s := rt.Open(t, c)
	s.Send(t, &riftproto.StreamPublish{Stream: "orders", Subject: "orders.new", Payload: []byte("three")})
	if e := rt.ExpectError(t, s, riftproto.CodeOperation); e.Message == "" {
		t.Error("publish to a deleted stream: an ERROR without a message")
	}
	f.restart()
	c = rt.Connect(t, f.addr, "admin-token")
	if r = admin(t, c, service.StreamInfoSubject, `{"name":"orders"}`); r.Code != "not_found" {
		t.Errorf("info after delete and restart: %+v", r)
	}
}

// Bad requests get a JSON error with a code; identities without control may not use the
// subjects at all (ERROR code 1), whatever their ACL.
func TestStreamAdminRefusals(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	for _, tc := range []struct{ subj, body, code string }{
		{service.StreamCreateSubject, `{"name":"x"}`, "invalid"},                                 // no subjects
		{service.StreamCreateSubject, `{"name":"x","subjects":["x"],"max_age":"1h"}`, "invalid"}, // unknown field
		{service.StreamCreateSubject, `{"name":"x","subjects":["x"],"durability":"disk"}`, "invalid"},
		{service.StreamCreateSubject, `{"name":"x","subjects":["x"],"max_msgs":-1}`, "invalid"},
		{service.StreamCreateSubject, `not json`, "invalid"},
		{service.StreamCreateSubject, `{"name":"events","subjects":["other.>"]}`, "exists"},
		{service.StreamDeleteSubject, `{"name":"events"}`, "invalid"}, // configured
		{service.StreamDeleteSubject, `{"name":"nope"}`, "not_found"},
		{service.StreamInfoSubject, `{"name":"nope"}`, "not_found"},
		{"rift.control.stream.purge", `{"name":"events"}`, "invalid"},
	} {
		if r := admin(t, c, tc.subj, tc.body); r.Code != tc.code || r.Error == "" {
			t.Errorf("%s %s: %+v, want code %s", tc.subj, tc.body, r, tc.code)
		}
	}
	n := rt.Connect(t, f.addr, "noctl-token")
	s := rt.Open(t, n)
	s.Send(t, &riftproto.Request{TimeoutMs: 10_000, Subject: service.StreamCreateSubject, Payload: []byte(`{"name":"x","subjects":["x"]}`)})
	rt.ExpectError(t, s, riftproto.CodePermission)
	if _, err := f.svc.Streams.Info("x"); err == nil {
		t.Error("a refused create made the stream")
	}
}
