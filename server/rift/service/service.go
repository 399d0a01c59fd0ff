// Package service ties Rift's parts together: the identities, the subject bus, the durable streams,
// the server events and the control subjects (rift.control.status, and the stream administration
// of streams.go). A Session is one identity's view of it: every
// operation checks that identity's permissions, so the QUIC listener and Lua plugins share one set
// of rules.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/filamq/fila/generated/riftproto"
	"github.com/filamq/fila/server/rift/auth"
	"github.com/filamq/fila/server/rift/bus"
	"github.com/filamq/fila/server/rift/events"
	"github.com/filamq/fila/server/rift/stream"
	"github.com/filamq/fila/server/rift/subject"
)

// Limits on client-supplied values, from the Rift spec.
const (
	MaxRequestTimeout = 120 * time.Second
	MaxPayload        = 1 << 20
	StatusSubject     = riftproto.ControlStatus
)

// ErrOperation is wrapped by every non-permission failure a client causes (answered with ERROR
// code 2); permission failures wrap auth.ErrDenied (code 1).
var ErrOperation = errors.New("invalid operation")

// Options configures a Service.
type Options struct {
	Identities []auth.Config
	Streams    []stream.Config
	StreamDir  string // the streams' Pebble directory (<data_dir>/rift)
	MaxStreams int    // most streams there may be (stream.DefaultMaxStreams)
	Bus        bus.Options
	Clock      func() time.Time // time.Now
	Logger     *slog.Logger     // slog.Default()
}

// Service is a running Rift node without its network listener.
type Service struct {
	Auth    *auth.Registry
	Bus     *bus.Bus
	Streams *stream.Store

	events      *events.Events // rift.events.stream.…
	log         *slog.Logger
	started     time.Time
	connections atomic.Int64
	wg          sync.WaitGroup
}

// Open validates the options, opens the streams and starts answering rift.control.status and the
// stream administration subjects.
func Open(o Options) (*Service, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	reg, err := auth.NewRegistry(o.Identities)
	if err != nil {
		return nil, fmt.Errorf("rift identities: %w", err)
	}
	st, err := stream.Open(stream.Options{Dir: o.StreamDir, Clock: o.Clock, Logger: o.Logger, MaxStreams: o.MaxStreams}, o.Streams)
	if err != nil {
		return nil, fmt.Errorf("rift streams: %w", err)
	}
	s := &Service{Auth: reg, Bus: bus.New(o.Bus), Streams: st, log: o.Logger, started: o.Clock()}
	s.events = events.New(s.Bus)
	status, err := s.Bus.Subscribe(StatusSubject, "")
	if err != nil {
		st.Close()
		return nil, err
	}
	streams, err := s.Bus.Subscribe(streamSubjects, "")
	if err != nil {
		s.Bus.Close()
		st.Close()
		return nil, err
	}
	s.wg.Add(2)
	go s.answerStatus(status)
	go s.answerStreams(streams)
	return s, nil
}

// Close ends every subscription and closes the streams.
func (s *Service) Close() error {
	s.Bus.Close()
	s.wg.Wait()
	return s.Streams.Close()
}

// ConnectionOpened and ConnectionClosed maintain the connection count shown in the status.
func (s *Service) ConnectionOpened() { s.connections.Add(1) }

// ConnectionClosed: see ConnectionOpened.
func (s *Service) ConnectionClosed() { s.connections.Add(-1) }

// Status is the JSON document answered on rift.control.status.
type Status struct {
	Version       int           `json:"version"`
	UptimeMs      int64         `json:"uptime_ms"`
	Connections   int64         `json:"connections"`
	Subscriptions int           `json:"subscriptions"`
	Identities    int           `json:"identities"`
	Streams       []stream.Info `json:"streams"`
}

// Status returns the current status.
func (s *Service) Status() Status {
	return Status{Version: riftproto.Version, UptimeMs: time.Since(s.started).Milliseconds(), Connections: s.connections.Load(),
		Subscriptions: s.Bus.Subscriptions(), Identities: s.Auth.Len(), Streams: s.streamInfos()}
}

func (s *Service) answerStatus(sub *bus.Subscription) {
	defer s.wg.Done()
	s.answer(sub, StatusSubject, func(bus.Message) []byte {
		body, _ := json.Marshal(s.Status())
		return body
	})
}

// answer replies to every request on sub (subscribed to pattern) with reply's answer until the
// bus closes. Messages without a reply subject are ignored.
func (s *Service) answer(sub *bus.Subscription, pattern string, reply func(bus.Message) []byte) {
	for {
		m, err := sub.Next(context.Background())
		if errors.Is(err, bus.ErrSlowConsumer) { // flooded: carry on with a fresh subscription
			if sub, err = s.Bus.Subscribe(pattern, ""); err != nil {
				return
			}
			continue
		}
		if err != nil {
			return
		}
		if m.Reply != "" {
			s.Bus.Publish(m.Reply, "", reply(m))
		}
	}
}

// Code returns the ERROR code for err: permission or operation.
func Code(err error) riftproto.ErrorCode {
	if errors.Is(err, auth.ErrDenied) {
		return riftproto.CodePermission
	}
	return riftproto.CodeOperation
}

// Session is one identity's permission-checked view of the service. It is safe for concurrent use.
type Session struct {
	svc *Service
	ID  *auth.Identity
}

// Session returns the view of identity id.
func (s *Service) Session(id *auth.Identity) *Session { return &Session{svc: s, ID: id} }

func opErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOperation, fmt.Sprintf(format, args...))
}

// checkPublish validates a publication's subject, reply subject and payload and checks id's rights.
func (ss *Session) checkPublish(subj, reply string, payload []byte) error {
	if err := subject.Valid(subj); err != nil {
		return opErr("subject %q: %v", subj, err)
	}
	if reply != "" {
		if err := subject.Valid(reply); err != nil {
			return opErr("reply subject %q: %v", reply, err)
		}
	}
	if err := checkPayload(payload); err != nil {
		return err
	}
	if err := ss.ID.CheckPublish(subj); err != nil {
		return err
	}
	return ss.ID.CheckReply(reply)
}

func checkPayload(payload []byte) error {
	if len(payload) > MaxPayload {
		return opErr("payload of %d bytes exceeds %d", len(payload), MaxPayload)
	}
	return nil
}

// Publisher publishes live messages for one ordered publisher (such as a QUIC publisher stream).
// It remembers the last subject and reply subject that passed validation and the permission
// checks, so a publisher sending to the same subject again and again checks it once (identities
// never change while the service runs). It is not safe for concurrent use.
type Publisher struct {
	ss          *Session
	bp          *bus.Publisher
	subj, reply string
	checked     bool
}

// Publisher returns a new Publisher for the session.
func (ss *Session) Publisher() *Publisher { return &Publisher{ss: ss, bp: ss.svc.Bus.Publisher()} }

// Publish is Session.Publish.
func (p *Publisher) Publish(subj, reply string, payload []byte) (int, error) {
	if p.checked && subj == p.subj && reply == p.reply {
		if err := checkPayload(payload); err != nil {
			return 0, err
		}
	} else {
		if err := p.ss.checkPublish(subj, reply, payload); err != nil {
			return 0, err
		}
		p.subj, p.reply, p.checked = subj, reply, true
	}
	return p.bp.Publish(subj, reply, payload)
}

// Publish sends a live message; it returns how many subscriptions received it.
func (ss *Session) Publish(subj, reply string, payload []byte) (int, error) {
	if err := ss.checkPublish(subj, reply, payload); err != nil {
		return 0, err
	}
	return ss.svc.Bus.Publish(subj, reply, payload)
}

// Subscribe registers a subscription on pattern with optional queue group.
func (ss *Session) Subscribe(pattern, queue string, o bus.SubOptions) (*bus.Subscription, error) {
	if err := subject.ValidPattern(pattern); err != nil {
		return nil, opErr("pattern %q: %v", pattern, err)
	}
	if queue != "" && subject.Valid(queue) != nil {
		return nil, opErr("queue group %q: must be a literal subject-like name", queue)
	}
	if err := ss.ID.CheckSubscribe(pattern); err != nil {
		return nil, err
	}
	return ss.svc.Bus.SubscribeWith(pattern, queue, o)
}

// Request publishes to subj with a private inbox and returns the first reply. It needs only
// publish rights on subj.
func (ss *Session) Request(ctx context.Context, subj string, payload []byte, timeout time.Duration) (bus.Message, error) {
	if timeout < time.Millisecond || timeout > MaxRequestTimeout {
		return bus.Message{}, opErr("request timeout must be 1-120,000 ms")
	}
	if err := ss.checkPublish(subj, "", payload); err != nil {
		return bus.Message{}, err
	}
	m, err := ss.svc.Bus.Request(ctx, subj, payload, timeout)
	if errors.Is(err, bus.ErrNoResponders) || errors.Is(err, bus.ErrTimeout) {
		return m, fmt.Errorf("%w: %v", ErrOperation, err)
	}
	return m, err
}

// StreamPublish stores a record in a stream; it needs publish rights on subj.
func (ss *Session) StreamPublish(name, subj, reply string, payload []byte) (seq, tsMillis uint64, err error) {
	if err := ss.checkPublish(subj, reply, payload); err != nil {
		return 0, 0, err
	}
	seq, ts, err := ss.svc.Streams.Publish(name, subj, reply, payload)
	return seq, ts, streamErr(err)
}

// ConsumerOpen creates or resumes the identity's durable consumer. Reading a stream needs
// subscribe rights on the filter (or, without one, on each of the stream's subject patterns).
func (ss *Session) ConsumerOpen(name, consumer string, cfg stream.ConsumerConfig) error {
	subjects, err := ss.svc.Streams.Subjects(name)
	if err != nil {
		return streamErr(err)
	}
	if cfg.Filter != "" {
		if err := subject.ValidPattern(cfg.Filter); err != nil {
			return opErr("filter %q: %v", cfg.Filter, err)
		}
		subjects = []string{cfg.Filter}
	}
	for _, p := range subjects {
		if err := ss.ID.CheckSubscribe(p); err != nil {
			return err
		}
	}
	return streamErr(ss.svc.Streams.OpenConsumer(ss.ID.Name, name, consumer, cfg))
}

// Fetch returns up to limit deliveries of the identity's consumer.
func (ss *Session) Fetch(name, consumer string, limit int) ([]stream.Delivery, error) {
	d, err := ss.svc.Streams.Fetch(ss.ID.Name, name, consumer, limit)
	return d, streamErr(err)
}

// Ack acknowledges a delivery of the identity's consumer.
func (ss *Session) Ack(name, consumer string, seq uint64) error {
	return streamErr(ss.svc.Streams.Ack(ss.ID.Name, name, consumer, seq))
}

func streamErr(err error) error {
	if err == nil || errors.Is(err, ErrOperation) {
		return err
	}
	if errors.Is(err, stream.ErrInvalid) || errors.Is(err, stream.ErrUnknownStream) || errors.Is(err, stream.ErrNotFound) {
		return fmt.Errorf("%w: %v", ErrOperation, err)
	}
	return err
}
