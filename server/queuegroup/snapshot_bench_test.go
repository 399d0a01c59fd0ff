package queuegroup

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
)

// BenchmarkWriteSnapshot writes the snapshot of a group holding a backlog of one million ready
// messages (one fairness key), as the actor does while the queue pauses, to a file; it reports
// the time per stored message.
func BenchmarkWriteSnapshot(b *testing.B) {
	const stored = 1_000_000
	s := newState(b)
	c := queuelog.Enqueue{At: 1}
	for i := range stored {
		var id wire.UUID
		binary.BigEndian.PutUint64(id[:8], uint64(i+1))
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: id, FairnessKey: "k", Weight: 1, NotBefore: 1}) // as the broker enqueues: deliverable from acceptance
		if len(c.Messages) == 4096 || i == stored-1 {
			if err := s.Enqueue(&c); err != nil {
				b.Fatal(err)
			}
			c.Messages = c.Messages[:0]
		}
	}
	path := filepath.Join(b.TempDir(), "snapshot")
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.WriteSnapshot(f); err != nil {
			b.Fatal(err)
		}
		n, _ := f.Seek(0, io.SeekCurrent)
		f.Close()
		b.ReportMetric(float64(n)/stored, "B/msg")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/stored, "ns/msg")
}
