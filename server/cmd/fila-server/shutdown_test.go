package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/generated/fibp"
	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
	"github.com/filamq/fila/server/transport"
)

// brokerWithAWriteHanging opens a broker on the storage twin and leaves one Enqueue's append
// hanging inside it (storage.Mem.HangAppends). The server's shutdown closes it with closeStores.
func brokerWithAWriteHanging(t *testing.T) (*broker.Broker, *storage.Mem) {
	t.Helper()
	st := storage.NewMem()
	b, err := broker.Open(broker.Options{Store: st, Sync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if e := b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	hanging := st.HangAppends()
	b.Enqueue([]broker.Message{{Queue: "q", Payload: []byte("m")}}, func([]broker.EnqueueResult, *broker.Error) {})
	<-hanging
	return b, st
}

// The server's shutdown always ends: a store stuck with writes inside it ends it with the stuck
// line (the server then exits 1), and a store that does not answer at all ends it once
// shutdown_timeout has passed, also as an error. Before, both waited for ever.
func TestShutdownEndsWhenTheStoreDoesNot(t *testing.T) {
	t.Run("stuck", func(t *testing.T) {
		b, st := brokerWithAWriteHanging(t)
		st.Stick(syscall.EIO)
		if err := closeStores(nil, b, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil))); !errors.Is(err, errStorageStuck) {
			t.Fatalf("closing a stuck store: %v, want errStorageStuck", err)
		}
	})
	t.Run("not answering", func(t *testing.T) {
		b, _ := brokerWithAWriteHanging(t)
		err := closeStores(nil, b, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
			t.Fatalf("closing a store that does not answer: %v, want the shutdown_timeout error", err)
		}
	})
}

// A connection whose reader waits inside the broker — a Consume that wakes a hibernated queue,
// whose Raft group must write to reopen, while the store answers no write — does not end when
// the shutdown closes it. The shutdown still ends, with the stores' error, instead of waiting
// for that connection for ever before closing the stores.
func TestShutdownEndsWhenAConnectionWaitsOnTheStore(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := storage.NewMem()
	o := broker.Options{Store: st, Sync: true, Logger: log}
	b, err := broker.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	if e := b.CreateQueue(broker.QueueSpec{Name: "q"}); e != nil {
		t.Fatal(e)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b, err = broker.Open(o); err != nil { // the queue is registered asleep
		t.Fatal(err)
	}
	srv := transport.New(b, transport.Options{Logger: log})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	nc, _, err := rawConn(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hanging := st.HangAppends()
	if _, err := nc.Write(fibp.AppendFrame(nil, 0, 1, &fibp.Consume{Queue: "q"})); err != nil {
		t.Fatal(err)
	}
	<-hanging // the queue's reopening writes; the Consume waits for it
	ended := make(chan error, 1)
	go func() { ended <- shutdown(time.Millisecond, srv, nil, b, log) }()
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
			t.Fatalf("shutdown with a store that does not answer: %v, want the shutdown_timeout error", err)
		}
	case <-time.After(time.Minute): // a net against the hang; the shutdown ends in milliseconds
		t.Fatal("the shutdown did not end within a minute")
	}
}
