package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/broker"
)

// Messages converts an Enqueue's messages into a new slice, which broker.Enqueue then owns. The
// payloads still point into req's frame buffer: broker.Enqueue copies them before it returns, so
// the buffer may be reused after that.
func Messages(req *fibp.Enqueue) []broker.Message {
	msgs := make([]broker.Message, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		key, hasKey := m.IdempotencyKey.Get()
		msgs[i] = broker.Message{
			Queue:          m.Queue,
			Headers:        m.Headers,
			Payload:        m.Payload,
			FairnessKey:    m.FairnessKey.Or(""),
			Weight:         m.Weight.Or(0),
			DelayMs:        m.DelayMs.Or(0),
			IdempotencyKey: key,
			HasKey:         hasKey,
		}
	}
	return msgs
}

// EnqueueResult is the EnqueueResult frame of an Enqueue's results.
func EnqueueResult(rs []broker.EnqueueResult) *fibp.EnqueueResult {
	res := &fibp.EnqueueResult{Results: make([]fibp.EnqueueResultItem, len(rs))}
	for i, r := range rs {
		res.Results[i] = fibp.EnqueueResultItem{ErrorCode: ErrorCode(r.Code), MessageID: wire.UUID(r.ID), Duplicate: r.Duplicate}
	}
	return res
}

// AckItems appends an Ack's items to dst, settled by session sess (broker.Subscription.Session).
func AckItems(dst []broker.AckItem, req *fibp.Ack, sess string) []broker.AckItem {
	for _, it := range req.Items {
		dst = append(dst, broker.AckItem{Queue: it.Queue, ID: broker.MessageID(it.MessageID), Session: sess})
	}
	return dst
}

// AckResult is the AckResult frame of an Ack's codes.
func AckResult(codes []broker.Code) *fibp.AckResult {
	res := &fibp.AckResult{Results: make([]fibp.AckResultItem, len(codes))}
	for i, c := range codes {
		res.Results[i].ErrorCode = ErrorCode(c)
	}
	return res
}

// NackItems appends a Nack's items to dst, settled by session sess.
func NackItems(dst []broker.NackItem, req *fibp.Nack, sess string) []broker.NackItem {
	for _, it := range req.Items {
		after, has := it.RetryAfterMs.Get()
		dst = append(dst, broker.NackItem{Queue: it.Queue, ID: broker.MessageID(it.MessageID), Session: sess, Error: it.Error,
			RetryAfterMs: after, HasRetryAfter: has})
	}
	return dst
}

// NackResult is the NackResult frame of a Nack's codes.
func NackResult(codes []broker.Code) *fibp.NackResult {
	res := &fibp.NackResult{Results: make([]fibp.NackResultItem, len(codes))}
	for i, c := range codes {
		res.Results[i].ErrorCode = ErrorCode(c)
	}
	return res
}

// ExtendItems appends an ExtendLease's items to dst, settled by session sess.
func ExtendItems(dst []broker.ExtendItem, req *fibp.ExtendLease, sess string) []broker.ExtendItem {
	for _, it := range req.Items {
		dst = append(dst, broker.ExtendItem{Queue: it.Queue, ID: broker.MessageID(it.MessageID), Session: sess, ExtendByMs: it.ExtendByMs})
	}
	return dst
}

// ExtendLeaseResult is the ExtendLeaseResult frame of an ExtendLease's results.
func ExtendLeaseResult(rs []broker.ExtendResult) *fibp.ExtendLeaseResult {
	res := &fibp.ExtendLeaseResult{Results: make([]fibp.ExtendLeaseResultItem, len(rs))}
	for i, r := range rs {
		res.Results[i].ErrorCode = ErrorCode(r.Code)
		if r.Code == broker.CodeOk {
			res.Results[i].LeaseExpiresAt = uint64(r.ExpiresAt)
		}
	}
	return res
}

// Subscription converts a Consume of session sess (its connection) into a subscription request.
// creditFlow reports whether the connection negotiated CREDIT_FLOW_CONTROL; without it the server
// manages the window.
func Subscription(req *fibp.Consume, requestID uint32, sess, consumerID string, creditFlow bool) (broker.Subscription, *broker.Error) {
	return broker.Subscription{Queue: req.Queue, Session: sess, ConsumerID: consumerID, RequestID: requestID, Credit: req.Credit, ManagedCredit: !creditFlow,
		Throttles: ThrottleDeclarations(req.Throttles)}, nil
}
