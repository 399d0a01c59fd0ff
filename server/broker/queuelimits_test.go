package broker

import (
	"strings"
	"testing"
	"time"
)

// Retention is driven by the queue's own timer on the broker's clock: a timer is armed for the
// moment the oldest message's retention passes, and the message moves to the dead-letter queue
// then, not before.
func TestRetentionIsDrivenByTheQueuesTimer(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, -1)
	if out := s.do("create q"); strings.Contains(out, "err") {
		t.Fatal(out)
	}
	if e := b.SetConfig("queue.q.retention_ms", "60000"); e != nil {
		t.Fatal(e)
	}
	if out := s.do("enqueue q a"); strings.Contains(out, "err") {
		t.Fatal(out)
	}
	s.settled()
	if at, ok := s.armedAt(time.UnixMilli(1_000_000 + 60_000)); !ok {
		t.Fatalf("no timer armed for the retention: next at %v", at)
	}
	s.advanceClock(59 * time.Second)
	if out := s.do("stats q.dlq"); !strings.HasPrefix(out, "depth=0") {
		t.Fatalf("before the retention passed: q.dlq %s", out)
	}
	s.advanceClock(time.Second)
	if out := s.do("stats q.dlq"); !strings.HasPrefix(out, "depth=1") {
		t.Fatalf("once the retention passed: q.dlq %s, want the message", out)
	}
	if out := s.do("stats q"); !strings.HasPrefix(out, "depth=0") {
		t.Fatalf("once the retention passed: q %s, want it empty", out)
	}
}

// A hibernated queue wakes when its oldest message's retention passes, including a retention set
// while it slept (defaults.retention_ms wakes every queue once to arm it).
func TestRetentionWakesAHibernatedQueue(t *testing.T) {
	s, b := asleepWithOne(t)
	if e := b.SetConfig("defaults.retention_ms", "5400000"); e != nil {
		t.Fatal(e)
	}
	s.settled()
	s.idleUntilAsleep(t, b)
	if at, ok := s.armedAt(time.UnixMilli(1_000_000 + 5_400_000)); !ok { // the message came at the start
		t.Fatalf("no timer armed for the retention while asleep: next at %v", at)
	}
	if out := s.do("stats q.dlq"); !strings.HasPrefix(out, "depth=0") {
		t.Fatalf("before the retention passed: q.dlq %s", out)
	}
	s.advanceClock(90 * time.Minute)
	s.settled()
	if out := s.do("stats q.dlq"); !strings.HasPrefix(out, "depth=1") {
		t.Fatalf("once the retention passed: q.dlq %s, want the message", out)
	}
}

// armedAt reports whether a running timer is set for at, and the earliest one set.
func (s *script) armedAt(at time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	found := false
	for _, t := range s.timers {
		if !t.on {
			continue
		}
		found = found || t.at.Equal(at)
		if first.IsZero() || t.at.Before(first) {
			first = t.at
		}
	}
	return first, found
}
