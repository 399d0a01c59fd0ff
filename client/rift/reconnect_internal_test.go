package rift

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/backoff"
)

// fakeDialer records the addresses dialled and the waits slept; it connects on call number ok
// (1-based; 0: never).
type fakeDialer struct {
	dialled []string
	slept   []time.Duration
	ok      int
	stopAt  int // sleep reports the client stopped on this sleep (1-based; 0: never)
}

func (f *fakeDialer) redialer(addrs []string, max int) redialer[string] {
	return redialer[string]{
		addrs:   addrs,
		max:     max,
		backoff: backoff.Backoff{Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Rand: func() float64 { return 0 }},
		sleep: func(d time.Duration) bool {
			f.slept = append(f.slept, d)
			return f.stopAt == 0 || len(f.slept) < f.stopAt
		},
		dial: func(addr string) (string, error) {
			f.dialled = append(f.dialled, addr)
			if len(f.dialled) == f.ok {
				return "conn-" + addr, nil
			}
			return "", fmt.Errorf("dial %s #%d refused", addr, len(f.dialled))
		},
	}
}

func TestRedialTriesTheLostAddressFirstThenTheOthers(t *testing.T) {
	f := &fakeDialer{ok: 5}
	conn, addr, attempts, ok, err := f.redialer([]string{"a", "b", "c"}, -1).run("b", errors.New("lost"))
	if !ok || err != nil || conn != "conn-c" || addr != "c" || attempts != 2 {
		t.Fatalf("run = %q %q %d %v %v, want conn-c c 2 true nil", conn, addr, attempts, ok, err)
	}
	if got, want := fmt.Sprint(f.dialled), "[b c a b c]"; got != want {
		t.Errorf("dialled %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(f.slept), "[5ms 10ms]"; got != want {
		t.Errorf("slept %s, want %s", got, want)
	}
}

func TestRedialGivesUpWithAReconnectError(t *testing.T) {
	f := &fakeDialer{}
	lost := errors.New("lost")
	_, _, _, ok, err := f.redialer([]string{"a", "b"}, 4).run("a", lost)
	if ok {
		t.Fatal("connected with a dialer that always fails")
	}
	var re *ReconnectError
	if !errors.As(err, &re) || re.Attempts != 4 || re.Cause != nil {
		t.Fatalf("err = %#v, want a *ReconnectError after 4 attempts without Cause", err)
	}
	if !errors.Is(err, ErrDisconnected) || re.Last == nil || re.Last.Error() != "dial b #8 refused" {
		t.Errorf("err = %v: want errors.Is ErrDisconnected and Last the 8th dial's failure", err)
	}
	if got, want := fmt.Sprint(f.slept), "[5ms 10ms 20ms 20ms]"; got != want {
		t.Errorf("slept %s, want %s (capped at 40ms, halved by rand 0)", got, want)
	}
}

func TestRedialStopsWhenTheClientCloses(t *testing.T) {
	f := &fakeDialer{stopAt: 3}
	_, _, _, ok, err := f.redialer([]string{"a"}, -1).run("a", nil)
	if ok || err != nil || len(f.dialled) != 2 {
		t.Fatalf("run = ok %v err %v after %d dials; want it to stop quietly after 2", ok, err, len(f.dialled))
	}
}

// disconnectedClient is a client between connections, as lost leaves it.
func disconnectedClient() *Client {
	c := &Client{maxReconnects: -1, up: make(chan struct{}), gaveUp: make(chan struct{}), subs: map[*Subscription]struct{}{},
		attempts: 3, lastErr: errors.New("connection refused")}
	c.life, c.stop = context.WithCancel(context.Background())
	return c
}

func TestCallsWhileDisconnectedFailWithAReconnectErrorWhenTheirContextEnds(t *testing.T) {
	c := disconnectedClient()
	defer c.stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.connection(ctx)
	var re *ReconnectError
	if !errors.As(err, &re) || !errors.Is(err, ErrDisconnected) || !errors.Is(err, context.Canceled) {
		t.Fatalf("connection = %v, want a *ReconnectError matching ErrDisconnected and context.Canceled", err)
	}
	if re.Attempts != 3 || re.Last == nil || re.Last.Error() != "connection refused" {
		t.Errorf("ReconnectError = %+v, want the outage's attempts and last failure", re)
	}
	// The same through an operation: nothing is sent, and the error is the typed one.
	if _, err := c.StreamPublish(ctx, "events", "events.x", "", nil); !errors.Is(err, ErrDisconnected) {
		t.Errorf("StreamPublish while disconnected = %v, want ErrDisconnected", err)
	}
}

func TestWaitingCallsEndWhenReconnectionGivesUpOrTheClientCloses(t *testing.T) {
	c := disconnectedClient()
	done := make(chan error, 1)
	go func() {
		_, err := c.connection(context.Background())
		done <- err
	}()
	gaveUp := &ReconnectError{Attempts: 5, Last: errors.New("refused")}
	c.mu.Lock()
	c.err = gaveUp
	close(c.up)
	close(c.gaveUp)
	c.mu.Unlock()
	if err := <-done; err != gaveUp {
		t.Fatalf("waiting call after giving up = %v, want the client's *ReconnectError", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.connection(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("call after Close = %v, want ErrClosed", err)
	}

	c = disconnectedClient()
	go func() {
		_, err := c.connection(context.Background())
		done <- err
	}()
	c.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("waiting call after Close = %v, want ErrClosed", err)
	}
}

func TestASubscriptionWaitsForItsResubscription(t *testing.T) {
	c := disconnectedClient()
	defer c.stop()
	newSub := func() *Subscription {
		return &Subscription{c: c, next: make(chan subResult, 1), done: make(chan struct{}), turn: make(chan struct{}, 1)}
	}
	sub := newSub()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err, terminal := sub.awaitStream(ctx)
	if terminal || !errors.Is(err, ErrDisconnected) || !errors.Is(err, context.Canceled) {
		t.Fatalf("awaitStream with an ended context = %v (terminal %v), want a transient *ReconnectError", err, terminal)
	}
	refused := &Error{Code: 1, Message: "no"}
	sub.next <- subResult{err: refused}
	for range 2 {
		if _, err := sub.Recv(context.Background()); err != refused {
			t.Fatalf("Recv after a refused resubscription = %v, want the refusal, every time", err)
		}
	}

	sub = newSub()
	sub.Close()
	if _, err := sub.Recv(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Recv of a closed subscription = %v, want ErrClosed", err)
	}
}
