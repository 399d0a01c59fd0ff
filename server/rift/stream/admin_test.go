package stream

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

var consumerCfg = ConsumerConfig{AckWait: time.Hour, MaxAckPending: 100}

func mustOpen(t *testing.T, o Options, cfgs ...Config) *Store {
	t.Helper()
	s, err := Open(o, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustCreate(t *testing.T, s *Store, c Config) Info {
	t.Helper()
	in, created, err := s.Create(c)
	if err != nil || !created {
		t.Fatalf("Create(%s): created %v, %v", c.Name, created, err)
	}
	return in
}

func publishN(t *testing.T, s *Store, name, subj string, n int) {
	t.Helper()
	for i := range n {
		if _, _, err := s.Publish(name, subj, "", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// A stream created at run time is there after a restart with its records, its counters and its
// consumers' progress; a memory stream comes back empty; Names lists them after the configured
// ones, in name order, before and after the restart.
func TestCreatedStreamsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir}
	conf := Config{Name: "conf", Subjects: []string{"conf.>"}}
	s := mustOpen(t, o, conf)
	in := mustCreate(t, s, Config{Name: "orders", Subjects: []string{"orders.>", "refunds.*"}, Durability: OS,
		MaxMsgs: 100, MaxBytes: 1 << 20, MaxAge: time.Hour, MaxPayload: 512})
	mustCreate(t, s, Config{Name: "cache", Subjects: []string{"cache.>"}, Durability: Memory})
	if in.Source != "runtime" || in.Durability != "os" || in.MaxAgeMs != 3_600_000 || in.Messages != 0 {
		t.Errorf("Create returned %+v", in)
	}
	publishN(t, s, "orders", "orders.new", 5)
	publishN(t, s, "cache", "cache.x", 3)
	if err := s.OpenConsumer("ann", "orders", "billing", consumerCfg); err != nil {
		t.Fatal(err)
	}
	if ds, err := s.Fetch("ann", "orders", "billing", 2); err != nil || len(ds) != 2 {
		t.Fatalf("fetch: %v, %v", ds, err)
	}
	if err := s.Ack("ann", "orders", "billing", 1); err != nil {
		t.Fatal(err)
	}
	wantNames := "[conf cache orders]"
	if got := fmt.Sprint(s.Names()); got != wantNames {
		t.Errorf("names %s, want %s", got, wantNames)
	}
	s.Close()

	s = mustOpen(t, o, conf)
	defer s.Close()
	if got := fmt.Sprint(s.Names()); got != wantNames {
		t.Errorf("after the restart: names %s, want %s", got, wantNames)
	}
	in, err := s.Info("orders")
	if err != nil || in.Messages != 5 || in.LastSequence != 5 || in.Consumers != 1 || in.Source != "runtime" ||
		fmt.Sprint(in.Subjects) != "[orders.> refunds.*]" || in.MaxMsgs != 100 || in.MaxPayload != 512 {
		t.Errorf("orders after the restart: %+v, %v", in, err)
	}
	if _, _, err := s.Publish("orders", "orders.new", "", make([]byte, 513)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a payload over the stream's limit after the restart: %v", err)
	}
	// The consumer resumes: 2 is pending (redelivered once its ack wait passes), 3 is next.
	if ds, err := s.Fetch("ann", "orders", "billing", 1); err != nil || len(ds) != 1 || ds[0].Sequence != 3 {
		t.Errorf("fetch after the restart: %+v, %v", ds, err)
	}
	if in, err := s.Info("cache"); err != nil || in.Messages != 0 || in.Durability != "memory" {
		t.Errorf("memory stream after the restart: %+v, %v", in, err)
	}
}

// Deleting a stream drops its records, consumers and definition: publishing, fetching and
// acknowledging fail at once, nothing of it is left on disk, it stays gone after a restart, and a
// stream created again with its name starts empty at sequence 1.
func TestDeleteDropsAStreamsData(t *testing.T) {
	dir := t.TempDir()
	o := Options{Dir: dir}
	s := mustOpen(t, o)
	cfg := Config{Name: "orders", Subjects: []string{"orders.>"}}
	mustCreate(t, s, cfg)
	mustCreate(t, s, Config{Name: "orders.eu", Subjects: []string{"eu.>"}}) // a name extending the other's
	publishN(t, s, "orders", "orders.new", 10)
	publishN(t, s, "orders.eu", "eu.new", 2)
	if err := s.OpenConsumer("ann", "orders", "billing", consumerCfg); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fetch("ann", "orders", "billing", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Publish("orders", "orders.new", "", nil); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("publish after delete: %v", err)
	}
	if _, err := s.Fetch("ann", "orders", "billing", 1); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("fetch after delete: %v", err)
	}
	if err := s.Ack("ann", "orders", "billing", 1); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("ack after delete: %v", err)
	}
	if _, err := s.Info("orders"); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("info after delete: %v", err)
	}
	if err := s.Delete("orders"); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("second delete: %v", err)
	}
	if keys := keysOf(t, s.disk, "orders"); len(keys) != 0 {
		t.Errorf("left on disk: %q", keys)
	}
	if in, err := s.Info("orders.eu"); err != nil || in.Messages != 2 {
		t.Errorf("the other stream: %+v, %v", in, err)
	}
	s.Close()

	s = mustOpen(t, o)
	defer s.Close()
	if got := fmt.Sprint(s.Names()); got != "[orders.eu]" {
		t.Errorf("names after the restart: %s", got)
	}
	mustCreate(t, s, cfg)
	if seq, _, err := s.Publish("orders", "orders.new", "", nil); err != nil || seq != 1 {
		t.Errorf("first publish to the new stream: sequence %d, %v", seq, err)
	}
	if _, err := s.Fetch("ann", "orders", "billing", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("the old consumer on the new stream: %v", err)
	}
}

// keysOf returns the keys of db that belong to stream name (any kind).
func keysOf(t *testing.T, db *pebble.DB, name string) []string {
	t.Helper()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[1:]
		if bytes.Equal(k, []byte(name)) || bytes.HasPrefix(k, append([]byte(name), 0)) {
			out = append(out, string(it.Key()))
		}
	}
	return out
}

// Create is idempotent for the same definition, refuses another one, bad definitions and more
// streams than MaxStreams; configured streams cannot be deleted.
func TestCreateAndDeleteRefuse(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), MaxStreams: 3}, Config{Name: "conf", Subjects: []string{"conf.>"}})
	defer s.Close()
	cfg := Config{Name: "a", Subjects: []string{"a.>"}, MaxMsgs: 10}
	mustCreate(t, s, cfg)
	publishN(t, s, "a", "a.x", 2)
	if in, created, err := s.Create(cfg); err != nil || created || in.Messages != 2 {
		t.Errorf("same definition again: %+v, created %v, %v", in, created, err)
	}
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{Name: "a", Subjects: []string{"a.>"}, MaxMsgs: 11}, ErrExists},
		{Config{Name: "conf", Subjects: []string{"conf.>"}, MaxMsgs: 1}, ErrExists},
		{Config{Name: "bad name", Subjects: []string{"x"}}, ErrInvalid},
		{Config{Name: "b"}, ErrInvalid},
		{Config{Name: "b", Subjects: []string{"b.>.x"}}, ErrInvalid},
		{Config{Name: "b", Subjects: []string{"b"}, MaxMsgs: -1}, ErrInvalid},
		{Config{Name: "b", Subjects: []string{"b"}, MaxPayload: MaxPayloadLimit + 1}, ErrInvalid},
		{Config{Name: "b", Subjects: []string{"b"}, Durability: Memory + 1}, ErrInvalid},
	} {
		if _, _, err := s.Create(tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("Create(%+v): %v, want %v", tc.cfg, err, tc.want)
		}
	}
	mustCreate(t, s, Config{Name: "b", Subjects: []string{"b"}})
	if _, _, err := s.Create(Config{Name: "c", Subjects: []string{"c"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a fourth stream with MaxStreams 3: %v", err)
	}
	if err := s.Delete("conf"); !errors.Is(err, ErrInvalid) {
		t.Errorf("deleting a configured stream: %v", err)
	}
	if _, err := s.Info("conf"); err != nil {
		t.Errorf("the configured stream after a refused delete: %v", err)
	}
}

// A durable stream needs a directory; without one a memory stream can still be created.
func TestCreateWithoutADirectory(t *testing.T) {
	s := mustOpen(t, Options{})
	defer s.Close()
	if _, _, err := s.Create(Config{Name: "d", Subjects: []string{"d"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a durable stream without a directory: %v", err)
	}
	mustCreate(t, s, Config{Name: "m", Subjects: []string{"m"}, Durability: Memory})
}

// A stream created at run time that the configuration defines later becomes the configured one:
// its records stay, its definition goes (removing it from the configuration later removes it).
func TestTheConfigurationWinsOverADefinition(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	mustCreate(t, s, Config{Name: "x", Subjects: []string{"x.>"}})
	publishN(t, s, "x", "x.a", 3)
	s.Close()
	s = mustOpen(t, Options{Dir: dir}, Config{Name: "x", Subjects: []string{"x.>", "y.>"}})
	if in, err := s.Info("x"); err != nil || in.Source != "config" || in.Messages != 3 || len(in.Subjects) != 2 {
		t.Errorf("x with the configuration: %+v, %v", in, err)
	}
	s.Close()
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if names := s.Names(); len(names) != 0 {
		t.Errorf("streams once the configuration dropped x: %v", names)
	}
}

// Deleting a stream while publishers, a consumer and the retention sweep use it leaves nothing
// of it behind (run with -race): every write either finished before the deletion or was refused.
func TestDeleteWhileInUse(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), SweepInterval: time.Millisecond})
	defer s.Close()
	for round := range 200 {
		mustCreate(t, s, Config{Name: "busy", Subjects: []string{"busy.>"}, MaxMsgs: 50, Durability: OS})
		if err := s.OpenConsumer("ann", "busy", "c", consumerCfg); err != nil {
			t.Fatal(err)
		}
		publishN(t, s, "busy", "busy.x", 5) // so that deletes race with work in progress
		var wg sync.WaitGroup
		stop := make(chan struct{})
		worker := func(op func() error) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := op(); errors.Is(err, ErrUnknownStream) || errors.Is(err, ErrNotFound) {
					return
				} else if err != nil {
					t.Errorf("round %d: %v", round, err)
					return
				}
			}
		}
		wg.Add(5)
		for range 4 {
			go worker(func() error { _, _, err := s.Publish("busy", "busy.x", "", []byte("p")); return err })
		}
		go worker(func() error {
			ds, err := s.Fetch("ann", "busy", "c", 10)
			for _, d := range ds {
				if err == nil {
					err = s.Ack("ann", "busy", "c", d.Sequence)
				}
			}
			return err
		})
		err := s.Delete("busy")
		close(stop)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if keys := keysOf(t, s.disk, "busy"); len(keys) != 0 {
			t.Fatalf("round %d: %d keys left, such as %q", round, len(keys), keys[0])
		}
	}
}

// BenchmarkCreateDelete creates a stream, stores 1,000 small records in it (durability os) and
// deletes it: the administration's cost next to the records'.
func BenchmarkCreateDelete(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var create, del time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, _, err := s.Create(Config{Name: "b", Subjects: []string{"b.>"}, Durability: OS}); err != nil {
			b.Fatal(err)
		}
		create += time.Since(t0)
		for range 1000 {
			if _, _, err := s.Publish("b", "b.x", "", []byte("payload")); err != nil {
				b.Fatal(err)
			}
		}
		t0 = time.Now()
		if err := s.Delete("b"); err != nil {
			b.Fatal(err)
		}
		del += time.Since(t0)
	}
	b.ReportMetric(float64(create.Microseconds())/float64(b.N), "create-µs/op")
	b.ReportMetric(float64(del.Microseconds())/float64(b.N), "delete-µs/op")
}
