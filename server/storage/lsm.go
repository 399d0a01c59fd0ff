package storage

import (
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// LSM is an optional ability of a Store: the shape of its log-structured merge tree, for the
// operator (fila_storage_lsm_* metrics). The Pebble DB has it; the in-memory twin does not.
type LSM interface {
	LSMStats() (LSMStats, error)
}

var _ LSM = (*DB)(nil)

// LSMStats is what Pebble reports of its tree at one moment, plus the store's count of the write
// stalls it had.
type LSMStats struct {
	L0Files             int64         // sstables in level 0
	L0Sublevels         int32         // level 0's sublevels: how many files a read may consult there
	Tables              int64         // sstables in all levels
	TableBytes          int64         // their size
	BlobFiles           uint64        // live blob files (the separated values: bodies and log entries)
	BlobBytes           uint64        // their size
	Memtables           int64         // memtables, the mutable one and those waiting for a flush
	CompactionsRunning  int64         // compactions in progress
	CompactionDebtBytes uint64        // bytes to compact before the tree's shape meets its targets
	Compactions         int64         // compactions done since the open
	CompactionTime      time.Duration // their total duration (running ones included)
	Flushes             int64         // memtable flushes done since the open
	WriteStalls         int64         // write stalls begun since the store opened
	WriteStallTime      time.Duration // time writes were stalled
}

// LSMStats implements LSM.
func (d *DB) LSMStats() (s LSMStats, err error) {
	err = d.Read(func(p *pebble.DB) error {
		m := p.Metrics()
		s = LSMStats{
			L0Files: m.Levels[0].TablesCount, L0Sublevels: m.Levels[0].Sublevels,
			BlobFiles: m.BlobFiles.LiveCount, BlobBytes: m.BlobFiles.LiveSize,
			Memtables: m.MemTable.Count, CompactionsRunning: m.Compact.NumInProgress,
			CompactionDebtBytes: m.Compact.EstimatedDebt, Compactions: m.Compact.Count,
			CompactionTime: m.Compact.Duration, Flushes: m.Flush.Count,
		}
		for _, l := range m.Levels {
			s.Tables += l.TablesCount
			s.TableBytes += l.TablesSize
		}
		return nil
	})
	s.WriteStalls, s.WriteStallTime = d.stalls.count.Load(), time.Duration(d.stalls.nanos.Load())
	return s, err
}

// stalls counts Pebble's write stalls. Pebble reports one stall at a time: a begin, then its end.
type stalls struct {
	count atomic.Int64
	nanos atomic.Int64 // the stalls' total duration
	began atomic.Int64 // the current stall's start (time.Now().UnixNano()), 0 when none
}

func (s *stalls) begin() {
	s.count.Add(1)
	s.began.Store(time.Now().UnixNano())
}

func (s *stalls) end() {
	if t := s.began.Swap(0); t != 0 {
		s.nanos.Add(time.Now().UnixNano() - t)
	}
}
