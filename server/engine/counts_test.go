package engine

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// TopKeys picks what sorting Stats' Keys by ready messages (most first, ties by key) and keeping
// the first n with any gives, and Counts is Stats without the keys; some messages are leased,
// so that keys with stored but no ready messages are left out.
func TestTopKeysAndCountsAgreeWithStats(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		q, err := NewQueue("q", DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		var msgs []Message
		for i := range rapid.IntRange(0, 200).Draw(t, "messages") {
			msgs = append(msgs, Message{ID: MsgID{0: byte(i >> 8), 1: byte(i), 15: 1}, Weight: 1,
				FairnessKey: fmt.Sprint("k", rapid.IntRange(0, 30).Draw(t, "key"))})
		}
		if err := q.ApplyEnqueue(Enqueue{At: 1, Msgs: msgs}); err != nil {
			t.Fatal(err)
		}
		_ = q.Subscribe("c", uint32(rapid.IntRange(0, 100).Draw(t, "leased")))
		q.Dispatch(1, 1000, nil)
		n := rapid.IntRange(0, 12).Draw(t, "n")
		s := q.Stats()
		want := slices.Clone(s.Keys)
		slices.SortStableFunc(want, func(a, b KeyStats) int {
			if c := cmp.Compare(b.Pending, a.Pending); c != 0 {
				return c
			}
			return cmp.Compare(a.Key, b.Key)
		})
		want = slices.DeleteFunc(want, func(k KeyStats) bool { return k.Pending == 0 })
		want = want[:min(n, len(want))]
		if got := q.TopKeys(n); !gocmp.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Fatalf("TopKeys(%d) = %v, want %v", n, got, want)
		}
		s.Keys = nil
		if got := q.Counts(); !gocmp.Equal(got, s) {
			t.Fatalf("Counts() = %+v, Stats without keys %+v", got, s)
		}
	})
}
