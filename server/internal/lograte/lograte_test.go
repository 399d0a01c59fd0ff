package lograte

import (
	"testing"
	"time"
)

func TestOneLinePerIntervalCountingTheRest(t *testing.T) {
	now := time.Unix(1000, 0)
	l := New(time.Second, func() time.Time { return now })
	type step struct {
		advance time.Duration
		ok      bool
		held    int
	}
	for i, s := range []step{
		{0, true, 0},
		{0, false, 0},
		{999 * time.Millisecond, false, 0},
		{time.Millisecond, true, 2},
		{time.Hour, true, 0},
		{0, false, 0},
		{time.Second, true, 1},
	} {
		now = now.Add(s.advance)
		if ok, held := l.Allow(); ok != s.ok || held != s.held {
			t.Fatalf("step %d: Allow() = %v, %d; want %v, %d", i, ok, held, s.ok, s.held)
		}
	}
}
