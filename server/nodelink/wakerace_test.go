package nodelink

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// openingWaker is a Handler whose group opens while it is asked about a request for it: it says
// the group is not here (the broker's registry publishes a replica only once it has opened), but
// the group claims the waiting transport meanwhile.
type openingWaker struct {
	asked, proceed chan struct{}
}

func (w *openingWaker) ProposeMeta([]byte) (uint64, error) { return 0, raft.ErrNotLeader }

func (w *openingWaker) WakeGroup(string, any) (any, bool, bool) {
	close(w.asked)
	<-w.proceed
	return nil, false, false
}

// TestAGroupOpeningWhileTheWakerIsAskedKeepsItsTransport: a request for a group with no open
// transport waits in one while the Waker is asked about it; the group opens meanwhile and claims
// that transport. The Waker's "not here" must not close it: the request goes to the group's raft,
// and so do the next ones. Before, the transport was closed under the opened group, whose raft
// then had every request refused ("group g closed") until it stopped — a new queue's or a
// restarted node's group that could not win an election for a minute.
func TestAGroupOpeningWhileTheWakerIsAskedKeepsItsTransport(t *testing.T) {
	tr := newTrio(t, nil)
	w := &openingWaker{asked: make(chan struct{}), proceed: make(chan struct{})}
	tr.links["n2"].SetHandler(w)
	from, err := tr.links["n1"].Transport("g")
	if err != nil {
		t.Fatal(err)
	}
	defer from.(io.Closer).Close()
	answered := make(chan error, 2)
	send := func() {
		var resp raft.AppendEntriesResponse
		answered <- from.AppendEntries("n2", "", &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte("n1")}, Term: 1}, &resp)
	}
	go send()
	select {
	case <-w.asked:
	case <-time.After(time.Minute):
		t.Fatal("the Waker was not asked about the request")
	}
	opened, err := tr.links["n2"].Transport("g") // the group opens, claiming the waiting transport
	if err != nil {
		t.Fatal(err)
	}
	defer opened.(io.Closer).Close()
	close(w.proceed)
	serve := func() {
		select {
		case rpc := <-opened.Consumer():
			rpc.Respond(&raft.AppendEntriesResponse{Term: 1, Success: true}, nil)
		case err := <-answered:
			t.Fatalf("the request was answered without reaching the opened group's raft: %v", err)
		case <-time.After(time.Minute):
			t.Fatal("the request never reached the opened group's raft")
		}
		if err := <-answered; err != nil {
			t.Fatalf("the request the opened group answered failed: %v", err)
		}
	}
	serve()
	go send() // the next request finds the group's transport open
	serve()
}
