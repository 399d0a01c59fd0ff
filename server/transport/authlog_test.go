package transport

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Failed authentications cannot flood the log: at most one line a second (by the server's
// clock), which counts the failures left out since the line before. Before, every failed
// Handshake wrote a line.
func TestAuthFailuresAreLoggedAtMostOnceASecond(t *testing.T) {
	var logs logBuffer
	a := startAuthServer(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const failures = 50
	for range failures {
		a.refused("not-a-key-of-this-server")
	}
	lines := func() []string {
		var out []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="authentication failed"`) {
				out = append(out, l)
			}
		}
		return out
	}
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "not_logged_before=0") {
		t.Fatalf("%d failed handshakes in one second of the server's clock logged %d lines, want 1:\n%s",
			failures, len(got), strings.Join(got, "\n"))
	}
	a.clock.Advance(time.Second)
	a.refused("not-a-key-of-this-server")
	got := lines()
	if len(got) != 2 || !strings.Contains(got[1], "not_logged_before=49") {
		t.Fatalf("a second later, want a second line counting the 49 left out:\n%s", strings.Join(got, "\n"))
	}
}
