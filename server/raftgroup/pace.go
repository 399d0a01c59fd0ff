package raftgroup

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Heartbeats by role. hashicorp/raft reads one setting, HeartbeatTimeout, for two things: how
// long a follower waits to hear from its leader before it stands for election, and how often a
// leader sends each follower a heartbeat (every tenth to fifth of it). A group of several nodes
// sets it by the node's role instead: a follower keeps the configured timeout, so that it stands
// for election soon after its leader dies, and a leader sets leaderPace times it, so that it
// sends heartbeats half as often as the follower's timeout alone would have it send (every fifth
// to two fifths of the follower's timeout: two to five heartbeats within it).
//
// A leader's death is noticed by both followers before one is elected: raft's pre-vote refuses
// a candidate while the voter still hears from a leader. The election thus ends about when the
// second follower's timeout runs out, one to three timeouts after the death.
const leaderPace = 2

// paceByRole keeps the group's heartbeat timeout at hb while this node follows or stands for
// election and at leaderPace×hb while it leads, until stop is called. It costs one goroutine,
// which waits for raft's state changes. A follower's first setting waits until hold has passed
// (a deferred election, deferTimeouts): lowering the timeout has raft's follower look for its
// leader at once, and stand for election when it has heard from none.
func (g *Group) paceByRole(hb time.Duration, hold time.Duration) (stop func()) {
	obs := make(chan raft.Observation, 4)
	o := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.RaftState)
		return ok
	})
	g.r.RegisterObserver(o)
	quit := make(chan struct{})
	go func() {
		var paced time.Duration
		var held <-chan time.Time
		if hold > 0 {
			t := time.NewTimer(hold)
			defer t.Stop()
			held = t.C
		}
		for {
			want := hb
			switch g.r.State() {
			case raft.Leader:
				want = leaderPace * hb
			case raft.Shutdown:
				return
			}
			if held != nil && want == hb {
				want = paced // still deferred: leave raft's timeout as Open set it
			}
			if want != paced && want != 0 {
				rc := g.r.ReloadableConfig()
				rc.HeartbeatTimeout = want
				rc.ElectionTimeout = electionTimeouts * hb // as config sets it (a deferred Open raised it)
				if g.r.ReloadConfig(rc) == nil {
					paced = want
				}
			}
			select {
			case <-obs: // the state is read again above: observations may be dropped, never stale
			case <-held:
				held = nil
			case <-quit:
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.r.DeregisterObserver(o)
			close(quit)
		})
	}
}

// HeartbeatTimeout is the group's heartbeat timeout now: the configured one while this node
// follows, leaderPace times it while this node leads a group of several nodes.
func (g *Group) HeartbeatTimeout() time.Duration { return g.r.ReloadableConfig().HeartbeatTimeout }
