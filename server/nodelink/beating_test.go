package nodelink

import (
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A transport closed while raft's heartbeat handler answers a heartbeat on one of its goroutines
// returns only once the handler has: raft's Shutdown closes the transport last, and its caller
// closes the group's storage next, which a handler still saving a term would find closed (raft
// panics then: "failed to save current term", found by the race step of CI).
func TestClosingATransportWaitsForAHeartbeatBeingAnswered(t *testing.T) {
	tr := newTrio(t, nil)
	from, err := tr.links["n1"].Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	defer from.(io.Closer).Close()
	to, err := tr.links["n2"].Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var answered atomic.Bool
	to.(*Transport).answered.Store(1) // raft has answered in term 1: its heartbeats take the fast path
	to.(*Transport).SetHeartbeatHandler(func(rpc raft.RPC) {
		close(entered)
		<-release
		answered.Store(true)
		rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
	})
	go func() {
		var resp raft.AppendEntriesResponse
		_ = from.AppendEntries("n2", "", &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("n1")}, Term: 1}, &resp)
	}()
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the heartbeat never reached the handler")
	}
	closed := make(chan bool, 1)
	go func() {
		_ = to.(io.Closer).Close()
		closed <- answered.Load()
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the heartbeat handler was running")
	case <-time.After(100 * time.Millisecond): // a Close that does not wait returns at once
	}
	close(release)
	if !<-closed {
		t.Fatal("Close returned before the heartbeat handler did")
	}
}
