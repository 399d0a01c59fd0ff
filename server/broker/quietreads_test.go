package broker

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A group that only answers reads — /metrics scrapes, stats, listings, its definition, its
// fairness keys — hibernates once idle, however often it is read: here every 600 ms of a fake
// clock against an idle timeout of a second. Before, each read counted as a request and kept it
// awake for good. Once asleep, the reads are answered from its summary and it stays asleep; an
// enqueue still wakes it.
func TestReadsDoNotKeepAGroupAwake(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, time.Second)
	for _, line := range []string{"create q", "enqueue q a"} {
		if out := s.do(line); strings.Contains(out, "err") {
			t.Fatalf("%s: %s", line, out)
		}
	}
	s.settled()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(b, CollectorOptions{}))
	scrape := func() {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
		if st, e := b.GetStats("q"); e != nil || st.Depth != 1 {
			t.Fatalf("stats: %+v %v", st, e)
		}
		if l := b.ListQueues(); len(l) != 2 || l[0].Depth != 1 { // q and q.dlq
			t.Fatalf("list: %+v", l)
		}
		if _, e := b.Definition("q"); e != nil {
			t.Fatal(e)
		}
		if _, e := b.FairnessKeys("q", KeyListOptions{}); e != nil {
			t.Fatal(e)
		}
	}
	// The clock moves on without settled(), whose calls are requests.
	tick := func() {
		s.mu.Lock()
		s.now = s.now.Add(600 * time.Millisecond)
		for _, tm := range s.timers {
			tm.fireBy(s.now)
		}
		s.mu.Unlock()
	}
	for i := 0; b.AwakeQueues() != 0; i++ {
		if i == 500 { // 5 minutes of the fake clock, read every 600 ms
			t.Fatal("a queue read every 600 ms never hibernates with an idle timeout of 1 s")
		}
		tick()
		scrape()
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		tick()
		scrape()
		if n := b.AwakeQueues(); n != 0 {
			t.Fatalf("%d queues awake after reads of a sleeping queue", n)
		}
	}
	if out := s.do("enqueue q b"); strings.Contains(out, "err") {
		t.Fatal(out)
	}
	if n := b.AwakeQueues(); n != 1 {
		t.Fatalf("%d queues awake after an enqueue, want the queue woken", n)
	}
}
