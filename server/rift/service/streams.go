package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/stream"
)

// Stream administration. The Rift protocol has no frames for it, so it is a set of control
// subjects the service answers, as it answers rift.control.status: a control identity sends a
// REQUEST with a JSON body and gets a JSON reply. Publishing to them needs the ACL and control =
// true like any rift.control subject, so the right to create streams is the right to publish to
// rift.control.stream.create. A message without a reply subject is ignored.
const (
	StreamCreateSubject = riftproto.ControlStreamCreate // {"name", "subjects", …} -> {"stream", "created"}
	StreamDeleteSubject = riftproto.ControlStreamDelete // {"name"} -> {"deleted"}
	StreamInfoSubject   = riftproto.ControlStreamInfo   // {"name"} -> {"stream"}
	StreamListSubject   = riftproto.ControlStreamList   // {} or empty -> {"streams"}
	streamSubjects      = "rift.control.stream.*"
)

// StreamDefinition is the JSON body of rift.control.stream.create.
type StreamDefinition struct {
	Name       string   `json:"name"`
	Subjects   []string `json:"subjects"`
	Durability string   `json:"durability,omitempty"`  // fsync (default), os or memory
	MaxMsgs    int64    `json:"max_msgs,omitempty"`    // 0 = unlimited
	MaxBytes   int64    `json:"max_bytes,omitempty"`   // 0 = unlimited
	MaxAgeMs   int64    `json:"max_age_ms,omitempty"`  // 0 = unlimited
	MaxPayload int      `json:"max_payload,omitempty"` // 0 = 1 MiB
}

// Config converts d to a stream configuration.
func (d StreamDefinition) Config() (stream.Config, error) {
	dur, err := stream.ParseDurability(d.Durability)
	if err != nil {
		return stream.Config{}, opErr("%v", err)
	}
	if d.MaxAgeMs < 0 || d.MaxAgeMs > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return stream.Config{}, opErr("max_age_ms %d is out of range", d.MaxAgeMs)
	}
	return stream.Config{Name: d.Name, Subjects: d.Subjects, Durability: dur, MaxMsgs: d.MaxMsgs, MaxBytes: d.MaxBytes,
		MaxAge: time.Duration(d.MaxAgeMs) * time.Millisecond, MaxPayload: d.MaxPayload}, nil
}

// StreamReply is the JSON answer on the stream subjects. Error is set on failure, with Code
// "not_found", "exists", "invalid" or "internal".
type StreamReply struct {
	Stream  *stream.Info  `json:"stream,omitempty"`
	Streams []stream.Info `json:"streams,omitempty"`
	Created bool          `json:"created,omitempty"`
	Deleted string        `json:"deleted,omitempty"`
	Error   string        `json:"error,omitempty"`
	Code    string        `json:"code,omitempty"`
}

// streamName is the JSON body of delete and info.
type streamName struct {
	Name string `json:"name"`
}

// answerStreams serves the stream subjects until the bus closes.
func (s *Service) answerStreams(sub *bus.Subscription) {
	defer s.wg.Done()
	s.answer(sub, streamSubjects, func(m bus.Message) []byte {
		r := s.streamRequest(m.Subject, m.Payload)
		if r.Error != "" {
			s.log.Info("rift stream request refused", "subject", m.Subject, "err", r.Error)
		}
		body, _ := json.Marshal(r)
		return body
	})
}

// streamRequest performs one stream request.
func (s *Service) streamRequest(subj string, body []byte) StreamReply {
	var r StreamReply
	var err error
	switch subj {
	case StreamCreateSubject:
		var d StreamDefinition
		var cfg stream.Config
		var in stream.Info
		if err = decodeStrict(body, &d); err == nil {
			if cfg, err = d.Config(); err == nil {
				in, r.Created, err = s.createStream(cfg)
				r.Stream = &in
			}
		}
	case StreamDeleteSubject:
		var n streamName
		if err = decodeStrict(body, &n); err == nil {
			if err = s.deleteStream(n.Name); err == nil {
				r.Deleted = n.Name
			}
		}
	case StreamInfoSubject:
		var n streamName
		var in stream.Info
		if err = decodeStrict(body, &n); err == nil {
			in, err = s.Streams.Info(n.Name)
			r.Stream = &in
		}
	case StreamListSubject:
		r.Streams = s.streamInfos()
	default:
		err = opErr("%s is not a stream operation (create, delete, info, list)", subj)
	}
	if err != nil {
		return StreamReply{Error: err.Error(), Code: streamCode(err)}
	}
	return r
}

// decodeStrict decodes a JSON object into v, refusing unknown fields; an empty body is {}.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return opErr("request body: %v", err)
	}
	if d.More() {
		return opErr("request body: more than one JSON value")
	}
	return nil
}

// createStream creates a stream and reports it on rift.events.stream.created.
func (s *Service) createStream(cfg stream.Config) (stream.Info, bool, error) {
	in, created, err := s.Streams.Create(cfg)
	if created {
		s.log.Info("rift stream created", "stream", cfg.Name)
		s.events.StreamCreated(cfg.Name)
	}
	return in, created, err
}

// deleteStream deletes a stream and reports it on rift.events.stream.deleted.
func (s *Service) deleteStream(name string) error {
	err := s.Streams.Delete(name)
	if err == nil {
		s.log.Info("rift stream deleted", "stream", name)
		s.events.StreamDeleted(name)
	}
	return err
}

func streamCode(err error) string {
	switch {
	case errors.Is(err, stream.ErrUnknownStream):
		return "not_found"
	case errors.Is(err, stream.ErrExists):
		return "exists"
	case errors.Is(err, stream.ErrInvalid), errors.Is(err, ErrOperation):
		return "invalid"
	}
	return "internal"
}

func (s *Service) streamInfos() []stream.Info {
	out := []stream.Info{}
	for _, name := range s.Streams.Names() {
		if in, err := s.Streams.Info(name); err == nil {
			out = append(out, in)
		}
	}
	return out
}

// CreateStream creates a stream at run time (see stream.Store.Create) when the identity may
// publish to rift.control.stream.create.
func (ss *Session) CreateStream(cfg stream.Config) (stream.Info, bool, error) {
	if err := ss.ID.CheckPublish(StreamCreateSubject); err != nil {
		return stream.Info{}, false, err
	}
	in, created, err := ss.svc.createStream(cfg)
	return in, created, streamErr(err)
}

// DeleteStream deletes a stream created at run time, its records and its consumers, when the
// identity may publish to rift.control.stream.delete.
func (ss *Session) DeleteStream(name string) error {
	if err := ss.ID.CheckPublish(StreamDeleteSubject); err != nil {
		return err
	}
	return streamErr(ss.svc.deleteStream(name))
}

// StreamInfo describes a stream when the identity may publish to rift.control.stream.info.
func (ss *Session) StreamInfo(name string) (stream.Info, error) {
	if err := ss.ID.CheckPublish(StreamInfoSubject); err != nil {
		return stream.Info{}, err
	}
	in, err := ss.svc.Streams.Info(name)
	return in, streamErr(err)
}

// Streams describes every stream when the identity may publish to rift.control.stream.list.
func (ss *Session) Streams() ([]stream.Info, error) {
	if err := ss.ID.CheckPublish(StreamListSubject); err != nil {
		return nil, err
	}
	return ss.svc.streamInfos(), nil
}
