package storage

import (
	"encoding/binary"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/queuelog"
	"github.com/filamq/fila/generated/wire"
)

// enqueueEntry returns a log entry enqueueing n messages of a 1 KiB payload and two headers,
// the first with ID first.
func enqueueEntry(first uint64, n int) []byte {
	c := queuelog.Enqueue{At: 1}
	payload := make([]byte, 1024)
	for i := range n {
		var id wire.UUID
		binary.BigEndian.PutUint64(id[:], first+uint64(i))
		c.Messages = append(c.Messages, queuelog.LogMessage{ID: id, FairnessKey: "tenant-7", Weight: 1,
			Headers: map[string]string{"trace": "abc", "kind": "order"}, Payload: payload})
	}
	return queuelog.AppendFrame(nil, &c)
}

// The enqueue path's write: a batch of entries whose bodies the log store splits out and stores
// beside them (without an fsync, so that the split and the batch are what is measured).
func BenchmarkBodyLogStoreLogs(b *testing.B) {
	db, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	logs, _, err := db.QueueLog("q", groupBodies)
	if err != nil {
		b.Fatal(err)
	}
	const entries, perEntry = 256, 32
	data := make([][]byte, entries)
	for i := range data {
		data[i] = enqueueEntry(uint64(i*perEntry+1), perEntry)
	}
	b.SetBytes(perEntry * 1024)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data[i%entries]}
		if err := logs.StoreLogs([]*raft.Log{l}); err != nil {
			b.Fatal(err)
		}
	}
}

// Reading an entry back joins its stored bodies into it (a replay or a follower's catch-up).
func BenchmarkBodyLogGetLog(b *testing.B) {
	db, err := Open(b.TempDir(), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	logs, _, err := db.QueueLog("q", groupBodies)
	if err != nil {
		b.Fatal(err)
	}
	const entries, perEntry = 64, 32
	for i := range entries {
		l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: enqueueEntry(uint64(i*perEntry+1), perEntry)}
		if err := logs.StoreLogs([]*raft.Log{l}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(perEntry * 1024)
	b.ReportAllocs()
	var l raft.Log
	for i := 0; b.Loop(); i++ {
		if err := logs.GetLog(uint64(i%entries+1), &l); err != nil {
			b.Fatal(err)
		}
	}
}
