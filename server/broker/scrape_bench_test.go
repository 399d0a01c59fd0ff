package broker

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/filamq/fila/server/storage"
)

// cpuTime is the process's CPU time so far (user and system).
func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkScrape measures one /metrics scrape of a broker holding 2,000 queues, each of which
// took a message (so its counters and histograms exist): the time and the bytes of the answer
// (uncompressed, as a scraper without gzip reads it) and the CPU time of the whole process
// meanwhile, which includes the actors answering the collector.
func BenchmarkScrape(b *testing.B) {
	const queues = 2000
	reg := prometheus.NewRegistry()
	br, err := Open(Options{Store: storage.NewMem(), Registry: reg, IdleTimeout: -1, MaxQueues: queues,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	reg.MustRegister(NewCollector(br, CollectorOptions{}))
	for i := range queues {
		name := fmt.Sprintf("q%d", i)
		if e := br.CreateQueue(QueueSpec{Name: name}); e != nil {
			b.Fatal(e)
		}
		done := make(chan *Error, 1)
		br.Enqueue([]Message{{Queue: name, FairnessKey: "k", Payload: []byte("m")}}, func(_ []EnqueueResult, e *Error) { done <- e })
		if e := <-done; e != nil {
			b.Fatal(e)
		}
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	b.ResetTimer()
	var size int
	cpu := cpuTime()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		size = w.Body.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N), "cpu-us/scrape")
}
