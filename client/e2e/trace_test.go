package e2e

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/filamq/fila/client/fila"
)

// A trace crosses the queue: the producer's span context travels in W3C traceparent headers and
// comes back out of the delivery, through Next and through Consume's handler context.
func TestTraceContextCrossesTheQueue(t *testing.T) {
	t.Parallel()
	plain := dial(t, "")
	q := createQueue(t, plain, fastQueue(30*time.Second, 3))
	c, err := fila.Dial(testCtx(t), sharedAddr, &fila.Options{APIKey: apiKey, Propagator: propagation.TraceContext{}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	span := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(testCtx(t), span)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	headers := map[string]string{"tenant": "acme"}
	enqueue(t, c, fila.Message{Queue: q, Payload: []byte("no trace in this context")}) // testCtx has no span
	if _, err := c.Enqueue(ctx, fila.Message{Queue: q, Headers: headers, Payload: []byte("traced")},
		fila.Message{Queue: q, Headers: map[string]string{"traceparent": "00-11111111111111111111111111111111-2222222222222222-01"}, Payload: []byte("forwarded")}); err != nil {
		t.Fatal(err)
	}
	if len(headers) != 1 {
		t.Errorf("Enqueue changed the caller's headers: %v", headers)
	}
	p := c.NewProducer(fila.ProducerOptions{})
	if _, err := p.Send(ctx, fila.Message{Queue: q, Payload: []byte("sent")}); err != nil {
		t.Fatal(err)
	}
	p.Close()

	cons, err := c.Consume(testCtx(t), q, fila.ConsumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	want := map[string]string{"no trace in this context": "", "traced": traceparent,
		"forwarded": "00-11111111111111111111111111111111-2222222222222222-01", "sent": traceparent}
	for range 3 {
		d := next(t, cons)
		if got := d.Headers["traceparent"]; got != want[string(d.Payload)] {
			t.Errorf("%s: traceparent %q, want %q", d.Payload, got, want[string(d.Payload)])
		}
		if string(d.Payload) == "traced" {
			if d.Headers["tenant"] != "acme" {
				t.Errorf("the caller's header was lost: %v", d.Headers)
			}
			got := trace.SpanContextFromContext(d.TraceContext(context.Background()))
			if got.TraceID() != span.TraceID() || got.SpanID() != span.SpanID() || !got.IsRemote() {
				t.Errorf("TraceContext = %v, want the producer's span as remote", got)
			}
		}
		ack(t, d)
	}

	// Consume's handler gets the trace in its context.
	hctx, stop := context.WithCancel(testCtx(t))
	seen := make(chan trace.SpanContext, 1)
	go cons.Consume(hctx, func(ctx context.Context, d *fila.Delivery) error {
		seen <- trace.SpanContextFromContext(ctx)
		return nil
	}, 1)
	defer stop()
	select {
	case got := <-seen:
		if got.TraceID() != span.TraceID() {
			t.Errorf("the handler's context has trace %v, want %v", got.TraceID(), span.TraceID())
		}
	case <-time.After(waitFor):
		t.Fatal("the handler did not run")
	}
}
