package nodelink

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A group that replicates without pause spares its heartbeats (each follower heard from the
// leader since the last one), keeps its leader and term throughout, and sends heartbeats again
// once the entries stop. CommitTimeout is long here, so that only entries carry the contacts.
func TestABusyGroupSparesItsHeartbeats(t *testing.T) {
	tr := newTrio(t, nil)
	g := tr.startGroup("busy", func(c *raft.Config) { c.CommitTimeout = time.Minute })
	lead := g.leader(t)
	term := g.rafts[lead].CurrentTerm()
	st := &tr.links[lead].stats
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; !stop.Load(); i++ {
			if err := g.rafts[lead].Apply(fmt.Appendf(nil, "e%d", i), time.Second).Error(); err != nil {
				return
			}
		}
	}()
	eventually(t, "the leader spares heartbeats while it replicates", func() bool { return st.HeartbeatsSpared.Load() >= 20 })
	stop.Store(true)
	<-done
	sent := st.HeartbeatsSent.Load()
	eventually(t, "heartbeats are sent again once the entries stop", func() bool { return st.HeartbeatsSent.Load() >= sent+10 })
	if g.rafts[lead].State() != raft.Leader || g.rafts[lead].CurrentTerm() != term {
		t.Fatalf("leadership changed under load: %s is %v in term %d (was leader in %d)", lead, g.rafts[lead].State(), g.rafts[lead].CurrentTerm(), term)
	}
	t.Logf("heartbeats spared %d, sent %d", st.HeartbeatsSpared.Load(), st.HeartbeatsSent.Load())
}
