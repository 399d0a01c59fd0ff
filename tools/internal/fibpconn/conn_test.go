package fibpconn

import (
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// A subscription the server ends (an Error frame with the Consume's request ID after ConsumeOk:
// its node stopped leading the queue) is reported by Ended, and its deliveries stop.
func TestASubscriptionTheServerEndsIsReported(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // a server that takes one Consume, then ends it
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		fr := wire.NewFrameReader(nc, fibp.HeaderSize, fibp.MaxFrameSize)
		if _, err := fr.Next(); err != nil { // Handshake
			return
		}
		nc.Write(fibp.AppendFrame(nil, 0, 0, &fibp.HandshakeOk{NegotiatedVersion: 1}))
		body, err := fr.Next()
		if err != nil {
			return
		}
		h, _, _ := fibp.ParseHeader(body)
		nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.ConsumeOk{ConsumerID: "c"}))
		nc.Write(fibp.AppendFrame(nil, 0, h.RequestID, &fibp.Error{ErrorCode: fibp.CodeNotLeader, Message: "moved",
			Metadata: map[string]string{"leader_addr": "127.0.0.1:1"}}))
		fr.Next() // until the client closes
	}()
	c, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Consume("q", 1, func(*fibp.Delivery) {})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-c.Ended(sub):
		if e == nil || e.ErrorCode != fibp.CodeNotLeader || e.Metadata["leader_addr"] != "127.0.0.1:1" {
			t.Fatalf("Ended gave %+v, want the NotLeader the server sent", e)
		}
	case <-time.After(10 * time.Second): // a safety net against a hang
		t.Fatal("the end of the subscription was not reported")
	}
	if c.Ended(12345) != nil {
		t.Fatal("Ended of a subscription never made is not nil")
	}
}
