package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/filamq/fila/server/storage"
)

// lsmCollector reports the shape of the store's LSM tree (fila_storage_lsm_*), read once per
// scrape.
type lsmCollector struct {
	lsm   storage.LSM
	descs []lsmSeries
}

// lsmSeries is one series of lsmCollector and how it is read from the stats.
type lsmSeries struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(s storage.LSMStats) float64
}

func newLSMCollector(lsm storage.LSM) *lsmCollector {
	c := &lsmCollector{lsm: lsm}
	add := func(name, help string, kind prometheus.ValueType, value func(s storage.LSMStats) float64) {
		c.descs = append(c.descs, lsmSeries{prometheus.NewDesc("fila_storage_lsm_"+name, help, nil, nil), kind, value})
	}
	gauge, counter := prometheus.GaugeValue, prometheus.CounterValue
	add("l0_files", "Sstables in level 0 of the store's LSM tree.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.L0Files) })
	add("l0_sublevels", "Sublevels of level 0: how many files a read may consult there.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.L0Sublevels) })
	add("tables", "Sstables in all levels.", gauge, func(s storage.LSMStats) float64 { return float64(s.Tables) })
	add("table_bytes", "Bytes of the sstables of all levels.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.TableBytes) })
	add("blob_files", "Live blob files (message bodies and log entries kept out of the sstables).", gauge,
		func(s storage.LSMStats) float64 { return float64(s.BlobFiles) })
	add("blob_bytes", "Bytes of the live blob files.", gauge, func(s storage.LSMStats) float64 { return float64(s.BlobBytes) })
	add("memtables", "Memtables: the one written and those waiting for a flush.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.Memtables) })
	add("compactions_running", "Compactions in progress.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.CompactionsRunning) })
	add("compaction_debt_bytes", "Estimated bytes to compact before the tree meets its shape targets.", gauge,
		func(s storage.LSMStats) float64 { return float64(s.CompactionDebtBytes) })
	add("compactions_total", "Compactions done since the store opened.", counter,
		func(s storage.LSMStats) float64 { return float64(s.Compactions) })
	add("compaction_seconds_total", "Time spent in compactions since the store opened.", counter,
		func(s storage.LSMStats) float64 { return s.CompactionTime.Seconds() })
	add("flushes_total", "Memtable flushes since the store opened.", counter,
		func(s storage.LSMStats) float64 { return float64(s.Flushes) })
	add("write_stalls_total", "Write stalls since the store opened (too many memtables or level-0 files).", counter,
		func(s storage.LSMStats) float64 { return float64(s.WriteStalls) })
	add("write_stall_seconds_total", "Time writes were stalled since the store opened.", counter,
		func(s storage.LSMStats) float64 { return s.WriteStallTime.Seconds() })
	return c
}

func (c *lsmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.descs {
		ch <- s.desc
	}
}

func (c *lsmCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := c.lsm.LSMStats()
	if err != nil {
		return // the store is closed or being reopened: no sample this scrape
	}
	for _, s := range c.descs {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(st))
	}
}
