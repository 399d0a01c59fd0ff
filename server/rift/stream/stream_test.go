package stream

import (
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string) *Store {
	s, err := Open(Options{Dir: dir}, []Config{
		{Name: "disk", Subjects: []string{"d.>"}, Durability: Fsync},
		{Name: "mem", Subjects: []string{"m.>"}, Durability: Memory},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Concurrent fsync publishers share commits; sequences stay dense and unique, and every record is
// readable in sequence order once its Publish returned.
func TestConcurrentPublishersGetDenseSequences(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	const writers, each = 8, 50
	seen := make([]bool, writers*each+1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				seq, _, err := s.Publish("disk", "d.x", "", []byte("p"))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seq == 0 || int(seq) >= len(seen) || seen[seq] {
					t.Errorf("sequence %d repeated or out of range", seq)
				}
				seen[seq] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := s.OpenConsumer("o", "disk", "c", ConsumerConfig{AckWait: time.Hour, MaxAckPending: 1000}); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for {
		ds, err := s.Fetch("o", "disk", "c", MaxFetch)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got = append(got, d.Sequence)
		}
	}
	for i, seq := range got {
		if seq != uint64(i+1) {
			t.Fatalf("fetch order %v", got[:i+1])
		}
	}
	if len(got) != writers*each {
		t.Fatalf("fetched %d of %d", len(got), writers*each)
	}
	s.Close()
}

func TestMemoryStreamsAreNotPersisted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	s.Publish("disk", "d.x", "", nil)
	s.Publish("mem", "m.x", "", nil)
	s.Close()
	s = open(t, dir)
	defer s.Close()
	d, _ := s.Info("disk")
	m, _ := s.Info("mem")
	if d.Messages != 1 || d.LastSequence != 1 || m.Messages != 0 || m.LastSequence != 0 {
		t.Fatalf("after restart: disk %+v, mem %+v", d, m)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Name: "", Subjects: []string{"a"}},
		{Name: "x"},
		{Name: "x", Subjects: []string{"a..b"}},
		{Name: "x", Subjects: []string{"a"}, MaxMsgs: -1},
	} {
		if _, err := Open(Options{Dir: t.TempDir()}, []Config{c}); err == nil {
			t.Errorf("Open accepted %+v", c)
		}
	}
	if _, err := ParseDurability("disk"); err == nil {
		t.Error("ParseDurability accepted disk")
	}
}

// BenchmarkPublishFsyncConcurrent: 32 goroutines publishing 1 KB to an fsync stream, in process.
func BenchmarkPublishFsyncConcurrent(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()}, []Config{{Name: "disk", Subjects: []string{"d.>"}, Durability: Fsync}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 1024)
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.Publish("disk", "d.x", "", payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
