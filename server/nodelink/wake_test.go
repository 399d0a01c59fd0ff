package nodelink

import (
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// A group member that sleeps: its raft stopped, its stores kept, reopened when a request wakes
// it (the broker's hibernation, without the broker).

// member is one node's replica of a group whose stores outlive its raft.
type member struct {
	tr    *trio
	id    meta.NodeID
	name  string
	store *raft.InmemStore
	snaps *raft.InmemSnapshotStore
	fsm   *counter

	mu    sync.Mutex
	r     *raft.Raft
	trans raft.Transport
}

func (tr *trio) members(name string) map[meta.NodeID]*member {
	tr.t.Helper()
	var servers []raft.Server
	for _, id := range tr.ids {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: tr.links[id].Address(id, name)})
	}
	ms := map[meta.NodeID]*member{}
	for _, id := range tr.ids {
		m := &member{tr: tr, id: id, name: name, store: raft.NewInmemStore(), snaps: raft.NewInmemSnapshotStore(), fsm: &counter{}}
		trans, err := tr.links[id].Transport(name)
		if err != nil {
			tr.t.Fatal(err)
		}
		if err := raft.BootstrapCluster(m.conf(), m.store, m.store, m.snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			tr.t.Fatal(err)
		}
		m.start(trans)
		ms[id] = m
		tr.t.Cleanup(m.stop)
	}
	return ms
}

func (m *member) conf() *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(m.id)
	// A second: no election under a loaded machine's pauses (a new term would wake the
	// sleeping member before it answered anything).
	conf.HeartbeatTimeout, conf.ElectionTimeout = time.Second, time.Second
	conf.LeaderLeaseTimeout, conf.CommitTimeout = 500*time.Millisecond, 10*time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	return conf
}

func (m *member) start(trans raft.Transport) {
	r, err := raft.NewRaft(m.conf(), m.fsm, m.store, m.store, m.snaps, trans)
	if err != nil {
		m.tr.t.Fatal(err)
	}
	m.mu.Lock()
	m.r, m.trans = r, trans
	m.mu.Unlock()
}

// reopen starts the member again on its stores, with the transport the link gives it.
func (m *member) reopen() {
	trans, err := m.tr.links[m.id].Transport(m.name)
	if err != nil {
		m.tr.t.Error(err)
		return
	}
	m.start(trans)
}

// stop stops the member's raft and closes its transport (it sleeps).
func (m *member) stop() {
	m.mu.Lock()
	r, trans := m.r, m.trans
	m.r, m.trans = nil, nil
	m.mu.Unlock()
	if r != nil {
		_ = r.Shutdown().Error()
		_ = trans.(io.Closer).Close()
	}
}

func (m *member) raft() *raft.Raft {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.r
}

func leaderAmong(ms map[meta.NodeID]*member) (meta.NodeID, bool) {
	for id, m := range ms {
		if r := m.raft(); r != nil && r.State() == raft.Leader {
			return id, true
		}
	}
	return "", false
}

// waker is a Handler whose group sleeps: answer says whether it answers a request that changes
// nothing for the group; any other request reopens it.
type waker struct {
	m        *member
	answer   bool
	answered atomic.Int64
	woken    atomic.Int64
	once     sync.Once
}

func (w *waker) ProposeMeta([]byte) (uint64, error) { return 0, raft.ErrNotLeader }

func (w *waker) WakeGroup(group string, req any) (any, bool, bool) {
	if group != w.m.name {
		return nil, false, false
	}
	if a, ok := req.(*raft.AppendEntriesRequest); ok && w.answer && len(a.Entries) == 0 && w.woken.Load() == 0 {
		term, _ := w.m.store.GetUint64([]byte("CurrentTerm"))
		last, _ := w.m.store.LastIndex()
		if a.Term == term && a.PrevLogEntry <= last {
			w.answered.Add(1)
			return &raft.AppendEntriesResponse{RPCHeader: raft.RPCHeader{ID: []byte(w.m.id), Addr: []byte(w.m.id)},
				Term: term, LastLog: last, Success: true}, true, true
		}
	}
	w.once.Do(func() {
		w.woken.Add(1)
		go w.m.reopen()
	})
	return nil, false, true
}

// TestARaftRequestWakesASleepingGroup: a follower's member stops (it sleeps); the leader's next
// request waits in the link until the Waker has reopened it, and the group goes on with all three.
func TestARaftRequestWakesASleepingGroup(t *testing.T) {
	for _, answer := range []bool{false, true} {
		tr := newTrio(t, nil)
		ms := tr.members("g")
		var lead meta.NodeID
		eventually(t, "the group has a leader", func() (ok bool) { lead, ok = leaderAmong(ms); return ok })
		if err := ms[lead].raft().Apply([]byte("before"), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		var sleeper *member
		for id, m := range ms {
			if id != lead {
				sleeper = m
				break
			}
		}
		eventually(t, "the follower applied the first entry", func() bool { return sleeper.fsm.len() == 1 })
		w := &waker{m: sleeper, answer: answer}
		tr.links[sleeper.id].SetHandler(w)
		if !tr.links[sleeper.id].WakesGroups() {
			t.Fatal("a link whose handler is a Waker does not say it wakes groups")
		}
		sleeper.stop()
		if answer {
			// The leader's heartbeats and empty appends are answered for the sleeping member,
			// which stays asleep while nothing is proposed.
			eventually(t, "the leader's requests are answered for the sleeping member", func() bool { return w.answered.Load() >= 20 })
			if w.woken.Load() != 0 {
				t.Fatal("a request that changes nothing woke the member")
			}
			if ms[lead].raft().State() != raft.Leader {
				t.Fatal("the leader lost its leadership while its follower slept")
			}
		}
		if err := ms[lead].raft().Apply([]byte("after"), 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the woken member applied the entry proposed while it slept", func() bool {
			return sleeper.raft() != nil && sleeper.fsm.len() >= 2
		})
		if w.woken.Load() != 1 {
			t.Fatalf("woken %d times", w.woken.Load())
		}
		// The leader knows its followers heard of the commit.
		last := ms[lead].raft().LastIndex()
		for id := range ms {
			if id != lead {
				eventually(t, "the leader knows the follower heard of the last commit", func() bool {
					return tr.links[lead].CommitKnown("g", id) >= last
				})
			}
		}
	}
}

// TestARequestForAGroupNotHereIsRefused: a Waker that has no member of the group leaves the link
// answering UnknownGroup, as without one.
func TestARequestForAGroupNotHereIsRefused(t *testing.T) {
	tr := newTrio(t, nil)
	ms := tr.members("g")
	var lead meta.NodeID
	eventually(t, "the group has a leader", func() (ok bool) { lead, ok = leaderAmong(ms); return ok })
	var other meta.NodeID
	for id := range ms {
		if id != lead {
			other = id
		}
	}
	w := &waker{m: &member{name: "another"}}
	tr.links[other].SetHandler(w)
	ms[other].stop()
	trans, err := tr.links[lead].Transport("probe")
	if err != nil {
		t.Fatal(err)
	}
	defer trans.(io.Closer).Close()
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries(raft.ServerID(other), "", &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{Addr: []byte(lead)}, Term: 1}, &resp)
	if err == nil {
		t.Fatal("a request for a group the node does not have was answered")
	}
	if tr.links[other].group("probe") != nil {
		t.Fatal("a transport is left waiting for a group that is not here")
	}
}
