package broker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A queue whose delayed message falls due while nobody consumes it must not keep its timer
// firing: the round promotes the message, and the next wake-up is later than now (or none).
// Before the fix the due message stayed the next wake-up, and the actor re-armed its timer for
// "now" round after round, spinning a core per such queue.
func TestDueDelayedMessageWithoutConsumersArmsNoImmediateWakeup(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, 0)
	if e := b.CreateQueue(QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	done := make(chan *Error, 1)
	b.Enqueue([]Message{{Queue: "q", Payload: []byte("x"), DelayMs: 1000}}, func(_ []EnqueueResult, e *Error) { done <- e })
	if e := <-done; e != nil {
		t.Fatal(e)
	}
	s.settled()
	s.advanceClock(2 * time.Second)
	s.noTimerDue(t, "the actor wakes at once, again and again")
}

// While the store refuses writes a round skips lease expiry (it would need a write), so a lease
// that ran out stays the next wake-up. The actor must not re-arm its timer for "now" round after
// round meanwhile (before the fix it spun a core for as long as the disk failed); it looks again
// at most once a second, and at once when the store recovers.
func TestExpiredLeaseWhileWritesFailArmsNoImmediateWakeup(t *testing.T) {
	s := newScript(t)
	b := s.openIdle(t, -1)
	for _, line := range []string{"create q visibility=1000", "enqueue q a", "consume q c1 credit=1", "deliveries n=1"} {
		if out := s.do(line); strings.Contains(out, "err") {
			t.Fatalf("%s: %s", line, out)
		}
	}
	b.Unsubscribe("q", "c1")
	s.mem.FailWrites(errors.New("disk full"))
	s.settled()
	s.advanceClock(2 * time.Second) // the lease has run out
	s.noTimerDue(t, "writes fail, and the actor spins")
	s.mem.ResumeWrites()
	if out := s.do("advance 1s"); out != "ok" {
		t.Fatal(out)
	}
	if out := s.do("stats q"); !strings.HasPrefix(out, "depth=1 in_flight=0") {
		t.Fatalf("after the store recovered: %s, want the lease expired", out)
	}
}

// A hibernated queue cannot reopen while the store refuses writes: a Subscribe then answers
// StorageError at once instead of waiting for the disk, stats still answer, and once writes
// succeed again the Subscribe wakes it.
func TestSleepingQueueWhileWritesFail(t *testing.T) {
	s, b := asleepWithOne(t)
	s.mem.FailWrites(errors.New("disk full"))
	k := &scriptSink{s: s, wake: make(chan struct{}, 1)}
	if _, e := b.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c", ManagedCredit: true}, k); e == nil || e.Code != CodeStorageError {
		t.Fatalf("Subscribe to a sleeping queue while writes fail: %v, want StorageError", e)
	}
	if st, e := b.GetStats("q"); e != nil || st.Depth != 1 {
		t.Fatalf("stats while writes fail: %+v %v", st, e)
	}
	s.mem.ResumeWrites()
	if _, e := b.Subscribe(SubscribeRequest{Queue: "q", ConsumerID: "c", ManagedCredit: true}, k); e != nil {
		t.Fatalf("Subscribe after the store recovered: %v", e)
	}
	<-k.wake
}

// A request that wakes a sleeping queue just as the store starts refusing writes (before the
// wake looks at the store, or while its Raft group opens) is answered StorageError: the wake
// does not keep it until the disk recovers.
func TestWakeAsWritesStartFailingAnswersStorageError(t *testing.T) {
	s, b := asleepWithOne(t)
	s.mem.DelayAppends(100 * time.Millisecond) // the wake's group opening is in flight a while
	answered := make(chan Code, 1)
	b.Enqueue([]Message{{Queue: "q", Payload: []byte("b")}}, func(res []EnqueueResult, e *Error) {
		if e != nil {
			answered <- e.Code
			return
		}
		answered <- res[0].Code
	})
	time.Sleep(20 * time.Millisecond) // lets the request reach the waking queue; either order passes below
	s.mem.FailWrites(errors.New("disk failed"))
	s.mem.DelayAppends(0)
	select {
	case code := <-answered:
		if code != CodeStorageError {
			t.Fatalf("Enqueue that woke the queue as writes started failing: %v, want StorageError", code)
		}
	case <-time.After(time.Minute):
		t.Fatal("Enqueue that woke the queue as writes started failing: unanswered after a minute")
	}
	s.mem.ResumeWrites()
}

// A queue holding more messages than a quick wake can rebuild stays awake when idle: the request
// that would wake it must not wait seconds for its log to be replayed. A smaller queue sleeps.
func TestLargeBacklogStaysAwake(t *testing.T) {
	old := maxSleepMessages
	maxSleepMessages = 2
	t.Cleanup(func() { maxSleepMessages = old })
	for _, tc := range []struct {
		messages int
		sleeps   bool
	}{{2, true}, {3, false}} {
		s := newScript(t)
		b := s.openIdle(t, time.Second)
		lines := []string{"create q"}
		for i := range tc.messages {
			lines = append(lines, fmt.Sprintf("enqueue q m%d", i))
		}
		for _, line := range lines {
			if out := s.do(line); strings.Contains(out, "err") {
				t.Fatalf("%s: %s", line, out)
			}
		}
		s.settled()
		s.mu.Lock()
		s.now = s.now.Add(2 * time.Second) // idle for longer than IdleTimeout
		var fired []*fakeTimer
		for _, tm := range s.timers {
			if tm.on && !s.now.Before(tm.at) {
				fired = append(fired, tm)
			}
			tm.fireBy(s.now)
		}
		now := s.now
		s.mu.Unlock()
		// The actor either hibernates (its timer stays off) or looks again after another idle
		// time (its timer re-armed for later).
		rearmed := func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, tm := range fired {
				if len(tm.c) > 0 || !tm.on || !tm.at.After(now) {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(10 * time.Second); b.AwakeQueues() != 0 && !rearmed(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d messages: the idle queue neither hibernated nor re-armed its timer", tc.messages)
			}
		}
		if tc.sleeps && b.AwakeQueues() != 0 {
			// A queue may look again once more before it sleeps (its last entry applied after
			// the advance): let the fake clock run on until it does.
			s.idleUntilAsleep(t, b)
		}
		if slept := b.AwakeQueues() == 0; slept != tc.sleeps {
			t.Errorf("%d messages with at most %d for a sleep: hibernated %v, want %v", tc.messages, maxSleepMessages, slept, tc.sleeps)
		}
		if st, e := b.GetStats("q"); e != nil || st.Depth != uint64(tc.messages) {
			t.Errorf("%d messages: stats %+v %v", tc.messages, st, e)
		}
		b.Close()
	}
}

// openIdle opens the script's broker on its in-memory store, fake clock and timers, with the given
// queue idle timeout (0: the default), closed when the test ends.
func (s *script) openIdle(t *testing.T, idle time.Duration) *Broker {
	t.Helper()
	b, err := Open(Options{Store: s.mem, Sync: true, Clock: s.clock, NewTimer: s.newTimer, IdleTimeout: idle,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.b = b
	t.Cleanup(func() { b.Close() })
	return b
}

// noTimerDue checks that no timer has fired or is due while the clock stands still, as it does
// for a settled broker. An actor that re-arms its timer for "now" after every round shows a fired
// timer (or one due) at almost every one of the 200 looks; why says what that would mean.
func (s *script) noTimerDue(t *testing.T, why string) {
	t.Helper()
	for range 200 {
		s.mu.Lock()
		for i, tm := range s.timers {
			if len(tm.c) > 0 || tm.on && !tm.at.After(s.now) {
				s.mu.Unlock()
				t.Fatalf("timer %d fires at %v with the clock at %v: %s", i, tm.at, s.now, why)
			}
		}
		s.mu.Unlock()
		time.Sleep(100 * time.Microsecond)
	}
}

// asleepWithOne opens a broker whose queues sleep after a second idle, creates q with one
// message, and returns once q sleeps.
func asleepWithOne(t *testing.T) (*script, *Broker) {
	t.Helper()
	s := newScript(t)
	b := s.openIdle(t, time.Second)
	for _, line := range []string{"create q", "enqueue q a"} {
		if out := s.do(line); strings.Contains(out, "err") {
			t.Fatalf("%s: %s", line, out)
		}
	}
	s.settled()
	s.idleUntilAsleep(t, b)
	return s, b
}

// idleUntilAsleep lets the fake clock run past IdleTimeout (a second) until every queue sleeps:
// each turn moves it on 2 s and fires the due timers, as a queue may arm its idle timer again
// after a turn (work that finished late, settled's calls); a minute without sleep fails.
func (s *script) idleUntilAsleep(t *testing.T, b *Broker) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); b.AwakeQueues() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the idle queue does not hibernate")
		}
		s.mu.Lock()
		s.now = s.now.Add(2 * time.Second)
		for _, tm := range s.timers {
			tm.fireBy(s.now)
		}
		s.mu.Unlock()
	}
}
