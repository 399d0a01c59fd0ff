package storage

import "github.com/cockroachdb/pebble/v2"

// splitOutputs is Pebble's SpanPolicyFunc (the default policy everywhere). Its end keys make
// every flush and compaction end an output sstable where a key kind ends, so that no sstable
// holds keys of two kinds. Without it, a flush of a busy queue wrote one file from the queue's
// applied index ("a…") to its Raft log ("r…"), over every queue's bodies ("b…") between: each
// compaction of such a file into the level below rewrote every key of a standing backlog
// there, and after a fill of 1 M messages a server spent about 40% of its CPU in compactions
// under a steady lifecycle load on any queue (docs/benchmarks.md, branch lsm).
func splitOutputs(start []byte) (pebble.SpanPolicy, []byte, error) {
	if len(start) == 0 || start[0] == 0xff {
		return pebble.SpanPolicy{}, nil, nil
	}
	return pebble.SpanPolicy{}, []byte{start[0] + 1}, nil
}
