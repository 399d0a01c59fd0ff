package storage

import (
	"bytes"
	"fmt"
	"testing"
)

// A view of a group's bodies reads them as they were when it was taken, whatever was deleted or
// written since; RestoreBodies writes bodies and the applied index. DB and Mem alike.
func TestBodyViewsAndRestores(t *testing.T) {
	db, _ := openTemp(t)
	for name, s := range map[string]interface {
		Store
		SnapshotBodies
	}{"db": db, "mem": NewMem()} {
		t.Run(name, func(t *testing.T) {
			w := s.RestoreBodies("q")
			for _, i := range []byte{0, 1, 2, 9} {
				if err := w.Put(ID{15: i}, map[string]string{"n": fmt.Sprint(i)}, []byte{i, i}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Commit(7); err != nil {
				t.Fatal(err)
			}
			if a, err := s.Applied("q"); err != nil || a != 7 {
				t.Fatalf("applied %d, %v; want 7", a, err)
			}
			other := s.RestoreBodies("q2") // another group's body is not in q's view
			if err := other.Put(ID{15: 5}, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := other.Commit(1); err != nil {
				t.Fatal(err)
			}
			v, err := s.ViewBodies("q")
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			b := s.NewBatch("q")
			b.DeleteBody(ID{15: 1})
			if err := b.Commit(8); err != nil {
				t.Fatal(err)
			}
			if _, err := s.ReadBody("q", ID{15: 1}); err != ErrNotFound {
				t.Fatalf("deleted body: %v", err)
			}
			var got []byte
			err = v.Each(func(id ID, h map[string]string, p []byte) error {
				if !bytes.Equal(p, []byte{id[15], id[15]}) || h["n"] != fmt.Sprint(id[15]) {
					t.Errorf("body %d: %v %q", id[15], h, p)
				}
				got = append(got, id[15])
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, []byte{0, 1, 2, 9}) {
				t.Fatalf("the view has bodies %v, want 0 1 2 9", got)
			}
		})
	}
}
