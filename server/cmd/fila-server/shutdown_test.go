package main

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/filamq/fila/server/broker"
	"github.com/filamq/fila/server/storage"
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
