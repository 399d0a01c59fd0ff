package fila_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// dialFailures is a slog.Handler that passes on each "dial failed" record the SDK logs (one per
// address per attempt), so that a test can act after a number of failed attempts.
type dialFailures chan slog.Record

func (dialFailures) Enabled(context.Context, slog.Level) bool { return true }
func (d dialFailures) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "fila: dial failed" {
		d <- r
	}
	return nil
}
func (d dialFailures) WithAttrs([]slog.Attr) slog.Handler { return d }
func (d dialFailures) WithGroup(string) slog.Handler      { return d }

// awaitFailures waits for n failed dial attempts.
func (d dialFailures) await(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-d:
		case <-time.After(serverWait):
			t.Fatalf("fewer than %d failed dial attempts", n)
		}
	}
}

// closedAddr is a loopback address where nothing listens: a port the system handed out and took
// back.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func retryOptions(log dialFailures) *fila.Options {
	return &fila.Options{DialRetry: true, ReconnectWait: 5 * time.Millisecond, MaxReconnectWait: 20 * time.Millisecond,
		Logger: slog.New(log)}
}

type dialed struct {
	c   *fila.Client
	err error
}

// A broker that starts after Dial began: Dial fails (nothing listens), waits, tries again, and
// returns a working client once the broker is up.
func TestDialRetryWaitsForABrokerStartedLater(t *testing.T) {
	addr, failures := closedAddr(t), make(dialFailures, 1024)
	ctx, cancel := context.WithTimeout(context.Background(), 2*serverWait)
	defer cancel()
	res := make(chan dialed, 1)
	go func() {
		c, err := fila.Dial(ctx, addr, retryOptions(failures))
		res <- dialed{c, err}
	}()
	failures.await(t, 2)
	srv, err := startBroker(t.TempDir(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.stop()
	r := <-res
	if r.err != nil {
		t.Fatalf("Dial = %v, want a connection once the broker is up", r.err)
	}
	defer r.c.Close()
	if _, err := r.c.CreateQueue(ctx, fila.QueueConfig{Name: "late"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.NewProducer(fila.ProducerOptions{}).Send(ctx, fila.Message{Queue: "late", Payload: []byte("x")}); err != nil {
		t.Fatalf("Send over the retried connection: %v", err)
	}
}

// The Dial context ends first: Dial stops retrying with a *ReconnectError carrying both the
// context's error and the last dial failure.
func TestDialRetryEndsWithItsContext(t *testing.T) {
	addr, failures := closedAddr(t), make(dialFailures, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan dialed, 1)
	go func() {
		c, err := fila.Dial(ctx, addr, retryOptions(failures))
		res <- dialed{c, err}
	}()
	failures.await(t, 3)
	cancel()
	r := <-res
	var re *fila.ReconnectError
	if r.c != nil || !errors.As(r.err, &re) || re.Attempts < 3 || !errors.Is(r.err, context.Canceled) ||
		!errors.Is(r.err, fila.ErrDisconnected) || !errors.Is(r.err, syscall.ECONNREFUSED) {
		t.Fatalf("Dial = %v, %v; want a *ReconnectError after at least 3 attempts wrapping context.Canceled and the refused connection", r.c, r.err)
	}
}

// Retries stop after MaxReconnects attempts when it is positive.
func TestDialRetryBoundedByMaxReconnects(t *testing.T) {
	failures := make(dialFailures, 1024)
	o := retryOptions(failures)
	o.MaxReconnects = 3
	c, err := fila.DialSeeds(context.Background(), []string{closedAddr(t), closedAddr(t)}, o)
	var re *fila.ReconnectError
	if c != nil || !errors.As(err, &re) || re.Attempts != 3 || re.Cause != nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("DialSeeds = %v, %v; want a *ReconnectError after 3 attempts", c, err)
	}
	if n := len(failures); n != 6 {
		t.Errorf("%d failed dials, want 6 (3 attempts of 2 addresses)", n)
	}
}

// Without DialRetry, Dial fails fast: one attempt, the dial's own error.
func TestDialFailsFastByDefault(t *testing.T) {
	failures := make(dialFailures, 1024)
	c, err := fila.Dial(context.Background(), closedAddr(t), &fila.Options{Logger: slog.New(failures)})
	var re *fila.ReconnectError
	if c != nil || !errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &re) {
		t.Fatalf("Dial = %v, %v; want the refused connection", c, err)
	}
	if n := len(failures); n != 1 {
		t.Errorf("%d failed dials, want 1", n)
	}
}

// A refusal that another attempt would not change ends a retrying Dial at once.
func TestDialRetryStopsAtAWrongPort(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	failures := make(dialFailures, 1024)
	c, err := fila.Dial(context.Background(), web.Listener.Addr().String(), retryOptions(failures))
	if c != nil || !errors.Is(err, fila.ErrHTTPServer) {
		t.Fatalf("Dial = %v, %v; want ErrHTTPServer", c, err)
	}
	if n := len(failures); n != 1 {
		t.Errorf("%d failed dials, want 1", n)
	}
}
