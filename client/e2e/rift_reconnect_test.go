package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/filamq/fila/client/rift"
)

// TestRiftReconnectAcrossKill kills a private broker with SIGKILL while a Rift subscriber, a
// queue-group subscriber and a publisher run, and starts it again on the same address. The
// clients are not rebuilt: the subscriptions subscribe again by themselves and receive what is
// published after the restart, the publisher goes on publishing, and a request made during the
// outage fails with a *rift.ReconnectError only once its context ended. Core pub/sub is at most
// once: what was published during the outage is not delivered, so the test only asks for
// messages published after the restart.
func TestRiftReconnectAcrossKill(t *testing.T) {
	t.Parallel()
	testRiftReconnectAcross(t, func(s *server) {
		s.proc.Kill()
	})
}

// TestRiftReconnectAcrossGracefulRestart is the same run with SIGTERM: the server closes the
// connections, and the clients notice at once.
func TestRiftReconnectAcrossGracefulRestart(t *testing.T) {
	t.Parallel()
	testRiftReconnectAcross(t, func(s *server) {
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// testRiftReconnectAcross runs subscribers, a publisher and a durable consumer on reconnecting
// clients while stop ends the broker, which then starts again on the same data directory and
// addresses.
func testRiftReconnectAcross(t *testing.T, stop func(*server)) {
	certs := t.TempDir()
	conf := writeFile(t, "fila.yaml", fmt.Sprintf(
		"rift:\n  listen: %s\n  dev_certs: %s\n  streams:\n    - {name: rrs, subjects: [\"rrs.>\"], durability: fsync}\n", anyPort, certs))
	s := privateServer(t, "--config", conf)
	riftAddr := s.riftAddr
	ctx := testCtx(t)

	// The server wrote the development CA and token before it reported itself ready.
	tlsConf, err := rift.TLSConfig(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := os.ReadFile(filepath.Join(certs, "dev-token"))
	if err != nil {
		t.Fatal(err)
	}
	var evMu sync.Mutex
	var events []rift.ConnectionEventKind
	dial := func(record bool) *rift.Client {
		t.Helper()
		opts := []rift.Option{
			rift.WithMaxReconnects(-1), rift.WithReconnectWait(20 * time.Millisecond), rift.WithMaxReconnectWait(200 * time.Millisecond),
			// A killed server closes nothing: the idle timeout notices it.
			rift.WithQUICConfig(&quic.Config{KeepAlivePeriod: 200 * time.Millisecond, MaxIdleTimeout: time.Second}),
		}
		if record {
			opts = append(opts, rift.WithConnectionHandler(func(e rift.ConnectionEvent) {
				evMu.Lock()
				events = append(events, e.Kind)
				evMu.Unlock()
			}))
		}
		c, err := rift.Connect(ctx, riftAddr, "localhost", tlsConf, strings.TrimSpace(string(token)), opts...)
		if err != nil {
			t.Fatalf("rift connect: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	subC, pubC := dial(true), dial(false)

	sub, err := subC.Subscribe(ctx, "rr.n", "")
	if err != nil {
		t.Fatal(err)
	}
	qsub, err := subC.Subscribe(ctx, "rr.n", "workers")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]int{} // subscription -> highest sequence received
	recvErrs := map[string]error{}
	receive := func(name string, sub *rift.Subscription) {
		for {
			m, err := sub.Recv(ctx)
			if err != nil {
				mu.Lock()
				if ctx.Err() == nil {
					recvErrs[name] = err
				}
				mu.Unlock()
				return
			}
			n, _ := strconv.Atoi(string(m.Payload))
			mu.Lock()
			got[name] = max(got[name], n)
			mu.Unlock()
		}
	}
	go receive("plain", sub)
	go receive("queue", qsub)

	pub, err := pubC.Publisher(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var pubMu sync.Mutex
	published, pubFailures := 0, 0
	pubDone := make(chan struct{})
	stopPub := make(chan struct{})
	go func() {
		defer close(pubDone)
		for n := 1; ; n++ {
			select {
			case <-stopPub:
				return
			case <-time.After(5 * time.Millisecond):
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := pub.Publish(pctx, "rr.n", "", []byte(strconv.Itoa(n)))
			if err == nil && n%10 == 0 {
				err = pub.Flush(pctx)
			}
			cancel()
			pubMu.Lock()
			if err == nil {
				published = n
			} else {
				pubFailures++
			}
			pubMu.Unlock()
		}
	}()
	t.Cleanup(func() { close(stopPub); <-pubDone })
	highest := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return got[name]
	}
	lastPublished := func() int {
		pubMu.Lock()
		defer pubMu.Unlock()
		return published
	}

	// A durable consumer with three records fetched, one acknowledged.
	for i := range 3 {
		if _, err := subC.StreamPublish(ctx, "rrs", "rrs.x", "", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := subC.Consumer(ctx, "rrs", "k", rift.ConsumerConfig{AckWait: 300 * time.Millisecond, MaxAckPending: 16})
	if err != nil {
		t.Fatal(err)
	}
	if ds, err := cons.Fetch(ctx, 3); err != nil || len(ds) != 3 {
		t.Fatalf("Fetch = %d deliveries, %v; want 3", len(ds), err)
	}
	if err := cons.Ack(ctx, 1); err != nil {
		t.Fatal(err)
	}

	eventually(t, "messages received before the kill", func() bool { return highest("plain") >= 20 && highest("queue") >= 20 })
	stop(s)
	eventually(t, "the clients noticed the stop", func() bool { return !subC.Connected() && !pubC.Connected() })

	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = subC.Request(callCtx, "rr.echo", []byte("ping"), time.Second)
	ended := callCtx.Err() != nil
	cancel()
	var re *rift.ReconnectError
	if !ended || !errors.Is(err, rift.ErrDisconnected) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) {
		t.Errorf("Request during the outage = %v (context ended: %v), want a *rift.ReconnectError after the deadline", err, ended)
	}

	if err := s.startAgain(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the clients reconnected", func() bool { return subC.Connected() && pubC.Connected() })
	after := lastPublished()
	defer func() {
		if t.Failed() {
			mu.Lock()
			pubMu.Lock()
			failures := pubFailures
			pubMu.Unlock()
			t.Logf("published %d (%d failed); received plain %d, queue %d; receive errors %v", lastPublished(), failures, got["plain"], got["queue"], recvErrs)
			mu.Unlock()
		}
	}()
	eventually(t, "messages published after the restart received by both subscriptions", func() bool {
		return highest("plain") > after+20 && highest("queue") > after+20
	})
	// The same Consumer goes on: unacknowledged records come again, and new ones follow.
	if _, err := subC.StreamPublish(ctx, "rrs", "rrs.x", "", []byte("3")); err != nil {
		t.Fatalf("StreamPublish after the restart: %v", err)
	}
	redelivered := map[uint64]uint32{}
	eventually(t, "records 2 and 3 redelivered and 4 delivered after the restart", func() bool {
		ds, err := cons.Fetch(ctx, 16)
		if err != nil {
			t.Fatalf("Fetch after the restart: %v", err)
		}
		for _, d := range ds {
			redelivered[d.Sequence] = d.DeliveryCount
			if err := cons.Ack(ctx, d.Sequence); err != nil {
				t.Fatalf("Ack after the restart: %v", err)
			}
		}
		return redelivered[2] >= 2 && redelivered[3] >= 2 && redelivered[4] >= 1
	})
	if _, ok := redelivered[1]; ok {
		t.Errorf("record 1, acknowledged before the kill, was delivered again: %v", redelivered)
	}

	mu.Lock()
	if len(recvErrs) > 0 {
		t.Errorf("subscriptions ended: %v", recvErrs)
	}
	mu.Unlock()
	if err := pub.Err(); err != nil {
		t.Errorf("publisher unusable after the restart: %v", err)
	}
	evMu.Lock()
	defer evMu.Unlock()
	if len(events) < 2 || events[0] != rift.Disconnected || events[len(events)-1] != rift.Reconnected {
		t.Errorf("connection events %v, want Disconnected ... Reconnected", events)
	}
}
