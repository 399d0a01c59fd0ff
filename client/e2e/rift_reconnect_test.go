package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	riftAddr := pc.LocalAddr().String()
	pc.Close()
	certs := t.TempDir()
	conf := writeFile(t, "fila.yaml", fmt.Sprintf("rift:\n  listen: %s\n  dev_certs: %s\n", riftAddr, certs))
	s := privateServer(t, "--config", conf)
	ctx := testCtx(t)

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
		// The QUIC listener starts just after FIBP's: retry the first connection.
		deadline := time.Now().Add(waitFor)
		for {
			c, err := rift.Connect(ctx, riftAddr, "localhost", tlsConf, strings.TrimSpace(string(token)), opts...)
			if err == nil {
				t.Cleanup(func() { c.Close() })
				return c
			}
			if time.Now().After(deadline) {
				t.Fatalf("rift connect: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
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

	eventually(t, "messages received before the kill", func() bool { return highest("plain") >= 20 && highest("queue") >= 20 })
	if err := s.proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.proc.exited
	eventually(t, "the clients noticed the kill", func() bool { return !subC.Connected() && !pubC.Connected() })

	callCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = subC.Request(callCtx, "rr.echo", []byte("ping"), time.Second)
	ended := callCtx.Err() != nil
	cancel()
	var re *rift.ReconnectError
	if !ended || !errors.Is(err, rift.ErrDisconnected) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &re) {
		t.Errorf("Request during the outage = %v (context ended: %v), want a *rift.ReconnectError after the deadline", err, ended)
	}

	p, err := startProcess(s.dataDir, s.addr, s.args)
	if err != nil {
		t.Fatal(err)
	}
	s.proc = p
	eventually(t, "the clients reconnected", func() bool { return subC.Connected() && pubC.Connected() })
	after := lastPublished()
	eventually(t, "messages published after the restart received by both subscriptions", func() bool {
		return highest("plain") > after+20 && highest("queue") > after+20
	})
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
