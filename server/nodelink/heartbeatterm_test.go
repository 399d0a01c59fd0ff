package nodelink

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// A leader that hears a heartbeat of a newer term while it appends proposals must not stamp any
// of them with that term. raft's heartbeat handler runs beside its leader loop; had a heartbeat
// of a newer term taken that fast path, the loop could append a proposal under the new term, so
// that the new leader's entry at that index looked the same to the deposed leader's check, and
// the deposed leader kept — and later applied — an entry nobody else has (found by tools/chaos
// with a leader stopped by SIGSTOP and continued). The node link hands such a heartbeat to raft
// in order (fastHeartbeat): the leader steps down between two appends, and everything it
// appended carries its own term.
func TestAHeartbeatOfANewTermDoesNotRelabelTheLeadersProposals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 20 raft groups over the node link")
	}
	tr := newTrio(t, nil)
	for attempt := range 20 {
		name := fmt.Sprintf("g%d", attempt)
		g := tr.startGroup(name, nil)
		lead := g.leader(t)
		r := g.rafts[lead]
		term := r.CurrentTerm()
		var other meta.NodeID
		for _, id := range tr.ids {
			if id != lead {
				other = id
				break
			}
		}
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r.Apply(fmt.Appendf(nil, "old-%d", i), time.Second) // not waited for: keep the leader appending
				if i%64 == 63 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
		time.Sleep(20 * time.Millisecond)
		hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(other),
			Addr: []byte(tr.links[other].Address(other, name))}, Term: term + 1}
		var resp raft.AppendEntriesResponse
		if err := g.trans[other].AppendEntries(raft.ServerID(lead), tr.links[other].Address(lead, name), hb, &resp); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		close(stop)
		<-stopped
		store := g.stores[lead]
		first, _ := store.FirstIndex()
		last, _ := store.LastIndex()
		for i := first; i <= last; i++ {
			var l raft.Log
			if store.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
				continue
			}
			if l.Term > term && bytes.HasPrefix(l.Data, []byte("old-")) {
				t.Fatalf("attempt %d: the deposed leader's proposal %q is in its log at %d under the new term %d", attempt, l.Data, i, l.Term)
			}
		}
	}
}
