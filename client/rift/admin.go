package rift

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/filamq/fila/generated/riftproto"
)

// Stream administration: requests to the server's control subjects (rift.control.stream.*) with
// JSON bodies, as `fila rift stream create|list|describe|delete` sends them. The identity needs
// control = true and publish rights on the subject (docs/rift.md).

// StreamConfig defines a durable stream.
type StreamConfig struct {
	Name       string
	Subjects   []string      // subject patterns a published subject must match; at least one
	Durability string        // "fsync" (default), "os" or "memory"
	MaxMsgs    int64         // most records retained; 0 = unlimited
	MaxBytes   int64         // most bytes (subject + reply + payload) retained; 0 = unlimited
	MaxAge     time.Duration // oldest record retained, whole milliseconds; 0 = unlimited
	MaxPayload int           // largest payload accepted; 0 = the protocol's 1 MiB
}

// StreamInfo is a stream's definition and a snapshot of its counters.
type StreamInfo struct {
	Name          string   `json:"name"`
	Subjects      []string `json:"subjects"`
	Durability    string   `json:"durability"`
	MaxMsgs       int64    `json:"max_msgs"`
	MaxBytes      int64    `json:"max_bytes"`
	MaxAgeMs      int64    `json:"max_age_ms"`
	MaxPayload    int      `json:"max_payload"`
	Source        string   `json:"source"` // "config" (the server's configuration) or "runtime" (CreateStream)
	Messages      uint64   `json:"messages"`
	Bytes         uint64   `json:"bytes"`
	FirstSequence uint64   `json:"first_sequence"`
	LastSequence  uint64   `json:"last_sequence"`
	Consumers     int      `json:"consumers"`
}

// MaxAge returns the retention age as a duration (0 = unlimited).
func (in StreamInfo) MaxAge() time.Duration { return time.Duration(in.MaxAgeMs) * time.Millisecond }

// StreamError is the server's refusal of a stream administration request.
type StreamError struct {
	Code    string // "not_found", "exists", "invalid" or "internal"
	Message string
}

func (e *StreamError) Error() string { return "rift: " + e.Message }

// Is makes errors.Is(err, ErrStreamNotFound) and errors.Is(err, ErrStreamExists) work.
func (e *StreamError) Is(target error) bool {
	return (target == ErrStreamNotFound && e.Code == "not_found") || (target == ErrStreamExists && e.Code == "exists")
}

// Refusals of stream administration, matched with errors.Is.
var (
	ErrStreamNotFound = errors.New("rift: unknown stream")
	ErrStreamExists   = errors.New("rift: the stream exists with another definition")
)

// adminWait is how long the server waits for its own answer to a stream request.
const adminWait = 30 * time.Second

type streamReply struct {
	Stream  *StreamInfo  `json:"stream"`
	Streams []StreamInfo `json:"streams"`
	Created bool         `json:"created"`
	Deleted string       `json:"deleted"`
	Error   string       `json:"error"`
	Code    string       `json:"code"`
}

// adminRequest sends body (JSON) to subject and decodes the reply.
func (c *Client) adminRequest(ctx context.Context, subject string, body any) (streamReply, error) {
	var r streamReply
	payload, err := json.Marshal(body)
	if err != nil {
		return r, err
	}
	m, err := c.Request(ctx, subject, payload, adminWait)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(m.Payload, &r); err != nil {
		return r, fmt.Errorf("rift: %s answered %q: %w", subject, m.Payload, err)
	}
	if r.Error != "" {
		return r, &StreamError{Code: r.Code, Message: r.Error}
	}
	return r, nil
}

// CreateStream creates a durable stream; the server keeps its definition across restarts.
// Creating a stream that exists with the same definition is not an error (created is false); with
// another definition it is ErrStreamExists.
func (c *Client) CreateStream(ctx context.Context, cfg StreamConfig) (info StreamInfo, created bool, err error) {
	if cfg.MaxAge%time.Millisecond != 0 || cfg.MaxAge < 0 {
		return StreamInfo{}, false, fmt.Errorf("rift: max age %v must be a whole number of milliseconds, 0 or more", cfg.MaxAge)
	}
	def := struct {
		Name       string   `json:"name"`
		Subjects   []string `json:"subjects"`
		Durability string   `json:"durability,omitempty"`
		MaxMsgs    int64    `json:"max_msgs,omitempty"`
		MaxBytes   int64    `json:"max_bytes,omitempty"`
		MaxAgeMs   int64    `json:"max_age_ms,omitempty"`
		MaxPayload int      `json:"max_payload,omitempty"`
	}{cfg.Name, cfg.Subjects, cfg.Durability, cfg.MaxMsgs, cfg.MaxBytes, cfg.MaxAge.Milliseconds(), cfg.MaxPayload}
	r, err := c.adminRequest(ctx, riftproto.ControlStreamCreate, def)
	if err != nil {
		return StreamInfo{}, false, err
	}
	if r.Stream == nil {
		return StreamInfo{}, false, errors.New("rift: the create answer has no stream")
	}
	return *r.Stream, r.Created, nil
}

// DeleteStream deletes a stream created at run time, with its records and consumers. Streams of
// the server's configuration cannot be deleted this way.
func (c *Client) DeleteStream(ctx context.Context, name string) error {
	_, err := c.adminRequest(ctx, riftproto.ControlStreamDelete, map[string]string{"name": name})
	return err
}

// StreamInfo describes one stream.
func (c *Client) StreamInfo(ctx context.Context, name string) (StreamInfo, error) {
	r, err := c.adminRequest(ctx, riftproto.ControlStreamInfo, map[string]string{"name": name})
	if err == nil && r.Stream == nil {
		err = errors.New("rift: the info answer has no stream")
	}
	if err != nil {
		return StreamInfo{}, err
	}
	return *r.Stream, nil
}

// Streams describes every stream: the configured ones first, then those created at run time by
// name.
func (c *Client) Streams(ctx context.Context) ([]StreamInfo, error) {
	r, err := c.adminRequest(ctx, riftproto.ControlStreamList, struct{}{})
	return r.Streams, err
}
