package transport

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// logBuffer is an io.Writer for a logger written from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An authentication failure is logged at info with the remote address and the reason.
func TestAuthFailuresAreLogged(t *testing.T) {
	var logs logBuffer
	a := startAuthServer(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a.refused("not-a-key-of-this-server")
	out := logs.String()
	if !strings.Contains(out, `level=INFO msg="authentication failed"`) || !strings.Contains(out, "remote=127.0.0.1:") ||
		!strings.Contains(out, `why="unknown or revoked API key"`) {
		t.Fatalf("the log lacks the authentication failure:\n%s", out)
	}
}
