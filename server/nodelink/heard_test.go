package nodelink

import (
	"testing"
	"time"
)

// A link tells when it last heard from a peer: recent, and moving on, while the peer answers a
// group's heartbeats; nothing once it holds no connection to the peer (the rebalancer counts a
// connected peer that fell silent, a stopped process, as down: server/broker/rebalance.go).
func TestALinkTellsWhenItLastHeardFromAPeer(t *testing.T) {
	tr := newTrio(t, nil)
	g := tr.startGroup("g", nil)
	lead := g.leader(t)
	l := tr.links[lead]
	for _, id := range tr.ids {
		if id == lead {
			continue
		}
		var first time.Time
		eventually(t, "the leader hears from "+string(id), func() bool {
			at, ok := l.Heard(id)
			first = at
			return ok && time.Since(at) < time.Second
		})
		eventually(t, "the leader hears from "+string(id)+" again", func() bool {
			at, ok := l.Heard(id)
			return ok && at.After(first)
		})
	}
	gone := tr.ids[0]
	if gone == lead {
		gone = tr.ids[1]
	}
	l.Partition(gone)
	eventually(t, "the leader holds no connection to the node cut off", func() bool {
		_, ok := l.Heard(gone)
		return !ok
	})
}
