package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// applyAll applies commands from..to-1 (8-byte big-endian numbers) and waits for every future.
func applyAll(t *testing.T, r *raft.Raft, from, to uint64) {
	t.Helper()
	futures := make([]raft.ApplyFuture, 0, to-from)
	for i := from; i < to; i++ {
		futures = append(futures, r.Apply(binary.BigEndian.AppendUint64(nil, i), 5*time.Second))
	}
	for i, f := range futures {
		if err := f.Error(); err != nil {
			t.Fatalf("apply %d: %v", from+uint64(i), err)
		}
	}
}

func checkSeen(t *testing.T, fsm *countingFSM, n uint64) {
	t.Helper()
	seen, _ := fsm.state()
	if uint64(len(seen)) != n {
		t.Fatalf("FSM saw %d commands, want %d", len(seen), n)
	}
	for i, v := range seen {
		if v != uint64(i) {
			t.Fatalf("FSM saw %d at position %d", v, i)
		}
	}
}

// TestRaftRestartReplaysLog runs a real single-node raft on a Store, restarts it on a reopened
// database and checks that the FSM sees every command again, in order: with no snapshot all of
// them from the log; with a snapshot the ones before it from the snapshot and only the rest
// from the log.
func TestRaftRestartReplaysLog(t *testing.T) {
	const n = 1000
	for _, tc := range []struct {
		name     string
		snapshot uint64 // take a user snapshot after this many commands; 0 for none
	}{{"log only", 0}, {"snapshot and log", 600}} {
		t.Run(tc.name, func(t *testing.T) {
			dir, snapDir := t.TempDir(), t.TempDir()
			prefix := "r/orders\x00"
			conf := fastConfig("n1")
			conf.BatchApplyCh = true         // let Apply calls from one goroutine batch into one StoreLogs
			conf.SnapshotThreshold = 1 << 40 // only the user snapshot below
			conf.TrailingLogs = 100

			db := openDB(t, dir)
			snaps, err := raft.NewFileSnapshotStore(snapDir, 1, io.Discard)
			must(t, err)
			nd := startNode(t, conf, newStore(t, db, prefix), snaps)
			if tc.snapshot > 0 {
				applyAll(t, nd.raft, 0, tc.snapshot)
				must(t, nd.raft.Snapshot().Error())
				applyAll(t, nd.raft, tc.snapshot, n)
			} else {
				applyAll(t, nd.raft, 0, n)
			}
			checkSeen(t, nd.fsm, n)
			nd.stop(t)
			closeDB(t, db)

			db = openDB(t, dir)
			s := newStore(t, db, prefix)
			first, _ := s.FirstIndex()
			last, _ := s.LastIndex()
			t.Logf("after restart the log holds %d..%d", first, last)
			if tc.snapshot > 0 && first <= 1 {
				t.Fatalf("the snapshot did not compact the log (first index %d)", first)
			}
			start := time.Now()
			snaps, err = raft.NewFileSnapshotStore(snapDir, 1, io.Discard)
			must(t, err)
			nd = startNode(t, conf, s, snaps)
			elected := time.Since(start)
			must(t, nd.raft.Barrier(5*time.Second).Error())
			t.Logf("leader %v after NewRaft, every entry applied %v after", elected, time.Since(start))
			checkSeen(t, nd.fsm, n)
			if _, applies := nd.fsm.state(); uint64(applies) != n-tc.snapshot {
				t.Fatalf("FSM.Apply ran %d times after the restart, want %d", applies, n-tc.snapshot)
			}

			// The group goes on where it left off.
			applyAll(t, nd.raft, n, n+10)
			checkSeen(t, nd.fsm, n+10)
			nd.stop(t)
		})
	}
}

// TestRaftLeaderStoreLogsFailure shows what hashicorp/raft does when StoreLogs fails on a
// leader: the batch's futures get the store's error, the leader steps down, and a single node
// elects itself again and goes on, writing its next entries over the failed indexes; the failed
// command is never applied, whether or not the store had written it.
func TestRaftLeaderStoreLogsFailure(t *testing.T) {
	for _, afterStoring := range []bool{false, true} {
		t.Run(fmt.Sprintf("afterStoring=%v", afterStoring), func(t *testing.T) {
			db := openDB(t, t.TempDir())
			s := newStore(t, db, "g\x00")
			f := NewFaulty(s)
			nd := startNode(t, fastConfig("n1"), f, raft.NewInmemSnapshotStore())
			defer nd.stop(t)
			applyAll(t, nd.raft, 0, 5)
			termBefore := nd.raft.CurrentTerm()
			failedAt := nd.raft.LastIndex() + 1

			if afterStoring {
				f.FailNextAfterStoring(1, nil)
			} else {
				f.FailNext(1, nil)
			}
			err := nd.raft.Apply(binary.BigEndian.AppendUint64(nil, 999), time.Second).Error()
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("the failed apply returned %v, want the store's error", err)
			}
			// raft answers the futures before it steps down (raft.go dispatchLogs), so wait for
			// the new term rather than for a leader.
			deadline := time.Now().Add(5 * time.Second)
			for nd.raft.CurrentTerm() <= termBefore {
				if time.Now().After(deadline) {
					t.Fatalf("term still %d after the failure: no new election", termBefore)
				}
				time.Sleep(time.Millisecond)
			}
			waitLeader(t, nd.raft, 5*time.Second)
			applyAll(t, nd.raft, 5, 10)
			must(t, nd.raft.Barrier(time.Second).Error())
			checkSeen(t, nd.fsm, 10)
			var l raft.Log
			must(t, s.GetLog(failedAt, &l))
			if l.Type != raft.LogNoop || l.Term <= termBefore {
				t.Fatalf("index %d holds a %v of term %d, want the new leader's no-op", failedAt, l.Type, l.Term)
			}
		})
	}
}
