package storage

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// ReadBodies finds exactly the stored bodies among any ascending IDs — runs of neighbouring
// keys, gaps, deleted bodies, IDs before the first and after the last key — whether the bodies
// are still in the memtable or flushed to tables and blob files, as the storage twin does.
func TestReadBodiesFindsExactlyTheStoredBodies(t *testing.T) {
	db, _ := openTemp(t)
	t.Cleanup(func() { db.Close() })
	n := 0
	rapid.Check(t, func(t *rapid.T) {
		n++
		queue := fmt.Sprintf("q%d", n)
		mem := NewMem()
		count := rapid.IntRange(1, 60).Draw(t, "stored")
		var ids []ID
		var payloads []string
		for i := range count {
			ids = append(ids, ID{0, byte(2*i + 2)}) // odd second bytes are never stored
			payloads = append(payloads, fmt.Sprintf("body %d", i))
		}
		for _, st := range []Store{db, mem} {
			storeEnqueue(t, st, queue, 1, ids, payloads...)
			storeEnqueue(t, st, queue+"x", 1, []ID{{0, 1}}, "a neighbouring group's") // sorts after queue
		}
		deleted := rapid.SliceOfDistinct(rapid.SampledFrom(ids), func(id ID) ID { return id }).Draw(t, "deleted")
		for _, st := range []Store{db, mem} {
			b := st.NewBatch(queue)
			for _, id := range deleted {
				b.DeleteBody(id)
			}
			if err := b.Commit(2); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		if rapid.Bool().Draw(t, "flush") {
			if err := db.p.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		var want []ID
		for i := range 2*count + 4 {
			if rapid.IntRange(0, 3).Draw(t, fmt.Sprintf("ask %d", i)) > 0 {
				want = append(want, ID{0, byte(i)})
			}
		}
		slices.SortFunc(want, func(x, y ID) int { return slices.Compare(x[:], y[:]) })
		read := func(st Store) (got []string) {
			err := st.ReadBodiesLater(queue, want)(func(i int, h map[string]string, p []byte) {
				got = append(got, fmt.Sprintf("%x=%s/%v", want[i], p, h))
			})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got, model := read(db), read(mem); !cmp.Equal(got, model) {
			t.Fatalf("pebble read %v, the twin %v", got, model)
		}
	})
}

// A view taken by ReadBodiesLater reads the bodies as they were when it was taken, on another
// goroutine, however they were deleted since; a read after the deletion does not see them.
func TestReadBodiesLaterReadsTheBodiesAsTheyWere(t *testing.T) {
	db, _ := openTemp(t)
	t.Cleanup(func() { db.Close() })
	for name, st := range map[string]Store{"pebble": db, "mem": NewMem()} {
		t.Run(name, func(t *testing.T) {
			ids := []ID{{1}, {2}, {3}}
			storeEnqueue(t, st, "q", 1, ids, "a", "b", "c")
			read := st.ReadBodiesLater("q", ids)
			b := st.NewBatch("q")
			b.DeleteBody(ids[0])
			b.DeleteBody(ids[2])
			if err := b.Commit(2); err != nil {
				t.Fatal(err)
			}
			b.Close()
			collect := func(read func(fn func(int, map[string]string, []byte)) error) (got []string) {
				done := make(chan error)
				go func() {
					done <- read(func(i int, _ map[string]string, p []byte) { got = append(got, fmt.Sprint(i, string(p))) })
				}()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := collect(read); !cmp.Equal(got, []string{"0a", "1b", "2c"}) {
				t.Fatalf("the view read %v", got)
			}
			if got := collect(st.ReadBodiesLater("q", ids)); !cmp.Equal(got, []string{"1b"}) {
				t.Fatalf("after the deletion read %v", got)
			}
		})
	}
}
