package broker

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/storage"
)

// Each snapshot of a queue's state is counted in fila_snapshot_seconds{queue}, with the time the
// queue paused for it: 70 MiB proposed passes the 64 MiB a snapshot waits for.
func TestSnapshotsAreMeasured(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := Open(Options{Store: storage.NewMem(), Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	reg.MustRegister(NewCollector(b, CollectorOptions{})) // the per-queue series
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	payload := make([]byte, 512<<10)
	for range 140 {
		done := make(chan *Error, 1)
		b.Enqueue([]Message{{Queue: "q", Payload: payload}}, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "fila_snapshot_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == "q" && m.GetHistogram().GetSampleCount() >= 1 && m.GetHistogram().GetSampleSum() > 0 {
				return
			}
		}
		t.Fatalf("fila_snapshot_seconds has no snapshot of q: %v", f)
	}
	t.Fatal("no fila_snapshot_seconds series")
}
