package stream

import (
	"testing"
	"time"
)

// One identity's consumers on a stream hold at most MaxOwnerPending unacknowledged deliveries
// together (each is kept in memory and on disk, and an identity may open 1,024 consumers of up to
// 65,536 pending each); acks make room again, the count survives a restart, and other identities
// have their own.
func TestPendingDeliveriesPerOwnerAreBounded(t *testing.T) {
	dir := t.TempDir()
	cfgs := []Config{{Name: "disk", Subjects: []string{"d.>"}, Durability: OS}}
	opts := Options{Dir: dir, MaxOwnerPending: 5}
	s, err := Open(opts, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, _, err := s.Publish("disk", "d.x", "", []byte("p")); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ConsumerConfig{AckWait: time.Hour, MaxAckPending: 100}
	for _, c := range [][2]string{{"o", "c1"}, {"o", "c2"}, {"p", "c1"}} {
		if err := s.OpenConsumer(c[0], "disk", c[1], cfg); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func(s *Store, owner, name string) []Delivery {
		t.Helper()
		ds, err := s.Fetch(owner, "disk", name, MaxFetch)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	first := fetch(s, "o", "c1")
	if len(first) != 5 || len(fetch(s, "o", "c2")) != 0 || len(fetch(s, "p", "c1")) != 5 {
		t.Fatal("the owner bound does not hold")
	}
	for _, d := range first[:2] {
		if err := s.Ack("o", "disk", "c1", d.Sequence); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(fetch(s, "o", "c2")); n != 2 {
		t.Fatalf("after 2 acks the owner's other consumer got %d", n)
	}
	s.Close()
	if s, err = Open(opts, cfgs); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(fetch(s, "o", "c2")); n != 0 {
		t.Fatalf("after a restart the owner, at its bound, got %d more", n)
	}
}
