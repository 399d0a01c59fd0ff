package main

import (
	"log/slog"
	"os"
	"syscall"
)

// stopWhenRemoved stops the server (as a SIGTERM would) once the broker says that this node was
// removed from its cluster (broker.Removed): it hosts no queue any more, and its data directory
// belongs to no cluster. Started again, it stops again as soon as it has read its meta state.
func stopWhenRemoved(removed <-chan struct{}, sig chan<- os.Signal, log *slog.Logger) {
	if removed == nil {
		return
	}
	<-removed
	log.Error("this node was removed from the cluster (fila cluster remove) and stops: it serves nothing any more. " +
		"To bring the machine back, start it with an empty data directory, a new node ID and --join")
	select {
	case sig <- syscall.SIGTERM:
	default: // a stop is under way already
	}
}
