package raftgroup

import (
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/raftstore"
)

// discardFSM counts the commands applied to it.
type discardFSM struct{ n atomic.Int64 }

func (f *discardFSM) Apply(*raft.Log) any                 { f.n.Add(1); return nil }
func (f *discardFSM) Snapshot() (raft.FSMSnapshot, error) { return emptySnapshot{}, nil }
func (f *discardFSM) Restore(io.ReadCloser) error         { return nil }

// BenchmarkWake opens a group whose log holds 100,000 entries of 128 bytes past its start, on the
// real store (Pebble), and waits until it leads with every entry applied: the wake of a
// hibernated queue. "verify+open" adds the full read of the log that Open did before raft's own
// restore (Verify), to compare side by side with "open" as it is now.
func BenchmarkWake(b *testing.B) {
	const entries = 100_000
	db, err := pebble.Open(b.TempDir(), &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	store, err := raftstore.New(raftstore.Pebble(db), []byte("r/q\x00"), raftstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{Store: store, Snapshots: raft.NewInmemSnapshotStore(), Logger: hclog.NewNullLogger()}
	g, err := Open(cfg, &discardFSM{})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Lead(time.Minute); err != nil {
		b.Fatal(err)
	}
	g.Shutdown()
	last, _ := store.LastIndex()
	var term raft.Log
	if err := store.GetLog(last, &term); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 128)
	for next := last + 1; next <= last+entries; {
		batch := make([]*raft.Log, 0, 1000)
		for ; len(batch) < cap(batch) && next <= last+entries; next++ {
			batch = append(batch, &raft.Log{Index: next, Term: term.Term, Type: raft.LogCommand, Data: data})
		}
		if err := store.StoreLogs(batch); err != nil {
			b.Fatal(err)
		}
	}
	for _, verify := range []bool{true, false} {
		name := "open"
		if verify {
			name = "verify+open"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if verify {
					if err := Verify(store); err != nil {
						b.Fatal(err)
					}
				}
				fsm := &discardFSM{}
				g, err := Open(cfg, fsm)
				if err != nil {
					b.Fatal(err)
				}
				if err := g.Lead(time.Minute); err != nil {
					b.Fatal(err)
				}
				g.Shutdown()
				if n := fsm.n.Load(); n < entries {
					b.Fatalf("applied %d of %d entries", n, entries)
				}
			}
		})
	}
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
