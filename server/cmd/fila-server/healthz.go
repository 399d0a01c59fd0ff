package main

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"github.com/filamq/fila/server/broker"
)

// healthz is /healthz: 200 "ok" while the store accepts writes (or before the broker is open;
// /readyz tells recovery apart), 503 with the reason while it does not. The broker serves reads
// meanwhile and accepts writes again by itself once the disk does.
type healthz struct{ b atomic.Pointer[broker.Broker] }

func (h *healthz) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	if b := h.b.Load(); b != nil {
		if err := b.StorageHealth(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "storage not accepting writes:", err)
			return
		}
	}
	fmt.Fprintln(w, "ok")
}
