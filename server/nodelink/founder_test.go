package nodelink

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/server/meta"
)

// records is a Handler whose meta state records which nodes served, and where.
type records map[meta.NodeID]string

func (records) ProposeMeta([]byte) (uint64, error) { return 0, raft.ErrNotLeader }

func (r records) FounderServed(id meta.NodeID) (string, bool) {
	addr, ok := r[id]
	return addr, ok
}

// A founder on an empty data directory asks another whether it served: the answer comes from the
// other's records for a question about its own cluster; a node of another cluster, and one whose
// handler is not set yet, tell nothing; a founder that cannot be reached is an error.
func TestAFounderAsksWhetherItServed(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := New(Config{Cluster: "c", NodeID: "1", Listen: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a safety net against a hang
	defer cancel()
	ask := func(cluster string, id meta.NodeID) (string, bool) {
		t.Helper()
		addr, served, err := CheckFounder(ctx, l.Addr(), cluster, id, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return addr, served
	}
	if _, served := ask("c", "3"); served {
		t.Fatal("a node without a handler answered that node 3 served")
	}
	l.SetHandler(records{"3": "127.0.0.1:5563"})
	if addr, served := ask("c", "3"); !served || addr != "127.0.0.1:5563" {
		t.Fatalf("node 3: served %v at %q, want true at 127.0.0.1:5563", served, addr)
	}
	if _, served := ask("c", "2"); served {
		t.Fatal("node 2, which never served, was answered served")
	}
	if _, served := ask("other", "3"); served {
		t.Fatal("a question about another cluster was answered from this one's records")
	}
	if _, _, err := CheckFounder(ctx, freeTCPAddr(t), "c", "3", nil, time.Second); err == nil {
		t.Fatal("asking a founder that does not listen succeeded")
	}
}

// freeTCPAddr is a loopback address nothing listens on (one that did a moment ago).
func freeTCPAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
