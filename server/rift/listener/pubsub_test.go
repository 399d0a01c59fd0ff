package listener_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/service"
)

func TestAuthThenPing(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
}

// recv reads n MESSAGE frames.
func recv(t *testing.T, s *rt.Stream, n int) []*riftproto.Message {
	t.Helper()
	out := make([]*riftproto.Message, n)
	for i := range out {
		out[i] = rt.Expect[*riftproto.Message](t, s)
	}
	return out
}

func TestPublishSubscribeWildcardsAndOrder(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	star := rt.Subscribe(t, c, "game.*", "")
	gt := rt.Subscribe(t, c, "game.>", "")
	exact := rt.Subscribe(t, c, "game.score", "")
	pub := rt.Open(t, c)
	for i := range 50 {
		pub.Send(t, &riftproto.Publish{Subject: "game.score", Payload: []byte{byte(i)}})
	}
	pub.Send(t, &riftproto.Publish{Subject: "game.score.p1", Reply: "_INBOX.x", Payload: []byte("deep")},
		&riftproto.Publish{Subject: "other", Payload: []byte("nobody")}, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, pub)

	for _, s := range []*rt.Stream{star, gt, exact} {
		for i, m := range recv(t, s, 50) {
			if m.Subject != "game.score" || len(m.Payload) != 1 || m.Payload[0] != byte(i) {
				t.Fatalf("message %d: %+v (order within a publisher stream must hold)", i, m)
			}
		}
	}
	m := rt.Expect[*riftproto.Message](t, gt)
	if m.Subject != "game.score.p1" || m.Reply != "_INBOX.x" || string(m.Payload) != "deep" {
		t.Fatalf("game.> got %+v", m)
	}
	// game.* and game.score must not see game.score.p1: a PUBLISH_ACK marker proves what came first.
	pub.Send(t, &riftproto.PublishAck{Subject: "game.score", Payload: []byte("marker")})
	rt.Expect[*riftproto.Ok](t, pub)
	for _, s := range []*rt.Stream{star, exact, gt} {
		if m := rt.Expect[*riftproto.Message](t, s); string(m.Payload) != "marker" {
			t.Fatalf("got %+v, want the marker", m)
		}
	}
}

func TestQueueGroups(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	plain := rt.Subscribe(t, c, "jobs.*", "")
	w1 := rt.Subscribe(t, c, "jobs.*", "workers")
	w2 := rt.Subscribe(t, c, "jobs.>", "workers")
	other := rt.Subscribe(t, c, "jobs.run", "auditors")
	pub := rt.Open(t, c)
	const n = 40
	for i := range n {
		pub.Send(t, &riftproto.Publish{Subject: "jobs.run", Payload: []byte(fmt.Sprint(i))})
	}
	pub.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, pub)
	recv(t, plain, n)
	recv(t, other, n)
	// Each group member gets a share; together exactly n, none twice.
	type got struct {
		member  int
		payload string
	}
	ch := make(chan got)
	for k, s := range []*rt.Stream{w1, w2} {
		go func() {
			for {
				fr, err := s.Next()
				if err != nil {
					return
				}
				ch <- got{k, string(fr.(*riftproto.Message).Payload)}
			}
		}()
	}
	seen := map[string]bool{}
	count := [2]int{}
	for range n {
		g := <-ch
		if seen[g.payload] {
			t.Fatalf("message %s delivered twice within the group", g.payload)
		}
		seen[g.payload] = true
		count[g.member]++
	}
	if count[0] == 0 || count[1] == 0 {
		t.Fatalf("queue group shares %v: both members should get some", count)
	}
	// Nothing more arrives for the group: a marker on a subject only the plain subscriber sees
	// would not prove it, so publish one more and check the total stays n+1.
	pub.Send(t, &riftproto.PublishAck{Subject: "jobs.run", Payload: []byte("last")})
	rt.Expect[*riftproto.Ok](t, pub)
	if g := <-ch; g.payload != "last" {
		t.Fatalf("after the %d messages the group got %q, want the last one", n, g.payload)
	}
}

func TestRequestReply(t *testing.T) {
	f := start(t, nil)
	responder := rt.Connect(t, f.addr, "svc-token")
	sub := rt.Subscribe(t, responder, "svc.echo", "")
	go func() {
		out := rt.Open(t, responder)
		for {
			fr, err := sub.Next()
			if err != nil {
				return
			}
			m := fr.(*riftproto.Message)
			out.S.Write(riftproto.AppendFrame(nil, &riftproto.Publish{Subject: m.Reply, Payload: append([]byte("echo:"), m.Payload...)}))
		}
	}()
	c := rt.Connect(t, f.addr, "game-token") // publish svc.>, no _INBOX.> subscribe grant needed
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Request{TimeoutMs: 10_000, Subject: "svc.echo", Payload: []byte("hi")})
	m := rt.Expect[*riftproto.Message](t, s)
	if string(m.Payload) != "echo:hi" || len(m.Subject) < len("_INBOX.")+1 || m.Subject[:7] != "_INBOX." {
		t.Fatalf("reply %+v", m)
	}

	// No responders: ERROR code 2 at once.
	s = rt.Open(t, c)
	s.Send(t, &riftproto.Request{TimeoutMs: 60_000, Subject: "svc.nobody", Payload: nil})
	if e := rt.ExpectError(t, s, riftproto.CodeOperation); e.Message == "" {
		t.Fatal("empty error message")
	}

	// A responder that never answers: timeout, ERROR code 2.
	silent := rt.Subscribe(t, responder, "svc.silent", "")
	_ = silent
	s = rt.Open(t, c)
	s.Send(t, &riftproto.Request{TimeoutMs: 20, Subject: "svc.silent"})
	rt.ExpectError(t, s, riftproto.CodeOperation)

	// Timeout bounds: 0 and 120,001 ms are refused.
	for _, ms := range []uint32{0, 120_001} {
		s = rt.Open(t, c)
		s.Send(t, &riftproto.Request{TimeoutMs: ms, Subject: "svc.echo"})
		rt.ExpectError(t, s, riftproto.CodeOperation)
	}
}

func TestControlStatus(t *testing.T) {
	f := start(t, nil)
	c := rt.Connect(t, f.addr, "admin-token")
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Request{TimeoutMs: 10_000, Subject: service.StatusSubject})
	m := rt.Expect[*riftproto.Message](t, s)
	var st service.Status
	if err := json.Unmarshal(m.Payload, &st); err != nil {
		t.Fatalf("status %q: %v", m.Payload, err)
	}
	if st.Version != 1 || st.Connections != 1 || len(st.Streams) != len(streams) || st.Streams[0].Name != "events" {
		t.Fatalf("status %+v", st)
	}
	// A non-control identity with a matching ACL is refused.
	n := rt.Connect(t, f.addr, "noctl-token")
	s = rt.Open(t, n)
	s.Send(t, &riftproto.Request{TimeoutMs: 10_000, Subject: service.StatusSubject})
	rt.ExpectError(t, s, riftproto.CodePermission)
}
