package main

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/offheap"
)

// scratchDirName is the scratch directory in data_dir: the files behind the queues' record
// chunks, which hold nothing durable (offheap.Allocator.OpenScratch).
const scratchDirName = "scratch"

// sweepInterval is how often the pages of the scratch regions are dropped from RSS.
const sweepInterval = time.Second

// startScratch opens alloc's scratch directory in dataDir and sweeps it every sweepInterval
// until the returned stop is called, which closes alloc (after the broker: the queues have given
// their memory back, or keep it valid until they do). Its regions leave keepFree of the disk free
// (the store's reserve: a full disk is the store's to answer). If the directory cannot hold
// scratch files (a file system where fallocate does not reserve, no space) the server runs
// without (the records stay in anonymous memory) and says so. The stop waits at most timeout
// (shutdown_timeout) for the sweep, the region maker and the unmapper to end: on a disk that no
// longer answers any of them may wait in the kernel for ever, and the files hold nothing the next
// start needs.
func startScratch(alloc *offheap.Allocator, dataDir string, keepFree int64, timeout time.Duration, log *slog.Logger) (stop func()) {
	if err := alloc.OpenScratch(filepath.Join(dataDir, scratchDirName), keepFree); err != nil {
		log.Warn("no scratch files: queued messages' records stay in memory", "err", err)
		return func() { alloc.Close() }
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(sweepInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				alloc.Sweep()
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		closed := make(chan struct{})
		go func() {
			<-done
			alloc.Close()
			close(closed)
		}()
		select {
		case <-closed:
		case <-time.After(timeout):
			log.Warn("the scratch files did not close within shutdown_timeout (a disk that does not answer?): exiting without closing them", "timeout", timeout)
		}
	}
}

// mappedCollector reports the queues' memory outside the Go heap (offheap.Allocator.Stats).
type mappedCollector struct {
	alloc                                                                     *offheap.Allocator
	mapped, scratch, resident, cached, fallbacks, mapLimitFallbacks, mappings *prometheus.Desc
}

func newMappedCollector(alloc *offheap.Allocator) *mappedCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("fila_engine_"+name, help, nil, nil)
	}
	return &mappedCollector{
		alloc:             alloc,
		mapped:            d("mapped_bytes", "Bytes of the queues' records and ID indexes mapped outside the Go heap (anonymous memory and scratch regions)."),
		scratch:           d("scratch_bytes", "Bytes of those that are regions of scratch files (disk space reserved in data_dir/scratch)."),
		resident:          d("scratch_resident_bytes", "Bytes of the scratch regions in the process's memory (RSS) at the scrape."),
		cached:            d("scratch_cached_bytes", "Bytes of the scratch regions in the kernel's page cache (resident or swept) at the scrape."),
		fallbacks:         d("scratch_fallbacks_total", "Record and index chunks kept in anonymous memory because no scratch region could be made (disk space kept for the store, full disk)."),
		mapLimitFallbacks: d("map_limit_fallbacks_total", "Buffers kept off a new mapping (anonymous memory instead of a scratch region, the Go heap instead of anonymous memory) because the engine's mappings reached their share of vm.max_map_count."),
		mappings:          d("mappings", "Mappings the engine holds (scratch regions and anonymous buffers), bounded to a share of vm.max_map_count."),
	}
}

func (c *mappedCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.mapped, c.scratch, c.resident, c.cached, c.fallbacks, c.mapLimitFallbacks, c.mappings} {
		ch <- d
	}
}

func (c *mappedCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.alloc.Stats()
	ch <- prometheus.MustNewConstMetric(c.mapped, prometheus.GaugeValue, float64(st.Mapped))
	ch <- prometheus.MustNewConstMetric(c.scratch, prometheus.GaugeValue, float64(st.Scratch))
	ch <- prometheus.MustNewConstMetric(c.resident, prometheus.GaugeValue, float64(st.Resident))
	ch <- prometheus.MustNewConstMetric(c.cached, prometheus.GaugeValue, float64(st.Cached))
	ch <- prometheus.MustNewConstMetric(c.fallbacks, prometheus.CounterValue, float64(st.Fallbacks))
	ch <- prometheus.MustNewConstMetric(c.mapLimitFallbacks, prometheus.CounterValue, float64(st.MapLimitFallbacks))
	ch <- prometheus.MustNewConstMetric(c.mappings, prometheus.GaugeValue, float64(st.Mappings))
}
