// Package connevent holds the connection events that both SDKs (client/fila and client/rift)
// pass to their connection handlers; each SDK re-exports them under its own names.
package connevent

import "fmt"

// Kind says what happened to a client's connection.
type Kind int

const (
	// Disconnected: the connection dropped; reconnection begins.
	Disconnected Kind = iota + 1
	// Reconnected: a new connection is up (Event.Addr).
	Reconnected
	// ReconnectFailed: reconnection gave up after the configured number of attempts.
	ReconnectFailed
)

func (k Kind) String() string {
	switch k {
	case Disconnected:
		return "disconnected"
	case Reconnected:
		return "reconnected"
	case ReconnectFailed:
		return "reconnect failed"
	}
	return fmt.Sprintf("ConnectionEventKind(%d)", int(k))
}

// Event is passed to a client's connection handler.
type Event struct {
	Kind     Kind
	Addr     string // the address lost (Disconnected) or connected (Reconnected)
	Err      error  // why the connection dropped, or the last dial failure (ReconnectFailed)
	Attempts int    // dial attempts in this outage (Reconnected, ReconnectFailed)
}
