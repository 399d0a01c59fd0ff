package nodelink

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/certs"
	"github.com/filamq/fila/server/meta"
)

// Three nodes, each with its own link over real loopback TCP, running hashicorp/raft groups.

type trio struct {
	t     *testing.T
	ids   []meta.NodeID
	links map[meta.NodeID]*Link
}

// newTrio starts three links and waits until every pair is connected; tweak, when set, changes
// a node's configuration.
func newTrio(t *testing.T, tweak func(meta.NodeID, *Config)) *trio {
	t.Helper()
	tr := &trio{t: t, ids: []meta.NodeID{"n1", "n2", "n3"}, links: map[meta.NodeID]*Link{}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, id := range tr.ids {
		cfg := Config{Cluster: "test", NodeID: id, Listen: "127.0.0.1:0", Logger: quiet, Timeout: 2 * time.Second}
		if tweak != nil {
			tweak(id, &cfg)
		}
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		tr.links[id] = l
		t.Cleanup(func() { _ = l.Close() })
	}
	for _, a := range tr.ids {
		for _, b := range tr.ids {
			tr.links[a].AddPeer(b, tr.links[b].Addr())
		}
	}
	tr.waitConnected()
	return tr
}

func (tr *trio) waitConnected() {
	tr.t.Helper()
	eventually(tr.t, "every pair of nodes is connected", func() bool {
		for _, a := range tr.ids {
			for _, b := range tr.ids {
				if a != b && !tr.links[a].Connected(b) {
					return false
				}
			}
		}
		return true
	})
}

// eventually waits until cond holds, polling; the test fails after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not true after a minute: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counter is a state machine that keeps every entry it applied.
type counter struct {
	mu       sync.Mutex
	entries  [][]byte
	restored int
}

func (c *counter) Apply(l *raft.Log) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, append([]byte(nil), l.Data...))
	return len(c.entries)
}

func (c *counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *counter) Snapshot() (raft.FSMSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b bytes.Buffer
	for _, e := range c.entries {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(e)))
		b.Write(e)
	}
	return snap(b.Bytes()), nil
}

func (c *counter) Restore(r io.ReadCloser) error {
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	var entries [][]byte
	for len(data) >= 4 {
		n := binary.BigEndian.Uint32(data)
		entries = append(entries, data[4:4+n])
		data = data[4+n:]
	}
	c.mu.Lock()
	c.entries, c.restored = entries, c.restored+1
	c.mu.Unlock()
	return nil
}

type snap []byte

func (s snap) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}
func (snap) Release() {}

// group is one Raft group on the three nodes.
type group struct {
	rafts  map[meta.NodeID]*raft.Raft
	fsms   map[meta.NodeID]*counter
	stores map[meta.NodeID]*raft.InmemStore
	trans  map[meta.NodeID]raft.Transport
}

func (tr *trio) startGroup(name string, tweak func(*raft.Config)) *group {
	tr.t.Helper()
	g := &group{rafts: map[meta.NodeID]*raft.Raft{}, fsms: map[meta.NodeID]*counter{}, stores: map[meta.NodeID]*raft.InmemStore{},
		trans: map[meta.NodeID]raft.Transport{}}
	var servers []raft.Server
	for _, id := range tr.ids {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: tr.links[id].Address(id, name)})
	}
	for _, id := range tr.ids {
		conf := raft.DefaultConfig()
		conf.LocalID = raft.ServerID(id)
		conf.HeartbeatTimeout, conf.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
		conf.LeaderLeaseTimeout, conf.CommitTimeout = 100*time.Millisecond, 10*time.Millisecond
		conf.Logger = hclog.NewNullLogger()
		if tweak != nil {
			tweak(conf)
		}
		trans, err := tr.links[id].Transport(name)
		if err != nil {
			tr.t.Fatal(err)
		}
		store, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: servers}); err != nil {
			tr.t.Fatal(err)
		}
		fsm := &counter{}
		r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans)
		if err != nil {
			tr.t.Fatal(err)
		}
		g.rafts[id], g.fsms[id], g.stores[id], g.trans[id] = r, fsm, store, trans
		tr.t.Cleanup(func() {
			_ = r.Shutdown().Error()
			_ = trans.(io.Closer).Close()
		})
	}
	return g
}

// leader waits for a node among those given (all when none) to lead the group.
func (g *group) leader(t *testing.T, among ...meta.NodeID) meta.NodeID {
	t.Helper()
	var lead meta.NodeID
	eventually(t, "the group has a leader", func() bool {
		for id, r := range g.rafts {
			if r.State() == raft.Leader && (len(among) == 0 || contains(among, id)) {
				lead = id
				return true
			}
		}
		return false
	})
	return lead
}

func contains(ids []meta.NodeID, id meta.NodeID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// apply commits n entries "prefix-i" through the group's leader among the nodes given (any
// when none), pipelined; an entry a deposed leader could not commit is proposed again to the
// next leader (then it may be applied twice: tests count at least n).
func (g *group) apply(t *testing.T, among []meta.NodeID, n int, prefix string) {
	t.Helper()
	var data [][]byte
	for i := range n {
		data = append(data, []byte(fmt.Sprintf("%s-%d", prefix, i)))
	}
	g.applyData(t, among, data)
}

func (g *group) applyData(t *testing.T, among []meta.NodeID, data [][]byte) {
	t.Helper()
	lead := g.leader(t, among...)
	var fs []raft.ApplyFuture
	for _, d := range data {
		fs = append(fs, g.rafts[lead].Apply(d, 10*time.Second))
	}
	for i, f := range fs {
		for err := f.Error(); err != nil; err = f.Error() {
			if !errors.Is(err, raft.ErrNotLeader) && !errors.Is(err, raft.ErrLeadershipLost) {
				t.Fatal(err)
			}
			f = g.rafts[g.leader(t, among...)].Apply(data[i], 10*time.Second)
		}
	}
}

// waitApplied waits until the nodes have applied the same entries, at least n; what one node
// applied is at every moment a prefix of what another applied, or the other way round.
func (g *group) waitApplied(t *testing.T, n int, nodes ...meta.NodeID) {
	t.Helper()
	eventually(t, fmt.Sprintf("nodes %v applied the same %d entries or more", nodes, n), func() bool {
		first := g.fsms[nodes[0]].snapshotEntries()
		same := len(first) >= n
		for _, id := range nodes[1:] {
			es := g.fsms[id].snapshotEntries()
			k := min(len(es), len(first))
			if !equalEntries(es[:k], first[:k]) {
				t.Fatalf("node %s applied other entries than %s", id, nodes[0])
			}
			same = same && len(es) == len(first)
		}
		return same
	})
}

func (c *counter) snapshotEntries() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.entries...)
}

func equalEntries(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestGroupsElectAndReplicate(t *testing.T) {
	tr := newTrio(t, nil)
	var groups []*group
	for i := range 5 {
		groups = append(groups, tr.startGroup(fmt.Sprintf("q%d", i), nil))
	}
	for i, g := range groups {
		g.apply(t, nil, 300, fmt.Sprintf("q%d", i)) // pipelined once the followers caught up
		g.waitApplied(t, 300, tr.ids...)
	}
	// A leadership transfer travels as TimeoutNow.
	g := groups[0]
	old := g.leader(t)
	if err := g.rafts[old].LeadershipTransfer().Error(); err != nil && g.rafts[old].State() == raft.Leader {
		t.Fatal(err)
	}
	g.leader(t, without(tr.ids, old)...)
	g.apply(t, nil, 10, "after-transfer")
	g.waitApplied(t, 310, tr.ids...)
	st := tr.links[old].Stats()
	if st.HeartbeatsSent.Load()+st.HeartbeatsSpared.Load() == 0 || st.AppendsSent.Load() == 0 || st.BytesSent.Load() == 0 {
		t.Fatalf("the leader's link counted nothing: %+v", st)
	}
}

func without(ids []meta.NodeID, x meta.NodeID) []meta.NodeID {
	var out []meta.NodeID
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

func TestEntriesBeyondAFrameTravelInSeveral(t *testing.T) {
	tr := newTrio(t, func(_ meta.NodeID, c *Config) { c.MaxFrame = 64 << 10 })
	g := tr.startGroup("q", nil)
	var data [][]byte
	for i := range 60 {
		data = append(data, append([]byte(fmt.Sprint(i, "-")), bytes.Repeat([]byte("y"), 20<<10)...))
	}
	g.applyData(t, nil, data)
	g.waitApplied(t, 60, tr.ids...)
}

func TestPartitionedLeaderIsReplacedAndCatchesUpWhenHealed(t *testing.T) {
	tr := newTrio(t, nil)
	g := tr.startGroup("q", nil)
	g.apply(t, nil, 20, "before")
	g.waitApplied(t, 20, tr.ids...)
	old := g.leader(t)
	for _, id := range without(tr.ids, old) {
		tr.links[old].Partition(id)
	}
	g.leader(t, without(tr.ids, old)...)
	g.apply(t, without(tr.ids, old), 50, "during")
	if f := g.rafts[old].Apply([]byte("lost"), 300*time.Millisecond); f.Error() == nil {
		t.Fatal("a leader cut off from its followers committed an entry")
	}
	for _, id := range without(tr.ids, old) {
		tr.links[old].Heal(id)
	}
	tr.waitConnected()
	g.waitApplied(t, 70, tr.ids...)
	for _, e := range g.fsms[old].snapshotEntries() {
		if string(e) == "lost" {
			t.Fatal("the entry the cut-off leader could not commit was applied")
		}
	}
}

func TestAFollowerBehindTheLeadersLogIsInstalledASnapshot(t *testing.T) {
	tr := newTrio(t, nil)
	g := tr.startGroup("q", func(c *raft.Config) { c.TrailingLogs = 10 })
	lead := g.leader(t)
	behind := without(tr.ids, lead)[0]
	for _, id := range without(tr.ids, behind) {
		tr.links[behind].Partition(id)
	}
	// Entries large enough that the snapshot takes many chunks and windows.
	big := bytes.Repeat([]byte("x"), 100<<10)
	var data [][]byte
	for i := range 40 {
		data = append(data, append([]byte(fmt.Sprint(i)), big...))
	}
	up := without(tr.ids, behind)
	g.applyData(t, up, data)
	g.waitApplied(t, 40, up...)
	for _, id := range up { // whichever leads then has truncated its log
		if err := g.rafts[id].Snapshot().Error(); err != nil {
			t.Fatal(err)
		}
	}
	g.apply(t, up, 20, "after")
	for _, id := range up {
		tr.links[behind].Heal(id)
	}
	tr.waitConnected()
	g.waitApplied(t, 60, tr.ids...)
	if g.fsms[behind].restored == 0 {
		t.Fatal("the follower caught up without a snapshot")
	}
	var sent uint64
	for _, id := range up {
		sent += tr.links[id].Stats().SnapshotBytes.Load()
	}
	if sent < 40*100<<10 {
		t.Fatalf("the leader sent %d snapshot bytes", sent)
	}
}

func TestMutualTLS(t *testing.T) {
	ca, err := certs.NewCA("nodes")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	issue := func(use certs.Use) tls.Certificate {
		p, err := ca.Issue("node", use, []string{"127.0.0.1"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(p.Cert, p.Key)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	tr := newTrio(t, func(_ meta.NodeID, c *Config) {
		c.ServerTLS = &tls.Config{Certificates: []tls.Certificate{issue(certs.ServerUse)}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
		c.ClientTLS = &tls.Config{Certificates: []tls.Certificate{issue(certs.ClientUse)}, RootCAs: pool, MinVersion: tls.VersionTLS13}
	})
	g := tr.startGroup("q", nil)
	g.apply(t, nil, 10, "tls")
	g.waitApplied(t, 10, tr.ids...)

	// A node without a client certificate is not let in.
	stranger, err := New(Config{Cluster: "test", NodeID: "n0", Listen: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Timeout: time.Second,
		ClientTLS: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.dial("n1", tr.links["n1"].Addr()); err == nil {
		t.Fatal("a node without a client certificate was let in")
	}
}

// metaHandler answers ProposeMeta as a meta leader would.
type metaHandler func(entry []byte) (uint64, error)

func (h metaHandler) ProposeMeta(entry []byte) (uint64, error) { return h(entry) }

func TestProposeMetaIsHandedToTheNode(t *testing.T) {
	tr := newTrio(t, nil)
	if _, err := tr.links["n1"].ProposeMeta("n2", []byte("x")); err == nil {
		t.Fatal("a node without a handler took a meta entry")
	}
	tr.links["n2"].SetHandler(metaHandler(func(entry []byte) (uint64, error) {
		switch string(entry) {
		case "ok":
			return 42, nil
		case "refuse":
			return 43, &meta.Refused{Code: 3, Message: "queue q already exists"}
		case "follower":
			return 0, raft.ErrNotLeader
		}
		return 0, errors.New("disk on fire")
	}))
	if i, err := tr.links["n1"].ProposeMeta("n2", []byte("ok")); err != nil || i != 42 {
		t.Fatalf("ok: %d, %v", i, err)
	}
	var refused *meta.Refused
	if _, err := tr.links["n3"].ProposeMeta("n2", []byte("refuse")); !errors.As(err, &refused) || refused.Code != 3 ||
		refused.Message != "queue q already exists" {
		t.Fatalf("refuse: %v", err)
	}
	if _, err := tr.links["n1"].ProposeMeta("n2", []byte("follower")); !errors.Is(err, raft.ErrNotLeader) {
		t.Fatalf("follower: %v", err)
	}
	if _, err := tr.links["n1"].ProposeMeta("n2", []byte("?")); err == nil || !bytes.Contains([]byte(err.Error()), []byte("disk on fire")) {
		t.Fatalf("failure: %v", err)
	}
	tr.links["n1"].Partition("n2")
	if _, err := tr.links["n1"].ProposeMeta("n2", []byte("ok")); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("partitioned: %v", err)
	}
}

func TestFitCutsEntriesToAFrame(t *testing.T) {
	tr := &Transport{l: &Link{cfg: Config{MaxFrame: 10_000}}, group: "queue-a"}
	var entries []*raft.Log
	for i := range 10 {
		entries = append(entries, &raft.Log{Index: uint64(i + 1), Term: 1, Data: make([]byte, 1000), Extensions: []byte("x")})
	}
	for _, keep := range []int{10, 9, 3, 1} {
		args := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte("n1")}, Term: 1,
			Entries: entries[:keep]}
		if err := tr.fit(args); err != nil {
			t.Fatal(err)
		}
		f := appendEntriesFrame(tr.group, args)
		if size := cluster.HeaderSize + f.Size(); size > 10_000 {
			t.Fatalf("%d entries fitted into a frame of %d bytes", len(args.Entries), size)
		}
		if want := min(keep, 9); len(args.Entries) != want {
			t.Fatalf("of %d entries %d were kept, want %d", keep, len(args.Entries), want)
		}
	}
	args := &raft.AppendEntriesRequest{Entries: []*raft.Log{{Index: 1, Data: make([]byte, 10_000)}}}
	if err := tr.fit(args); err == nil {
		t.Fatal("an entry larger than a frame fitted")
	}
}

func TestClosingEverythingLeavesNoGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		tr := newTrio(t, nil)
		g := tr.startGroup("q", nil)
		g.apply(t, nil, 50, "x")
		g.waitApplied(t, 50, tr.ids...)
		for _, r := range g.rafts { // raft closes its transport (WithClose)
			if err := r.Shutdown().Error(); err != nil {
				t.Fatal(err)
			}
		}
		for _, l := range tr.links {
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}()
	eventually(t, "the goroutines of the links and groups ended", func() bool { return runtime.NumGoroutine() <= before })
}
