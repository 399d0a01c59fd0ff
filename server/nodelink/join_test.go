package nodelink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// admitter is a Handler that admits nodes as a meta leader would (leader), or hands them on to
// the leader through its link.
type admitter struct {
	link   *Link
	leader meta.NodeID // "" when this node leads

	mu      sync.Mutex
	members []meta.Node
}

func (a *admitter) ProposeMeta([]byte) (uint64, error) { return 0, raft.ErrNotLeader }

func (a *admitter) Admit(n meta.Node, fresh, forwarded bool) ([]meta.Node, uint64, error) {
	if a.leader != "" {
		if forwarded {
			return nil, 0, raft.ErrNotLeader
		}
		return a.link.ForwardJoin(a.leader, n, fresh)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.members {
		if m.ID == n.ID && m.Address != n.Address {
			return nil, 0, &meta.Refused{Code: meta.CodeInvalidNode, Message: "node ID " + string(n.ID) + " is taken"}
		}
	}
	a.members = append(a.members, n)
	return append([]meta.Node(nil), a.members...), uint64(len(a.members)), nil
}

// A node joins through a member that does not lead: the member hands the Join on to the leader
// over their connection, and the joiner learns the cluster's name and members. The refusals come
// back as *JoinRefused, with the reason: an ID taken, a data directory of another cluster.
func TestJoinThroughAMemberReachesTheLeader(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	newLink := func(id meta.NodeID) *Link {
		l, err := New(Config{Cluster: "c", NodeID: id, Listen: "127.0.0.1:0", Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	n1, n2 := newLink("1"), newLink("2")
	n1.AddPeer("2", n2.Addr())
	leader := &admitter{link: n2, members: []meta.Node{{ID: "1", Address: n1.Addr()}, {ID: "2", Address: n2.Addr()}}}
	n2.SetHandler(leader)
	n1.SetHandler(&admitter{link: n1, leader: "2"})
	for !n1.Connected("2") {
		time.Sleep(time.Millisecond)
	}

	join := func(id meta.NodeID, addr, cluster string) (JoinResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net against a hang
		defer cancel()
		return Join(ctx, JoinConfig{Through: n1.Addr(), Node: meta.Node{ID: id, Address: addr, Advertise: "127.0.0.1:5555"},
			Cluster: cluster, Logger: quiet})
	}
	res, err := join("4", "127.0.0.1:7004", "")
	if err != nil {
		t.Fatal(err)
	}
	if res.Cluster != "c" || len(res.Members) != 3 || res.Members[2] != (meta.Node{ID: "4", Address: "127.0.0.1:7004", Advertise: "127.0.0.1:5555"}) {
		t.Fatalf("joined %+v", res)
	}

	var refused *JoinRefused
	if _, err := join("2", "127.0.0.1:7005", ""); !errors.As(err, &refused) || !strings.Contains(refused.Message, "node ID 2 is taken") {
		t.Fatalf("a taken ID: %v, want it refused", err)
	}
	if _, err := join("5", "127.0.0.1:7005", "other"); !errors.As(err, &refused) || !strings.Contains(refused.Message, "belongs to cluster other") {
		t.Fatalf("another cluster's node: %v, want it refused", err)
	}
	if _, err := join("5", "127.0.0.1:7005", "c"); err != nil {
		t.Fatalf("a node of this cluster that asks again: %v", err)
	}
}

// A link listening on every interface gives the member the address it dialed from.
func TestDialableNamesAHost(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"0.0.0.0:7000", "10.1.2.3:7000"},
		{"[::]:7000", "10.1.2.3:7000"},
		{":7000", "10.1.2.3:7000"},
		{"10.0.0.4:7000", "10.0.0.4:7000"},
		{"node-4.example:7000", "node-4.example:7000"},
	} {
		if got := dialable(c.addr, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 41000}); got != c.want {
			t.Errorf("dialable(%q) = %q, want %q", c.addr, got, c.want)
		}
	}
}
