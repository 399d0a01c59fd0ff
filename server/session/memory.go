package session

import (
	"encoding/binary"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/generated/wire"
)

// Memory a request holds from the moment it is decoded until it is answered, for the transport's
// accounting (server/membudget). The figures are upper estimates of what the decoded frame, the
// broker's copy, the queue's log entry and the answer take per item, measured on amd64.
const (
	// enqueueMessageMemory: the decoded EnqueueMessage, the broker's Message, result and body
	// records, the message's part of the log entry and of the EnqueueResult.
	enqueueMessageMemory = 512
	// settleItemMemory: a decoded Ack, Nack or ExtendLease item, the broker's item, its settle
	// record, its code and its part of the answer.
	settleItemMemory = 256
	// mapMemory: a map[string]string's header (its entries cost wire.MapEntryMemory each).
	mapMemory = 64
)

// leadingCount returns a hot-path request's item count (each begins with a u32 count), capped by
// what the body's bytes can hold at minSize bytes per item.
func leadingCount(body []byte, minSize int) int {
	if len(body) < 4 {
		return 0
	}
	return min(int(binary.BigEndian.Uint32(body)), len(body)/minSize)
}

// EnqueueMemory is the memory an Enqueue body will hold until it is answered, before headers
// (HeadersMemory): the body and the broker's copy of its payloads, and each message's records.
// It reads only the message count, so it is known before decoding.
func EnqueueMemory(body []byte) int64 {
	return int64(2*len(body) + leadingCount(body, 12)*enqueueMessageMemory)
}

// HeadersMemory is the memory of a decoded Enqueue's header maps, which the broker keeps with
// the messages.
func HeadersMemory(req *fibp.Enqueue) int64 {
	n := 0
	for i := range req.Messages {
		h := req.Messages[i].Headers
		if len(h) == 0 {
			continue
		}
		n += mapMemory + len(h)*wire.MapEntryMemory
		for k, v := range h {
			n += len(k) + len(v)
		}
	}
	return int64(n)
}

// SettleMemory is the memory an Ack, Nack or ExtendLease body will hold until it is answered.
func SettleMemory(body []byte) int64 {
	return int64(len(body) + leadingCount(body, 18)*settleItemMemory)
}
