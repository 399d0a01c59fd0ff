//go:build linux

package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/server/internal/testdisk"
	"github.com/filamq/fila/server/offheap"
)

// On a tmpfs (where fallocate reserves nothing that could leave memory) the server runs without
// scratch files and says why.
func TestScratchOffOnTmpfsIsLogged(t *testing.T) {
	var logs bytes.Buffer
	stop := startScratch(offheap.New(offheap.Options{}), testdisk.Tmpfs(t, 4), 0, time.Minute, slog.New(slog.NewTextHandler(&logs, nil)))
	stop()
	if out := logs.String(); !strings.Contains(out, "no scratch files") || !strings.Contains(out, "tmpfs") {
		t.Fatalf("log on a tmpfs: %q", out)
	}
}
