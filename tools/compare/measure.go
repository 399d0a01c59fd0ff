package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// bar is a progress bar on stderr that clears itself when done.
func bar(max int64, label string) *progressbar.ProgressBar {
	return progressbar.NewOptions64(max, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(label), progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

// measureRate waits out the warm-up, then returns count's rate per second over the measuring
// time, with a progress bar. It samples the counter every 50 ms and takes the rate between the
// first and the last sample at which it moved (see rateWindow); when the counter moved fewer than
// three times, it goes on for up to four more measuring times. With -profile it also takes the
// broker's CPU and allocation profiles.
func (e *env) measureRate(ctx context.Context, label string, count func() int64) (float64, error) {
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(e.o.warmup):
	}
	stopProf := e.profile(e.o.duration)
	defer stopProf()
	b := bar(e.o.duration.Milliseconds(), label)
	var w rateWindow
	start, cpu, c0 := time.Now(), e.startCPU(), count()
	w.add(start, c0)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for el := time.Duration(0); el < e.o.duration || (w.moves < 3 && el < 5*e.o.duration); el = time.Since(start) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case now := <-tick.C:
			w.add(now, count())
		}
		b.Set64(min(el, e.o.duration).Milliseconds())
		b.Describe(fmt.Sprintf("%s %.0f msg/s", label, w.rate()))
	}
	b.Finish()
	e.stopCPU(cpu, w.prev-c0)
	return w.rate(), nil
}

// rateWindow turns samples of a growing counter into a rate. It measures from the first to the
// last sample at which the counter moved, so a broker that acknowledges in bursts (JetStream with
// sync_interval: always acknowledges its in-flight window every second or two here) is measured
// over whole burst periods rather than wherever the window happens to cut one. A steady counter
// moves at every sample, which makes this the plain rate over the window.
type rateWindow struct {
	n             int
	prev          int64
	moves         int // samples at which the counter had moved since the previous one
	firstT, lastT time.Time
	firstC, lastC int64
	startT        time.Time
	startC        int64
}

func (w *rateWindow) add(t time.Time, c int64) {
	w.n++
	if w.n == 1 {
		w.startT, w.startC, w.prev = t, c, c
		return
	}
	if c != w.prev {
		w.moves++
		if w.moves == 1 {
			w.firstT, w.firstC = t, c
		}
		w.lastT, w.lastC = t, c
	}
	w.prev = c
}

// rate is the counter's rate per second: between the first and the last move once there are two
// moves at least, from the first sample to the only move otherwise, 0 without a move.
func (w *rateWindow) rate() float64 {
	switch {
	case w.moves == 0:
		return 0
	case w.moves == 1 || !w.lastT.After(w.firstT):
		return float64(w.lastC-w.startC) / w.lastT.Sub(w.startT).Seconds()
	default:
		return float64(w.lastC-w.firstC) / w.lastT.Sub(w.firstT).Seconds()
	}
}

// measureLatency calls one warm-up times, then samples times, and returns the p50 and p99 of the
// samples in microseconds. one does a single exchange and returns its latency.
func (e *env) measureLatency(ctx context.Context, label string, one func() (time.Duration, error)) (p50, p99 float64, err error) {
	warm, n := e.o.latencyWarmup, e.o.latencySamples
	for range warm {
		if _, err := one(); err != nil {
			return 0, 0, err
		}
	}
	stopProf := e.profile(0)
	defer stopProf()
	b := bar(int64(n), label)
	samples := make([]time.Duration, 0, n)
	cpu := e.startCPU()
	for range n {
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		d, err := one()
		if err != nil {
			return 0, 0, err
		}
		samples = append(samples, d)
		b.Add(1)
	}
	b.Finish()
	e.stopCPU(cpu, int64(n))
	return micros(percentile(samples, 50)), micros(percentile(samples, 99)), nil
}

// profile starts taking the current broker's CPU profile for d (10 s when d is 0) when -profile is
// on, into <out>/pprof/<workload>-<broker>.cpu.pprof, and this tool's own (the load generator and
// client libraries) into <workload>-<broker>-client.cpu.pprof until stop. stop waits for them and
// adds the broker's allocation profile.
func (e *env) profile(d time.Duration) (stop func()) {
	if !e.o.profile || e.pprofURL == "" {
		return func() {}
	}
	dir := filepath.Join(e.o.out, "pprof")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "   profile:", err)
		return func() {}
	}
	base := filepath.Join(dir, e.profName)
	secs := max(1, int(d.Seconds()))
	if d == 0 {
		secs = 10 // latency runs: a fixed window from the start of the samples
	}
	var wg sync.WaitGroup
	wg.Go(func() { fetch(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", e.pprofURL, secs), base+".cpu.pprof") })
	client, err := os.Create(base + "-client.cpu.pprof")
	if err == nil {
		err = pprof.StartCPUProfile(client)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "   profile:", err)
	}
	return func() {
		if client != nil {
			pprof.StopCPUProfile()
			client.Close()
		}
		wg.Wait()
		fetch(e.pprofURL+"/debug/pprof/allocs", base+".allocs.pprof")
	}
}

// fetch saves the body of url to path, reporting failures on stderr.
func fetch(url, path string) {
	resp, err := http.Get(url)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "   profile:", err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "   profile:", err)
		return
	}
	defer f.Close()
	io.Copy(f, resp.Body)
}
