package main

import (
	"encoding/base64"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/filamq/fila/generated/wire"
	"github.com/filamq/fila/server/auth"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/engine"
	"github.com/filamq/fila/server/service"
)

// The messages of a queue over HTTP (docs/admin-api.md). FIBP has no frame to read a message
// without leasing it, to delete one or to purge a queue, and frames are not added outside its
// specification, so these are served by the HTTP listener:
//
//	GET    /api/v1/queues/{queue}/messages?count=N&after=ID  peek: up to N stored messages, oldest first
//	GET    /api/v1/queues/{queue}/messages/{id}              one message
//	DELETE /api/v1/queues/{queue}/messages/{id}              delete one message
//	POST   /api/v1/queues/{queue}/purge                      delete every message
//
// Reading needs the admin or consume permission on the queue (a dead-letter queue is named
// <queue>.dlq, as in the ACL), deleting and purging admin; see apiCaller for who may ask at all.
// Each takes ?shard=i to act on shard i of a sharded queue alone; without it, a sharded queue is
// answered as a whole (adminapi_shards.go).

// queuesPath is the prefix of the API's queue paths.
const queuesPath = "/api/v1/queues/"

// previewBytes bounds a message's text preview.
const previewBytes = 256

// messageRoutes adds the messages' endpoints to api.
func (api *adminAPI) messageRoutes() {
	api.mux.HandleFunc("GET "+queuesPath+"{queue}/messages", api.handleQueue(peek, peekShards))
	api.mux.HandleFunc("GET "+queuesPath+"{queue}/messages/{id}", api.handleQueue(getMessage, oneMessage))
	api.mux.HandleFunc("DELETE "+queuesPath+"{queue}/messages/{id}", api.handleQueue(deleteMessage, oneMessage))
	api.mux.HandleFunc("POST "+queuesPath+"{queue}/purge", untimedFunc(api.handleQueue(purge, purgeShards)))
}

// untimedFunc lifts the listener's write timeout, which is for clients that stall, from h: a
// purge of a long queue takes as long as its removal takes.
func untimedFunc(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		h(w, r)
	}
}

// messageJSON is a stored message as the API shows it.
type messageJSON struct {
	ID          string            `json:"id"`
	Queue       string            `json:"queue"`
	State       string            `json:"state"` // ready, delayed, leased or unclassified
	FairnessKey string            `json:"fairness_key"`
	Weight      uint32            `json:"weight"`
	Group       *string           `json:"ordering_group,omitempty"`
	Attempts    uint32            `json:"attempts"`
	Redrives    uint32            `json:"redrive_count"`
	LastError   string            `json:"last_error,omitempty"`
	EnqueuedAt  time.Time         `json:"enqueued_at"`
	NotBefore   *time.Time        `json:"not_before,omitempty"` // when later than enqueued_at
	Lease       *leaseJSON        `json:"lease,omitempty"`
	Tries       uint32            `json:"classify_tries,omitempty"`
	Headers     map[string]string `json:"headers"`
	Payload     string            `json:"payload"` // base64 (standard, padded)
	Size        int               `json:"payload_bytes"`
	Preview     string            `json:"preview"`           // the payload's first previewBytes as text
	Truncated   bool              `json:"preview_truncated"` // the preview is not the whole payload
	BodyMissing bool              `json:"body_missing,omitempty"`
	// In a dead-letter queue: the error it died of, and the rest of what its dead-letter headers
	// say (the headers are in Headers too).
	Error      string          `json:"error,omitempty"`
	DeadLetter *deadLetterJSON `json:"dead_letter,omitempty"`
}

// deadLetterJSON is why a message is in a dead-letter queue, from its dead-letter headers.
type deadLetterJSON struct {
	Reason   string     `json:"reason,omitempty"` // max_attempts, script, unclassified, ...
	Queue    string     `json:"queue"`            // where it came from
	Attempts uint64     `json:"attempts"`         // its attempt count when it died
	At       *time.Time `json:"at,omitempty"`     // when it died
}

type leaseJSON struct {
	Consumer  string    `json:"consumer"`
	LeasedAt  time.Time `json:"leased_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// pageJSON is a peek's answer.
type pageJSON struct {
	Queue    string        `json:"queue"`
	Messages []messageJSON `json:"messages"`
	// Next, when more messages follow, is the after= of the next page.
	Next string `json:"next,omitempty"`
}

func peek(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	queue, group, herr := target(b, p, r, auth.Admin, auth.Consume)
	if herr != nil {
		return nil, herr
	}
	count := broker.DefaultPeekCount
	if s := r.URL.Query().Get("count"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > broker.MaxPeekCount {
			return nil, refuse(http.StatusBadRequest, "count=%q: want a number from 1 to %d", s, broker.MaxPeekCount)
		}
		count = n
	}
	var after *engine.MsgID
	if s := r.URL.Query().Get("after"); s != "" {
		id, herr := messageID(s)
		if herr != nil {
			return nil, herr
		}
		after = &id
	}
	page, e := b.Peek(group, after, count)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	res := pageJSON{Queue: queue, Messages: make([]messageJSON, len(page.Messages))}
	for i, m := range page.Messages {
		res.Messages[i] = toJSON(m)
	}
	if page.More && len(page.Messages) > 0 {
		res.Next = wire.UUID(page.Messages[len(page.Messages)-1].ID).String()
	}
	return res, nil
}

func getMessage(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	_, group, id, herr := readableMessage(b, p, r)
	if herr != nil {
		return nil, herr
	}
	m, e := b.Message(group, id)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return toJSON(m), nil
}

func deleteMessage(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	queue, group, herr := target(b, p, r, auth.Admin)
	if herr != nil {
		return nil, herr
	}
	id, herr := messageID(r.PathValue("id"))
	if herr != nil {
		return nil, herr
	}
	if e := b.DeleteMessage(group, id); e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]string{"queue": queue, "deleted": wire.UUID(id).String()}, nil
}

func purge(b *broker.Broker, p *auth.Principal, r *http.Request) (any, *httpError) {
	queue, group, herr := target(b, p, r, auth.Admin)
	if herr != nil {
		return nil, herr
	}
	// A form a page may post cross-site without asking has another content type.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, refuse(http.StatusUnsupportedMediaType, "send Content-Type: application/json")
	}
	n, e := b.Purge(group)
	if e != nil {
		return nil, brokerRefusal(e)
	}
	return map[string]any{"queue": queue, "purged": n}, nil
}

// readableMessage is the queue, the group it acts on and the message ID a request names, once
// the caller may read the queue's messages (admin or consume on it, as FIBP would let it consume
// them).
func readableMessage(b *broker.Broker, p *auth.Principal, r *http.Request) (string, string, engine.MsgID, *httpError) {
	queue, group, herr := target(b, p, r, auth.Admin, auth.Consume)
	if herr != nil {
		return "", "", engine.MsgID{}, herr
	}
	id, herr := messageID(r.PathValue("id"))
	return queue, group, id, herr
}

// messageID parses a message ID from a path or query.
func messageID(s string) (engine.MsgID, *httpError) {
	u, err := wire.ParseUUID(s)
	if err != nil {
		return engine.MsgID{}, refuse(http.StatusBadRequest, "%q is not a message ID (8-4-4-4-12 hexadecimal)", s)
	}
	return engine.MsgID(u), nil
}

// brokerRefusal is the HTTP refusal for a broker's error.
func brokerRefusal(e *broker.Error) *httpError {
	status := http.StatusInternalServerError
	switch e.Code {
	case broker.CodeQueueNotFound, broker.CodeMessageNotFound, broker.CodeAPIKeyNotFound, broker.CodeThrottleNotFound:
		status = http.StatusNotFound
	case broker.CodeInvalidConfigValue, broker.CodeNotADLQ, broker.CodeReservedQueueName, broker.CodeLuaCompilationError:
		status = http.StatusBadRequest
	case broker.CodeQueueAlreadyExists:
		status = http.StatusConflict
	case broker.CodeStorageError, broker.CodeChannelFull, broker.CodeNotLeader, broker.CodeNodeNotReady:
		status = http.StatusServiceUnavailable
	}
	herr := refuse(status, "%s: %s", e.Code, e.Message)
	herr.code = e.Code.String()
	return herr
}

// toJSON shows m.
func toJSON(m broker.StoredMessage) messageJSON {
	j := messageJSON{ID: wire.UUID(m.ID).String(), Queue: m.Queue, State: m.State, FairnessKey: m.FairnessKey,
		Weight: m.Weight, Attempts: m.Attempts, Redrives: m.RedriveCount, LastError: m.LastError,
		EnqueuedAt: time.UnixMilli(m.EnqueuedAt).UTC(), Tries: m.ClassifyTries, Headers: m.Headers,
		Size: len(m.Payload), BodyMissing: m.BodyMissing}
	if j.Headers == nil {
		j.Headers = map[string]string{}
	}
	if m.Grouped {
		j.Group = &m.Group
	}
	if m.NotBefore > m.EnqueuedAt {
		t := time.UnixMilli(m.NotBefore).UTC()
		j.NotBefore = &t
	}
	if m.State == engine.StateLeased.String() {
		j.Lease = &leaseJSON{Consumer: m.Consumer, LeasedAt: time.UnixMilli(m.LeasedAt).UTC(),
			ExpiresAt: time.UnixMilli(m.LeaseExpiresAt).UTC()}
	}
	if from, ok := m.Headers[service.HeaderDeadLetterQueue]; ok && strings.HasSuffix(m.Queue, dlqSuffix) {
		d := &deadLetterJSON{Reason: m.Headers[service.HeaderDeadLetterReason], Queue: from}
		d.Attempts, _ = strconv.ParseUint(m.Headers[service.HeaderDeadLetterAttempts], 10, 32)
		if at, err := strconv.ParseInt(m.Headers[service.HeaderDeadLetterAt], 10, 64); err == nil {
			t := time.UnixMilli(at).UTC()
			d.At = &t
		}
		j.DeadLetter, j.Error = d, m.Headers[service.HeaderDeadLetterError]
	}
	j.Payload = base64.StdEncoding.EncodeToString(m.Payload)
	j.Preview, j.Truncated = preview(m.Payload)
	return j
}

// preview is the text of payload's first previewBytes (invalid UTF-8 shown as U+FFFD), and
// whether that is not all of it.
func preview(payload []byte) (string, bool) {
	p := payload
	if len(p) > previewBytes {
		p = p[:previewBytes]
		for i := 0; i < utf8.UTFMax-1 && !utf8.RuneStart(payload[len(p)]); i++ {
			p = p[:len(p)-1] // do not cut a character in two
		}
	}
	return strings.ToValidUTF8(string(p), "\uFFFD"), len(p) < len(payload)
}
