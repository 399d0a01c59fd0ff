package session

import (
	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/service"
)

// Messages converts an Enqueue's messages into a new slice, which Service.Enqueue then owns. The
// payloads still point into req's frame buffer: Service.Enqueue copies them before it returns, so
// the buffer may be reused after that.
func Messages(req *fibp.Enqueue) []service.Message {
	msgs := make([]service.Message, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		key, hasKey := m.IdempotencyKey.Get()
		msgs[i] = service.Message{
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
func EnqueueResult(rs []service.EnqueueResult) *fibp.EnqueueResult {
	res := &fibp.EnqueueResult{Results: make([]fibp.EnqueueResultItem, len(rs))}
	for i, r := range rs {
		res.Results[i] = fibp.EnqueueResultItem{ErrorCode: ErrorCode(r.Code), MessageID: wire.UUID(r.ID), Duplicate: r.Duplicate}
		if r.Leader != nil {
			res.RouteHints = routeHint(res.RouteHints, r.Leader)
		}
	}
	return res
}

// AckItems appends an Ack's items to dst, settled by session sess (service.SubscribeRequest.Session).
func AckItems(dst []service.AckItem, req *fibp.Ack, sess string) []service.AckItem {
	for _, it := range req.Items {
		dst = append(dst, service.AckItem{Queue: it.Queue, ID: service.MessageID(it.MessageID), Session: sess})
	}
	return dst
}

// AckResult is the AckResult frame of an Ack's codes.
func AckResult(codes []service.Code) *fibp.AckResult {
	res := &fibp.AckResult{Results: make([]fibp.AckResultItem, len(codes))}
	for i, c := range codes {
		res.Results[i].ErrorCode = ErrorCode(c)
	}
	return res
}

// NackItems appends a Nack's items to dst, settled by session sess.
func NackItems(dst []service.NackItem, req *fibp.Nack, sess string) []service.NackItem {
	for _, it := range req.Items {
		after, has := it.RetryAfterMs.Get()
		dst = append(dst, service.NackItem{Queue: it.Queue, ID: service.MessageID(it.MessageID), Session: sess, Error: it.Error,
			RetryAfterMs: after, HasRetryAfter: has})
	}
	return dst
}

// NackResult is the NackResult frame of a Nack's codes.
func NackResult(codes []service.Code) *fibp.NackResult {
	res := &fibp.NackResult{Results: make([]fibp.NackResultItem, len(codes))}
	for i, c := range codes {
		res.Results[i].ErrorCode = ErrorCode(c)
	}
	return res
}

// ExtendItems appends an ExtendLease's items to dst, settled by session sess.
func ExtendItems(dst []service.ExtendItem, req *fibp.ExtendLease, sess string) []service.ExtendItem {
	for _, it := range req.Items {
		dst = append(dst, service.ExtendItem{Queue: it.Queue, ID: service.MessageID(it.MessageID), Session: sess, ExtendByMs: it.ExtendByMs})
	}
	return dst
}

// ExtendLeaseResult is the ExtendLeaseResult frame of an ExtendLease's results.
func ExtendLeaseResult(rs []service.ExtendResult) *fibp.ExtendLeaseResult {
	res := &fibp.ExtendLeaseResult{Results: make([]fibp.ExtendLeaseResultItem, len(rs))}
	for i, r := range rs {
		res.Results[i].ErrorCode = ErrorCode(r.Code)
		if r.Code == service.CodeOk {
			res.Results[i].LeaseExpiresAt = uint64(r.ExpiresAt)
		}
	}
	return res
}

// SubscribeRequest converts a Consume of session sess (its connection) into a subscription
// request. creditFlow reports whether the connection negotiated CREDIT_FLOW_CONTROL; without it
// the server manages the window.
func SubscribeRequest(req *fibp.Consume, sess, consumerID string, creditFlow bool) service.SubscribeRequest {
	return service.SubscribeRequest{Queue: req.Queue, Session: sess, ConsumerID: consumerID, Credit: req.Credit, ManagedCredit: !creditFlow,
		Throttles: ThrottleDeclarations(req.Throttles)}
}
