package fila

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/propagation"
)

// Trace propagation. With Options.Propagator set — propagation.TraceContext{} for W3C Trace
// Context, or a composite with propagation.Baggage{} — the trace of the context given to
// Client.Enqueue and Producer.Send is injected into each message's headers (traceparent,
// tracestate), and Delivery.TraceContext and the handler of Consumer.Consume extract it, so a
// trace crosses the queue: start the consumer's span from that context. Headers the caller set
// are never overwritten (a message forwarded with its traceparent keeps it). SendAsync takes no
// context, so it injects nothing: use Send, or Inject yourself.
//
// Only FIBP carries this: Rift frames have no headers, so client/rift has no such option.

// inject returns headers with the propagator's fields for ctx added; the caller's map is not
// changed (a copy is made when there is something to add). With no propagator, or no trace in
// ctx, it returns headers as they are.
func inject(p propagation.TextMapPropagator, ctx context.Context, headers map[string]string) map[string]string {
	if p == nil {
		return headers
	}
	carrier := propagation.MapCarrier{}
	p.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return headers
	}
	out := make(map[string]string, len(headers)+len(carrier))
	maps.Copy(out, carrier)
	maps.Copy(out, headers) // the caller's headers win
	return out
}

// injectAll injects ctx's trace into every message of msgs, copying the slice when it does.
func injectAll(p propagation.TextMapPropagator, ctx context.Context, msgs []Message) []Message {
	if p == nil {
		return msgs
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Headers = inject(p, ctx, m.Headers)
		out[i] = m
	}
	return out
}

// TraceContext returns ctx carrying the trace the producer injected into the message's
// headers (with Options.Propagator set on this client); ctx itself when there is none.
func (d *Delivery) TraceContext(ctx context.Context) context.Context {
	if d.c == nil || d.c.opts.Propagator == nil || len(d.Headers) == 0 {
		return ctx
	}
	return d.c.opts.Propagator.Extract(ctx, propagation.MapCarrier(d.Headers))
}
