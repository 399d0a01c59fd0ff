package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/config"
)

// stuckCollector is a collector whose Collect waits until release is closed: a scrape that
// takes long (a client that does not read a large answer holds its handler the same way).
type stuckCollector struct {
	desc    *prometheus.Desc
	entered chan struct{} // one value per Collect that waits
	release chan struct{}
}

func (c stuckCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c stuckCollector) Collect(ch chan<- prometheus.Metric) {
	c.entered <- struct{}{}
	<-c.release
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1)
}

// Slow scrapes of /metrics must not hold every HTTP connection inside a handler, where the
// listener cannot close them for room: at most maxScrapes run at once, the rest are answered
// 503 at once, and a probe is served meanwhile. Before, 64 slow scrapes held all 64 slots and
// the probe waited until they ended.
func TestSlowScrapesDoNotStarveTheProbes(t *testing.T) {
	reg := prometheus.NewRegistry()
	stuck := stuckCollector{desc: prometheus.NewDesc("test_stuck", "a collector that waits", nil, nil), entered: make(chan struct{}, maxHTTPConnections), release: make(chan struct{})}
	reg.MustRegister(stuck)
	defer close(stuck.release)
	ready := &readiness{}
	ready.set(phaseServing)
	cfg := config.Default()
	cfg.HTTPListen = "127.0.0.1:0"
	srv, err := startHTTP(cfg, reg, ready, &healthz{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait() // last but one: the readers end with their connections
	defer srv.Close()
	for range maxHTTPConnections {
		nc, err := net.Dial("tcp", srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		fmt.Fprintf(nc, "GET /metrics HTTP/1.1\r\nHost: fila\r\n\r\n")
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(io.Discard, nc) }()
	}
	inside := 0 // scrapes inside their handler; with the bound, the rest answered 503 and idle
	for inside < maxHTTPConnections {
		select {
		case <-stuck.entered:
			inside++
			continue
		case <-time.After(time.Second):
		}
		break // no scrape entered for a second: the rest were turned away (a short wait only weakens the test)
	}
	probe := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := probe.Get("http://" + srv.Addr + "/readyz")
	if err != nil {
		t.Fatalf("/readyz with %d slow scrapes: %v", maxHTTPConnections, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz with %d slow scrapes: %d", maxHTTPConnections, resp.StatusCode)
	}
}
