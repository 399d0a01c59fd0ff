package main

import (
	"crypto/tls"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRatioAndVerdict(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name       string
		b          better
		fila, nats float64
		ratio      string
		verdict    string
	}{
		{"throughput win", higherBetter, 200, 100, "2.000", "win"},
		{"throughput tie wins", higherBetter, 100, 100, "1.000", "win"},
		{"throughput loss", higherBetter, 50, 100, "0.500", "loss"},
		{"latency win", lowerBetter, 50, 100, "0.500", "win"},
		{"latency tie wins", lowerBetter, 100, 100, "1.000", "win"},
		{"latency loss", lowerBetter, 300, 100, "3.000", "loss"},
		{"fila n/a", higherBetter, nan, 100, "n/a", "n/a"},
		{"nats n/a", lowerBetter, 100, nan, "n/a", "n/a"},
		{"nats zero", higherBetter, 100, 0, "n/a", "n/a"},
	} {
		f := figure{name: "w", unit: "msg/s", better: tc.b, fila: tc.fila, nats: tc.nats}
		if got := plainRatio(f.ratio()); got != tc.ratio {
			t.Errorf("%s: ratio %s, want %s", tc.name, got, tc.ratio)
		}
		if got := f.verdict(); got != tc.verdict {
			t.Errorf("%s: verdict %s, want %s", tc.name, got, tc.verdict)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100 … 1, unsorted on purpose
	}
	for _, tc := range []struct {
		samples []time.Duration
		p       float64
		want    time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		{ms(3, 1, 2), 50, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 100, 4 * time.Millisecond},
		{ms(hundred...), 50, 50 * time.Millisecond},
		{ms(hundred...), 99, 99 * time.Millisecond},
		{ms(hundred...), 1, 1 * time.Millisecond},
	} {
		if got := percentile(tc.samples, tc.p); got != tc.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.samples, tc.p, got, tc.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	for _, tc := range []struct {
		v          float64
		unit       string
		plain, grp string
	}{
		{1234567.4, "msg/s", "1234567", "1,234,567"},
		{999, "msg/s", "999", "999"},
		{1000, "msg/s", "1000", "1,000"},
		{1234.56, "us", "1234.6", "1,234.6"},
		{-4321, "msg/s", "-4321", "-4,321"},
		{math.NaN(), "us", "n/a", "n/a"},
	} {
		if got := plain(tc.v, tc.unit); got != tc.plain {
			t.Errorf("plain(%v) = %q, want %q", tc.v, got, tc.plain)
		}
		if got := grouped(tc.v, tc.unit); got != tc.grp {
			t.Errorf("grouped(%v) = %q, want %q", tc.v, got, tc.grp)
		}
	}
}

func TestCompareLine(t *testing.T) {
	f := figure{name: "publish_1kb_fsync", unit: "msg/s", fila: 120000.4, nats: 60000}
	if got, want := f.compareLine(), "COMPARE workload=publish_1kb_fsync fila=120000 nats=60000 ratio=2.000 unit=msg/s"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	f = figure{name: "rift_pubsub_1kb", unit: "msg/s", fila: math.NaN(), nats: 77601}
	if got, want := f.compareLine(), "COMPARE workload=rift_pubsub_1kb fila=n/a nats=77601 ratio=n/a unit=msg/s"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestMarkdownTable(t *testing.T) {
	figs := []figure{
		{name: "publish_1kb_default", peer: "JetStream default", unit: "msg/s", better: higherBetter, target: 1, fila: 93369, nats: 33566},
		{name: "lifecycle_1kb_4c", peer: "JetStream default", unit: "msg/s", better: higherBetter, target: 2, fila: 41236, nats: 22878},
		{name: "latency_p50_1kb", peer: "JetStream default", unit: "us", better: lowerBetter, target: 1, fila: 655.2, nats: 241.6},
		{name: "rift_pubsub_1kb", peer: "NATS core over TLS", unit: "msg/s", better: higherBetter, target: 1, fila: math.NaN(), nats: 77601},
	}
	want := `| workload | NATS side | unit | better | fila | nats | ratio fila/nats | vs NATS | target |
| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- |
| publish_1kb_default | JetStream default | msg/s | higher | 93,369 | 33,566 | 2.782 | win | ≥ 1.0: met |
| lifecycle_1kb_4c | JetStream default | msg/s | higher | 41,236 | 22,878 | 1.802 | win | ≥ 2.0: missed |
| latency_p50_1kb | JetStream default | µs | lower | 655.2 | 241.6 | 2.712 | loss | ≤ 1.0: missed |
| rift_pubsub_1kb | NATS core over TLS | msg/s | higher | n/a | 77,601 | n/a | n/a | ≥ 1.0: n/a |
`
	if got := markdownTable(figs); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := writeChart(path, figs); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Fatalf("chart is not a PNG (%v)", err)
	}
}

func TestWorkloadSelection(t *testing.T) {
	seen := map[string]bool{}
	for _, w := range workloads {
		for _, f := range w.figures {
			if seen[f.name] {
				t.Errorf("figure %s appears twice", f.name)
			}
			seen[f.name] = true
		}
		if w.selected("") == w.optIn || !w.selected("nope, "+w.name[:4]) || w.selected("nope") {
			t.Errorf("%s: -only matching is wrong", w.name)
		}
	}
}

func TestNATSConfig(t *testing.T) {
	e := &env{certs: &certs{certFile: "/c/server.pem", keyFile: "/c/key.pem"}}
	got := e.natsConfig(jsSyncAlways, 4222, 0, "/d")
	if !strings.Contains(got, "sync_interval: always") || !strings.Contains(got, `store_dir: "/d/js"`) ||
		!strings.Contains(got, `listen: "127.0.0.1:4222"`) {
		t.Errorf("sync-always config:\n%s", got)
	}
	if got := e.natsConfig(jsDefault, 4222, 0, "/d"); strings.Contains(got, "sync_interval") {
		t.Errorf("default config sets sync_interval:\n%s", got)
	}
	got = e.natsConfig(coreTLS, 4222, 6060, "/d")
	if strings.Contains(got, "jetstream") || !strings.Contains(got, `cert_file: "/c/server.pem"`) || !strings.Contains(got, "prof_port: 6060") {
		t.Errorf("TLS config:\n%s", got)
	}
}

func TestCertsHandshake(t *testing.T) {
	c, err := makeCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1"} {
		a, b := net.Pipe()
		srv := tls.Server(a, &tls.Config{Certificates: []tls.Certificate{pair}})
		go srv.Handshake()
		conf := c.client.Clone()
		conf.ServerName = name
		if err := tls.Client(b, conf).Handshake(); err != nil {
			t.Errorf("handshake as %s: %v", name, err)
		}
		a.Close()
		b.Close()
	}
}

func TestRateWindow(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	steady := &rateWindow{}
	for i := 0; i <= 20; i++ {
		steady.add(at(i*50), int64(i*500)) // 10,000/s
	}
	if got := steady.rate(); math.Abs(got-10_000) > 1e-6 {
		t.Errorf("steady: %v, want 10000", got)
	}
	bursty := &rateWindow{}
	for i := 0; i <= 80; i++ { // 1,600 acknowledged at once every 1.6 s, first burst at 0.6 s
		ms := i * 50
		bursty.add(at(ms), int64(1600*((ms+1000)/1600)))
	}
	if got := bursty.rate(); math.Abs(got-1000) > 1e-6 {
		t.Errorf("bursty: %v, want 1000", got)
	}
	one := &rateWindow{}
	one.add(at(0), 0)
	one.add(at(500), 0)
	one.add(at(1000), 100)
	if got := one.rate(); math.Abs(got-100) > 1e-6 {
		t.Errorf("one move: %v, want 100", got)
	}
	if got := (&rateWindow{}).rate(); got != 0 {
		t.Errorf("no samples: %v", got)
	}
}

func TestMediansOfRepeatedRuns(t *testing.T) {
	run := func(fila, nats float64) []figure {
		return []figure{{name: "w", unit: "msg/s", better: higherBetter, target: 1, fila: fila, nats: nats}}
	}
	got := medians([][]figure{run(30, 10), run(10, 40), run(20, 20)})
	if f := got[0]; f.fila != 20 || f.nats != 20 || f.name != "w" || len(f.filaRuns) != 3 {
		t.Fatalf("medians of three runs: %+v", f)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median of an even count = %v, want 2.5", m)
	}
	if m := median([]float64{1, math.NaN(), 3}); !math.IsNaN(m) {
		t.Errorf("a side that was n/a in one run has median %v, want n/a", m)
	}
	if single := medians([][]figure{run(5, 6)}); single[0].fila != 5 || single[0].filaRuns != nil {
		t.Errorf("one run: %+v", single[0])
	}
	if c := cell(20, []float64{30, 10, 20}, "msg/s"); c != "20 (10–30)" {
		t.Errorf("cell = %q", c)
	}
	if c := cell(20, nil, "msg/s"); c != "20" {
		t.Errorf("cell of one run = %q", c)
	}
	table := markdownTable(got)
	if !strings.Contains(table, "| 20 (10–30) | 20 (10–40) |") {
		t.Errorf("table does not show the ranges:\n%s", table)
	}
}
