package broker

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/storage"
)

// A scrape does not copy whole fairness keys into labels: fila_queue_fairness_key_ready's key
// label is at most maxKeyLabel bytes of valid UTF-8, distinct for keys that share a long
// beginning. Before, ten keys of 60 KB made 600 KB of labels per queue and scrape.
func TestFairnessKeyLabelsAreBounded(t *testing.T) {
	b, err := Open(Options{Store: storage.NewMem(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	long := strings.Repeat("é", 30_000) // 60 KB, two bytes a character: a cut may fall inside one
	keys := []string{"short", long + "a", long + "b", "x" + long}
	for _, k := range keys {
		done := make(chan *Error, 1)
		b.Enqueue([]Message{{Queue: "q", FairnessKey: k, Payload: []byte("m")}}, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			t.Fatal(e)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b, CollectorOptions{}))
	families, err := reg.Gather() // fails on two series with the same labels
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]bool{}
	for _, f := range families {
		if f.GetName() != "fila_queue_fairness_key_ready" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "key" {
					continue
				}
				v := l.GetValue()
				if len(v) > maxKeyLabel || !utf8.ValidString(v) {
					t.Errorf("key label of %d bytes (valid UTF-8: %v); bound %d", len(v), utf8.ValidString(v), maxKeyLabel)
				}
				labels[v] = true
			}
		}
	}
	if len(labels) != len(keys) || !labels["short"] {
		t.Fatalf("%d distinct key labels for %d keys", len(labels), len(keys))
	}
}
