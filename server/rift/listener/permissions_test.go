package listener_test

import (
	"testing"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
)

// expectResult reads the answer of a one-frame operation: OK (or the given success frame type) when
// code is 0, else ERROR with code.
func expectResult(t *testing.T, s *rt.Stream, code riftproto.ErrorCode, what string) {
	t.Helper()
	f, err := s.Next()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	e, isErr := f.(*riftproto.Error)
	switch {
	case code == 0 && isErr:
		t.Fatalf("%s: refused with %v %q, want success", what, e.Code, e.Message)
	case code != 0 && !isErr:
		t.Fatalf("%s: got %T, want ERROR %v", what, f, code)
	case code != 0 && e.Code != code:
		t.Fatalf("%s: ERROR %v %q, want %v", what, e.Code, e.Message, code)
	}
}

func TestPermissions(t *testing.T) {
	f := start(t, nil)
	const ok, perm, bad = 0, riftproto.CodePermission, riftproto.CodeOperation
	type check struct {
		token string
		frame riftproto.Frame
		want  riftproto.ErrorCode
		what  string
	}
	pubAck := func(subj, reply string) riftproto.Frame { return &riftproto.PublishAck{Subject: subj, Reply: reply} }
	sub := func(p string) riftproto.Frame { return &riftproto.Subscribe{Pattern: p} }
	for _, c := range []check{
		// publish ACL
		{"game-token", pubAck("game.score", ""), ok, "publish inside game.>"},
		{"game-token", pubAck("chat.x", ""), perm, "publish outside the ACL"},
		{"game-token", pubAck("game", ""), perm, "game.> does not match bare game"},
		// subscriptions must be contained
		{"game-token", sub("game.x"), ok, "literal inside game.*"},
		{"game-token", sub("game.*"), ok, "the pattern itself"},
		{"game-token", sub("game.>"), perm, "game.* does not authorize game.>"},
		{"game-token", sub(">"), perm, "game.* does not authorize >"},
		{"game-token", sub("game.x.y"), perm, "game.* is one token"},
		{"wide-token", sub("game.a.b"), ok, "inside game.>"},
		{"wide-token", sub("game"), perm, "game.> does not authorize bare game"},
		// rift.control needs control = true on top of the ACL
		{"noctl-token", sub(">"), perm, "> overlaps rift.control"},
		{"noctl-token", sub("rift.control"), perm, "bare rift.control"},
		{"noctl-token", sub("rift.*"), perm, "rift.* overlaps rift.control"},
		{"noctl-token", sub("rift.control.>"), perm, "children of rift.control"},
		{"noctl-token", sub("rift.events.>"), ok, "events are readable with an ACL"},
		{"noctl-token", pubAck("rift.control", ""), perm, "publish bare rift.control"},
		{"noctl-token", pubAck("rift.control.status", ""), perm, "publish rift.control child"},
		{"admin-token", sub(">"), ok, "control identity subscribes >"},
		{"admin-token", pubAck("rift.control.x", ""), ok, "control identity publishes rift.control"},
		// rift.events is never publishable remotely
		{"admin-token", pubAck("rift.events", ""), perm, "publish bare rift.events"},
		{"admin-token", pubAck("rift.events.queue.created", ""), perm, "publish rift.events child"},
		{"admin-token", &riftproto.Request{TimeoutMs: 10, Subject: "rift.events.x"}, perm, "request to rift.events"},
		// explicit reply subjects: literal _INBOX.* covered by the subscribe ACL
		{"game-token", pubAck("game.q", "_INBOX.game.r1"), ok, "own inbox namespace"},
		{"game-token", pubAck("game.q", "_INBOX.other.r1"), perm, "another identity's inbox"},
		{"game-token", pubAck("game.q", "game.x"), perm, "non-inbox reply subject"},
		{"admin-token", pubAck("x", "reply.here"), perm, "non-inbox reply even with > subscribe"},
		{"game-token", pubAck("game.q", "_INBOX.game.*"), bad, "wildcard reply subject"},
		{"svc-token", pubAck("svc.x", "_INBOX.a"), perm, "no publish right on svc.x"},
		// REQUEST needs only publish access
		{"game-token", &riftproto.Request{TimeoutMs: 10, Subject: "chat.x"}, perm, "request outside the publish ACL"},
		// streams: publish rights on the subject, subscribe rights to read
		{"reader-token", &riftproto.StreamPublish{Stream: "events", Subject: "events.a"}, ok, "stream publish"},
		{"game-token", &riftproto.StreamPublish{Stream: "events", Subject: "events.a"}, perm, "stream publish without ACL"},
		{"narrow-token", &riftproto.StreamPublish{Stream: "events", Subject: "events.b"}, perm, "stream publish outside ACL"},
		{"reader-token", &riftproto.StreamPublish{Stream: "events", Subject: "events.a", Reply: "_INBOX.x"}, perm, "stream reply subject not covered"},
		{"narrow-token", &riftproto.ConsumerOpen{Stream: "events", Name: "n1", Filter: "events.a", AckWaitMs: 1000, MaxAckPending: 10}, ok, "consumer with a covered filter"},
		{"narrow-token", &riftproto.ConsumerOpen{Stream: "events", Name: "n2", Filter: "events.>", AckWaitMs: 1000, MaxAckPending: 10}, perm, "consumer filter wider than the ACL"},
		{"narrow-token", &riftproto.ConsumerOpen{Stream: "events", Name: "n3", AckWaitMs: 1000, MaxAckPending: 10}, perm, "no filter = the whole stream"},
	} {
		conn := rt.Connect(t, f.addr, c.token)
		s := rt.Open(t, conn)
		s.Send(t, c.frame)
		expectResult(t, s, c.want, c.what)
	}
}

func TestDurableConsumerNamesAreScopedToIdentity(t *testing.T) {
	f := start(t, nil)
	reader := rt.Connect(t, f.addr, "reader-token")
	other := rt.Connect(t, f.addr, "other-token")
	call(t, reader, &riftproto.StreamPublish{Stream: "events", Subject: "events.a", Payload: []byte("1")})
	open := &riftproto.ConsumerOpen{Stream: "events", Name: "shared", AckWaitMs: 60_000, MaxAckPending: 10}
	call(t, reader, open)
	ds := fetch(t, reader, "events", "shared", 10)
	if len(ds) != 1 {
		t.Fatalf("reader fetched %d", len(ds))
	}
	// The other identity cannot fetch or ack the reader's consumer...
	for _, fr := range []riftproto.Frame{&riftproto.ConsumerFetch{Stream: "events", Name: "shared", Limit: 1},
		&riftproto.Ack{Stream: "events", Name: "shared", Sequence: ds[0].Sequence}} {
		s := rt.Open(t, other)
		s.Send(t, fr)
		rt.ExpectError(t, s, riftproto.CodeOperation)
	}
	// ...and opening the same name makes its own consumer, with its own configuration and state.
	call(t, other, &riftproto.ConsumerOpen{Stream: "events", Name: "shared", AckWaitMs: 5, MaxAckPending: 1})
	if ds := fetch(t, other, "events", "shared", 10); len(ds) != 1 || ds[0].DeliveryCount != 1 {
		t.Fatalf("other's consumer: %+v", ds)
	}
	// The reader's pending delivery is untouched: acking it still works.
	call(t, reader, &riftproto.Ack{Stream: "events", Name: "shared", Sequence: ds[0].Sequence})
}
