package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
)

var benchQueues = flag.Int("api-queues", 10_000, "how many queues BenchmarkAdminAPI's broker holds")

// BenchmarkAdminAPI measures the console's polling requests against a broker of -api-queues
// queues (10,000 by default), each holding a message: one answer's time and allocations, served
// by the API's handler in process (authentication off, a loopback client).
func BenchmarkAdminAPI(b *testing.B) {
	br, err := broker.Open(broker.Options{Store: storage.NewMem(), IdleTimeout: -1, MaxQueues: *benchQueues,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < *benchQueues; i += 8 {
				name := fmt.Sprintf("queue-%05d", i)
				if e := br.CreateQueue(broker.QueueSpec{Name: name}); e != nil {
					b.Error(e)
					return
				}
				done := make(chan *broker.Error, 1)
				br.Enqueue([]broker.Message{{Queue: name, FairnessKey: "k", Payload: []byte("m")}}, func(_ []broker.EnqueueResult, e *broker.Error) { done <- e })
				if e := <-done; e != nil {
					b.Error(e)
					return
				}
			}
		}()
	}
	wg.Wait()
	api := newAdminAPI()
	api.b.Store(br)
	for _, path := range []string{"overview", "queues", "queues?sort=depth&limit=500", "queues?search=queue-0999"} {
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("GET", apiPath+path, nil)
				r.RemoteAddr = "127.0.0.1:1234"
				api.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("GET %s answered %d %s", path, w.Code, w.Body)
				}
				size = w.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/answer")
		})
	}
}
