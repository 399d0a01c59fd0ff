package listener_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/generated/riftproto"
	rt "github.com/filamq/fila/server/internal/rifttest"
	"github.com/filamq/fila/server/rift/events"
	"github.com/filamq/fila/server/rift/listener"
)

func TestConnectionLimit(t *testing.T) {
	f := start(t, func(o *listener.Options) { o.MaxConnections = 2 })
	rt.Connect(t, f.addr, "admin-token")
	second := rt.Connect(t, f.addr, "admin-token")
	// The server refuses the third right after its handshake, so the refusal can reach the
	// client before Dial returns, or after.
	third, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
	var ae *quic.ApplicationError
	switch {
	case err == nil:
		expectClosed(t, third, listener.CloseTooMany)
	case !errors.As(err, &ae) || ae.ErrorCode != listener.CloseTooMany || !ae.Remote:
		t.Fatalf("third connection: %v, want application error %d from the server", err, listener.CloseTooMany)
	}
	// A slot frees when a connection closes.
	second.CloseWithError(0, "")
	for {
		c, err := rt.Dial(t, f.addr, rt.ClientTLS(t), nil)
		if err == nil && rt.Auth(c, "admin-token") == nil {
			break
		}
	}
}

func TestStreamLimit(t *testing.T) {
	const limit = 4
	f := start(t, func(o *listener.Options) { o.MaxStreams = limit })
	c := rt.Connect(t, f.addr, "admin-token")
	subs := make([]*rt.Stream, limit)
	for i := range subs {
		subs[i] = rt.Subscribe(t, c, "a", "")
	}
	var limited *quic.StreamLimitReachedError
	if _, err := c.OpenStream(); !errors.As(err, &limited) {
		t.Fatalf("stream %d opened: %v", limit+1, err)
	}
	// Cancelling one subscription returns its credit.
	subs[0].S.CancelRead(0)
	subs[0].S.CancelWrite(0)
	s := rt.Open(t, c)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
}

// With one stream of credit, every kind of call can follow another: the server returns the
// credit of a finished stream, also of a call that answered (whose credit it holds back until a
// later answer or a short timer, see credits), so the next OpenStreamSync is not stuck.
func TestStreamCreditComesBackAfterEachCall(t *testing.T) {
	f := start(t, func(o *listener.Options) { o.MaxStreams = 1 })
	c := rt.Connect(t, f.addr, "reader-token")
	for i := range 3 {
		publish(t, c, "big", "big.a", "x") // answered: its credit is parked
		publish(t, c, "big", "big.a", "y")
		s := rt.Open(t, c) // refused: ERROR, credit returned at once
		s.Send(t, &riftproto.StreamPublish{Stream: "nope", Subject: "big.a"})
		rt.ExpectError(t, s, riftproto.CodeOperation)
		p := rt.Open(t, c) // a publisher stream the client finishes
		p.Send(t, &riftproto.Ping{})
		rt.Expect[*riftproto.Ok](t, p)
		p.S.Close()
		if _, err := p.Next(); err == nil {
			t.Fatalf("round %d: the publisher stream did not end", i)
		}
	}
}

func TestFirstFrameAndPartialFrameDeadlines(t *testing.T) {
	f := start(t, func(o *listener.Options) {
		o.AuthTimeout = 200 * time.Millisecond
		o.FrameTimeout = 200 * time.Millisecond
	})
	c := rt.Connect(t, f.addr, "admin-token")
	// A stream whose first frame does not arrive in time is ended with ERROR.
	s := rt.Open(t, c)
	s.Raw(t, []byte{0, 0}) // half a length prefix
	rt.ExpectError(t, s, riftproto.CodeOperation)

	// An idle publisher stream stays usable past both deadlines...
	s = rt.Open(t, c)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
	time.Sleep(500 * time.Millisecond)
	s.Send(t, &riftproto.Ping{})
	rt.Expect[*riftproto.Ok](t, s)
	// ...but a frame that starts must finish within the partial-frame deadline.
	s.Raw(t, []byte{0, 0, 0, 1})
	rt.ExpectError(t, s, riftproto.CodeOperation)
}

// A subscriber that stops reading is cut off; the others and the publisher carry on.
func TestSlowSubscriberIsCutOffAlone(t *testing.T) {
	f := start(t, func(o *listener.Options) { o.SubQueueMsgs = 64 })
	own := f.svc.Bus.Subscriptions() // the service's own: rift.control.status and the stream subjects
	// The slow client's QUIC receive window is small so that its stream blocks early.
	slowConn, err := rt.Dial(t, f.addr, rt.ClientTLS(t), &quic.Config{InitialStreamReceiveWindow: 16 << 10, MaxStreamReceiveWindow: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Auth(slowConn, "admin-token"); err != nil {
		t.Fatal(err)
	}
	slow := rt.Subscribe(t, slowConn, "feed", "")
	c := rt.Connect(t, f.addr, "admin-token")
	fast := rt.Subscribe(t, c, "feed", "")
	pub := rt.Open(t, c)
	payload := make([]byte, 1024)
	cut := false
	for batch := 0; batch < 2000 && !cut; batch++ {
		for range 32 {
			pub.Send(t, &riftproto.Publish{Subject: "feed", Payload: payload})
		}
		pub.Send(t, &riftproto.Ping{})
		rt.Expect[*riftproto.Ok](t, pub)
		recv(t, fast, 32)
		cut = f.svc.Bus.Subscriptions() == own+1 // the service's own and the fast one
	}
	if !cut {
		t.Fatal("the slow subscriber was never cut off")
	}
	// The slow subscriber learns why: ERROR "slow consumer" or a reset with the slow-consumer code.
	for {
		fr, err := slow.Next()
		if err != nil {
			var se *quic.StreamError
			if !errors.As(err, &se) || se.ErrorCode != listener.ResetSlowConsumer {
				t.Fatalf("slow subscriber ended with %v", err)
			}
			break
		}
		if e, ok := fr.(*riftproto.Error); ok {
			if e.Code != riftproto.CodeOperation || e.Message != "slow consumer" {
				t.Fatalf("slow subscriber got %+v", e)
			}
			break
		}
	}
	// Everyone else carries on.
	pub.Send(t, &riftproto.PublishAck{Subject: "feed", Payload: []byte("after")})
	rt.Expect[*riftproto.Ok](t, pub)
	if m := rt.Expect[*riftproto.Message](t, fast); string(m.Payload) != "after" {
		t.Fatalf("fast subscriber got %q", m.Payload)
	}
}

func TestConnectionEvents(t *testing.T) {
	f := start(t, nil)
	sub, err := f.svc.Bus.Subscribe("rift.events.connection.*", "")
	if err != nil {
		t.Fatal(err)
	}
	c := rt.Connect(t, f.addr, "game-token")
	c.CloseWithError(0, "")
	for _, want := range []string{events.ConnectionOpened, events.ConnectionClosed} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		m, err := sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for %s: %v", want, err)
		}
		var ev events.Event
		if m.Subject != want || json.Unmarshal(m.Payload, &ev) != nil || ev.Identity != "game" || ev.Remote == "" {
			t.Fatalf("event %s %s, want %s for game", m.Subject, m.Payload, want)
		}
	}
}
