package fila

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
)

// fakeClock is a leaseClock that moves only when a test advances it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

type fakeWaiter struct {
	at       time.Time
	ch       chan time.Time // buffered: receives once
	deadline bool           // a WithDeadline context's, not a sleeper's
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) At(t time.Time) (<-chan time.Time, func() bool) { return c.at(t, false) }

func (c *fakeClock) at(t time.Time, deadline bool) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &fakeWaiter{at: t, ch: make(chan time.Time, 1), deadline: deadline}
	if !t.After(c.now) {
		w.ch <- c.now
		return w.ch, func() bool { return false }
	}
	c.waiters = append(c.waiters, w)
	return w.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.waiters, w)
		if i >= 0 {
			c.waiters = slices.Delete(c.waiters, i, i+1)
		}
		return i >= 0
	}
}

func (c *fakeClock) WithDeadline(parent context.Context, t time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	at, release := c.at(t, true)
	go func() {
		select {
		case <-at:
			cancel()
		case <-ctx.Done():
		}
		release()
	}()
	return ctx, cancel
}

// Advance moves the clock by d and wakes every waiter whose time has come.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waiters = slices.DeleteFunc(c.waiters, func(w *fakeWaiter) bool {
		if w.at.After(c.now) {
			return false
		}
		w.ch <- c.now
		return true
	})
}

// WaitSleeping returns once something sleeps on the clock (At): the lease table has done all it
// had to do at the current time and waits for a later one.
func (c *fakeClock) WaitSleeping(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(fibptest.Timeout) // a safety net against a hang
	for {
		c.mu.Lock()
		sleeping := slices.ContainsFunc(c.waiters, func(w *fakeWaiter) bool { return !w.deadline })
		c.mu.Unlock()
		if sleeping {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease table never went back to sleep")
		}
		time.Sleep(time.Millisecond)
	}
}
