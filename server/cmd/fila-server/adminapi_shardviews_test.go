package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Paging through a sharded queue's merged peek, against a naive twin: each shard a list of IDs in
// its enqueue order, peeked as a queue is (after a cursor it holds: the messages after it in its
// order; after one it does not: those with a larger ID). Whatever the shards' orders and the page
// size, every message is shown once; when each shard's order is its ID order, in ID order.
func TestMergedPeekPagesShowEveryMessageOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := 1 + rng.IntN(5)
		sorted := round%2 == 0
		shards := make([][]string, n)
		var all []string
		for i := range shards {
			for range rng.IntN(12) {
				id := fmt.Sprintf("%08x-0000-7000-80%02x-%012x", rng.Uint32(), i, rng.Uint64()&0xffffffffffff)
				shards[i] = append(shards[i], id)
				all = append(all, id)
			}
			if sorted {
				slices.Sort(shards[i])
			}
		}
		count := 1 + rng.IntN(6)
		var shown []string
		after := ""
		for asked := 0; ; asked++ {
			cursors, herr := peekCursors(after, uint32(n))
			if herr != nil {
				t.Fatalf("round %d: %v", round, herr)
			}
			pages := make([]pageJSON, n)
			for i := range shards {
				pages[i] = twinPeek(shards[i], cursors[i], count)
			}
			page := mergePages("q", pages, cursors, count)
			for _, m := range page.Messages {
				shown = append(shown, m.ID)
			}
			if page.Next == "" {
				break
			}
			if asked > len(all)+1 {
				t.Fatalf("round %d: paging does not end", round)
			}
			after = page.Next
		}
		if sorted && !slices.IsSorted(shown) {
			t.Fatalf("round %d: shards in ID order shown out of it: %v", round, shown)
		}
		slices.Sort(shown)
		slices.Sort(all)
		if !slices.Equal(shown, all) {
			t.Fatalf("round %d (%d shards, %d a page): shown %v, want each of %v once", round, n, count, shown, all)
		}
	}
}

// twinPeek is a peek of a shard holding ids in its enqueue order.
func twinPeek(ids []string, after string, count int) pageJSON {
	var page pageJSON
	found := after != "" && slices.Contains(ids, after)
	started := after == "" || !found
	for _, id := range ids {
		switch {
		case found && !started:
			started = id == after
			continue
		case !found && after != "" && id <= after:
			continue
		}
		if len(page.Messages) == count {
			page.Next = page.Messages[count-1].ID
			break
		}
		page.Messages = append(page.Messages, messageJSON{ID: id})
	}
	return page
}
