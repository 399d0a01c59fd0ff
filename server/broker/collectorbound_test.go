package broker

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/storage"
)

// At most MaxQueues queues get series of their own — those with the most stored messages — and
// the others are summed under queue="*others": a server with thousands of queues answered a
// scrape of 13.8 MB at 2,000 queues (about 7 KB of series per queue and dead-letter queue).
// Five queues hold 1 to 5 messages; with a bound of 3 the three fullest have their own series
// and the two others, with the five dead-letter queues, make one sum whose counters, gauges and
// histograms add up to theirs.
func TestPerQueueSeriesAreBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := Open(Options{Store: storage.NewMem(), Registry: reg, IdleTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	reg.MustRegister(NewCollector(b, CollectorOptions{MaxQueues: 3}))
	for i := range 5 {
		name := fmt.Sprintf("q%d", i)
		if e := b.CreateQueue(QueueSpec{Name: name}); e != nil {
			t.Fatal(e)
		}
		for range i + 1 {
			done := make(chan *Error, 1)
			b.Enqueue([]Message{{Queue: name, Payload: []byte("m")}}, func(_ []EnqueueResult, e *Error) { done <- e })
			if e := <-done; e != nil {
				t.Fatal(e)
			}
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{} // series → queue → value (a histogram's count)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			queue := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					queue = l.GetValue()
				}
			}
			if got[f.GetName()] == nil {
				got[f.GetName()] = map[string]float64{}
			}
			switch {
			case m.Counter != nil:
				got[f.GetName()][queue] = m.Counter.GetValue()
			case m.Gauge != nil:
				got[f.GetName()][queue] = m.Gauge.GetValue()
			case m.Histogram != nil:
				got[f.GetName()][queue] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	want := map[string]float64{"q4": 5, "q3": 4, "q2": 3, OtherQueues: 1 + 2}
	for _, series := range []string{"fila_queue_depth", "fila_enqueued_total"} {
		if !cmp.Equal(got[series], want) {
			t.Errorf("%s: %v, want %v", series, got[series], want)
		}
	}
	for _, series := range []string{"fila_delivery_wait_seconds", "fila_ack_latency_seconds", "fila_snapshot_seconds", "fila_acked_total"} {
		if len(got[series]) != 4 || got[series][OtherQueues] != 0 {
			t.Errorf("%s: %v, want a zero series for each of q2, q3, q4 and %s", series, got[series], OtherQueues)
		}
	}
}

// With the default bound, a scrape of 300 queues (600 with their dead-letter queues) labels
// DefaultMetricsQueues of them and the sum.
func TestPerQueueSeriesAreBoundedByDefault(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := Open(Options{Store: storage.NewMem(), Registry: reg, IdleTimeout: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	reg.MustRegister(NewCollector(b, CollectorOptions{}))
	for i := range 300 {
		if e := b.CreateQueue(QueueSpec{Name: fmt.Sprintf("q%d", i)}); e != nil {
			t.Fatal(e)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		queues := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					queues[l.GetValue()] = true
				}
			}
		}
		if len(queues) > DefaultMetricsQueues+1 {
			t.Errorf("%s labels %d queues, want at most %d and %s", f.GetName(), len(queues), DefaultMetricsQueues, OtherQueues)
		}
	}
}
