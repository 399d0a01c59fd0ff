package fila

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// TestConsumeHandler: a nil result acks, an error nacks with its text, and Consume returns the
// subscription's error once the consumer is closed.
func TestConsumeHandler(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, f := subscribe(t, c, sc, ConsumeOptions{MaxUnacked: 8, DisableLeaseKeepAlive: true})
	ran := async(func() error {
		return cons.Consume(context.Background(), func(_ context.Context, d *Delivery) error {
			if d.ID == (MessageID{3}) {
				return errors.New("bad payload")
			}
			return nil
		}, 2)
	})
	ms := []fibp.DeliveryMessage{deliveryMsg(1, time.Minute), deliveryMsg(2, time.Minute), deliveryMsg(3, time.Minute)}
	sc.Send(f.Header.RequestID, &fibp.Delivery{Messages: ms})
	acked, nacked := map[MessageID]bool{}, map[MessageID]string{}
	for len(acked)+len(nacked) < 3 {
		fr := sc.Next(t)
		switch r := fr.Frame.(type) {
		case *fibp.Ack:
			res := &fibp.AckResult{}
			for _, it := range r.Items {
				acked[it.MessageID] = true
				res.Results = append(res.Results, fibp.AckResultItem{})
			}
			sc.Reply(fr, res)
		case *fibp.Nack:
			res := &fibp.NackResult{}
			for _, it := range r.Items {
				nacked[it.MessageID] = it.Error
				res.Results = append(res.Results, fibp.NackResultItem{})
			}
			sc.Reply(fr, res)
		case *fibp.Credit:
		default:
			t.Fatalf("unexpected %v", fr.Header.Opcode)
		}
	}
	if !acked[MessageID{1}] || !acked[MessageID{2}] || nacked[MessageID{3}] != "bad payload" {
		t.Errorf("acked %v, nacked %v; want 1 and 2 acked, 3 nacked with the handler's error", acked, nacked)
	}
	cons.Close()
	if err := wait(t, ran); !errors.Is(err, ErrConsumerClosed) {
		t.Errorf("Consume returned %v, want ErrConsumerClosed", err)
	}
}

// TestConsumeHandlerStopsWithContext: ending ctx stops Consume with ctx's error.
func TestConsumeHandlerStopsWithContext(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{})
	c, sc := dialPeer(t, p, nil)
	cons, _ := subscribe(t, c, sc, ConsumeOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	ran := async(func() error {
		return cons.Consume(ctx, func(context.Context, *Delivery) error { return nil }, 4)
	})
	cancel()
	if err := wait(t, ran); !errors.Is(err, context.Canceled) {
		t.Errorf("Consume returned %v, want context.Canceled", err)
	}
}
