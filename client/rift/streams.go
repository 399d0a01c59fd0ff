package rift

import (
	"context"
	"fmt"
	"time"

	"github.com/filamq/fila/generated/riftproto"
)

// Stored acknowledges a durable write: its sequence in the stream and its timestamp.
type Stored struct {
	Sequence        uint64
	TimestampMillis uint64
}

// StreamPublish stores a message in a stream and returns once the stream's durability boundary
// is reached. It does not publish to live subscribers.
func (c *Client) StreamPublish(ctx context.Context, stream, subject, reply string, payload []byte) (Stored, error) {
	var st Stored
	err := c.do(ctx, 0, &riftproto.StreamPublish{Stream: stream, Subject: subject, Reply: reply, Payload: payload},
		func(op riftproto.Opcode, body []byte) (bool, error) {
			if op != riftproto.OpStored {
				return true, fmt.Errorf("rift: unexpected %v, want STORED", op)
			}
			var f riftproto.Stored
			err := f.Decode(body)
			st = Stored{Sequence: f.Sequence, TimestampMillis: f.TimestampMillis}
			return true, err
		})
	return st, err
}

// ConsumerConfig configures a durable consumer. Reopening a consumer must repeat it exactly.
type ConsumerConfig struct {
	Filter        string        // subject pattern; "" = the whole stream
	StartSequence uint64        // first sequence to deliver; 0 = the first retained record
	AckWait       time.Duration // redelivery delay of an unacknowledged delivery (1 ms to 1 h)
	MaxAckPending int           // most unacknowledged deliveries (1 to 65,536)
}

// Consumer is a durable consumer of a stream, scoped to the client's identity.
type Consumer struct {
	c            *Client
	stream, name string
}

// Delivery is one stream record. Acknowledge it after processing; the client owns Payload.
type Delivery struct {
	Sequence        uint64
	TimestampMillis uint64
	DeliveryCount   uint32
	Subject         string
	Reply           string
	Payload         []byte
}

// Consumer creates or resumes the durable consumer name on stream.
func (c *Client) Consumer(ctx context.Context, stream, name string, cfg ConsumerConfig) (*Consumer, error) {
	req := &riftproto.ConsumerOpen{Stream: stream, Name: name, Filter: cfg.Filter, StartSequence: cfg.StartSequence,
		AckWaitMs: uint32(cfg.AckWait / time.Millisecond), MaxAckPending: uint32(cfg.MaxAckPending)}
	if err := c.do(ctx, 0, req, okAnswer); err != nil {
		return nil, err
	}
	return &Consumer{c: c, stream: stream, name: name}, nil
}

func okAnswer(op riftproto.Opcode, _ []byte) (bool, error) {
	if op != riftproto.OpOk {
		return true, fmt.Errorf("rift: unexpected %v, want OK", op)
	}
	return true, nil
}

// Fetch returns up to limit (1-256) records available now, without waiting: redeliveries whose
// ack wait passed first, then new records.
func (k *Consumer) Fetch(ctx context.Context, limit int) ([]Delivery, error) {
	var out []Delivery
	err := k.c.do(ctx, 0, &riftproto.ConsumerFetch{Stream: k.stream, Name: k.name, Limit: uint32(limit)},
		func(op riftproto.Opcode, body []byte) (bool, error) {
			switch op {
			case riftproto.OpOk:
				return true, nil
			case riftproto.OpDelivery:
				var d riftproto.Delivery
				if err := d.Decode(body); err != nil {
					return true, err
				}
				out = append(out, Delivery{Sequence: d.Sequence, TimestampMillis: d.TimestampMillis, DeliveryCount: d.DeliveryCount,
					Subject: d.Subject, Reply: d.Reply, Payload: append([]byte(nil), d.Payload...)})
				return false, nil
			}
			return true, fmt.Errorf("rift: unexpected %v in a fetch", op)
		})
	return out, err
}

// Ack acknowledges a delivered sequence. Acknowledging twice is fine.
func (k *Consumer) Ack(ctx context.Context, seq uint64) error {
	return k.c.do(ctx, 0, &riftproto.Ack{Stream: k.stream, Name: k.name, Sequence: seq}, okAnswer)
}
