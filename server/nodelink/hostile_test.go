package nodelink

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/generated/wire"
)

// rawPeer is a hand-driven peer of a link: it writes frames and reads the answers.
type rawPeer struct {
	t  *testing.T
	nc net.Conn
	fr *wire.FrameReader
}

func dialRaw(t *testing.T, addr string, hello *cluster.Hello) (*rawPeer, cluster.Header, cluster.Frame) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(time.Minute))
	p := &rawPeer{t: t, nc: nc, fr: wire.NewFrameReader(nc, cluster.MinFrameSize, cluster.MaxFrameSize)}
	p.write(0, 0, hello)
	h, fr := p.read()
	return p, h, fr
}

func (p *rawPeer) write(flags cluster.FrameFlags, id uint32, fr cluster.Frame) {
	if _, err := p.nc.Write(cluster.AppendFrame(nil, flags, id, fr)); err != nil {
		p.t.Fatal(err)
	}
}

// read reads the next frame (nil at the end of the connection).
func (p *rawPeer) read() (cluster.Header, cluster.Frame) {
	body, err := p.fr.Next()
	if err != nil {
		return cluster.Header{}, nil
	}
	h, rest, err := cluster.ParseHeader(body)
	if err != nil {
		p.t.Fatal(err)
	}
	fr, err := cluster.Decode(h.Opcode, rest)
	if err != nil {
		p.t.Fatal(err)
	}
	return h, fr
}

func TestAHostilePeerIsRefusedOrCutOff(t *testing.T) {
	l, err := New(Config{Cluster: "c", NodeID: "n5", Listen: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Transport("q"); err != nil {
		t.Fatal(err)
	}
	for _, hello := range []*cluster.Hello{
		{Cluster: "other", NodeID: "n1", Target: "n5"}, // another cluster
		{Cluster: "c", NodeID: "n1", Target: "n4"},     // another node
		{Cluster: "c", NodeID: "n9", Target: "n5"},     // a higher ID must be dialed, not dial
	} {
		_, _, fr := dialRaw(t, l.Addr(), hello)
		if e, ok := fr.(*cluster.Error); !ok || e.Code != cluster.CodeProtocol {
			t.Fatalf("%+v answered %+v", hello, fr)
		}
	}

	p, _, fr := dialRaw(t, l.Addr(), &cluster.Hello{Cluster: "c", NodeID: "n1", Target: "n5"})
	if ok, _ := fr.(*cluster.HelloOk); ok == nil || ok.NodeID != "n5" {
		t.Fatalf("Hello answered %+v", fr)
	}
	// A request for a group the node does not run, and an answer nobody asked for.
	p.write(0, 1, &cluster.RequestVote{Group: "nope", Term: 1})
	p.write(0, 9, &cluster.AppendEntriesResult{Term: 1})
	if h, fr := p.read(); h.RequestID != 1 || fr.(*cluster.Error).Code != cluster.CodeUnknownGroup {
		t.Fatalf("a vote of an unknown group answered %+v %+v", h, fr)
	}
	// A ProposeMeta without a handler.
	p.write(0, 2, &cluster.ProposeMeta{Entry: []byte("x")})
	if h, fr := p.read(); h.RequestID != 2 || fr.(*cluster.Error).Code != cluster.CodeUnavailable {
		t.Fatalf("ProposeMeta answered %+v %+v", h, fr)
	}
	// Snapshot chunks beyond the window close the connection.
	p.write(0, 3, &cluster.InstallSnapshot{Group: "q", Term: 1, SnapshotSize: 1 << 30})
	for range snapshotWindow + 1 {
		p.write(0, 3, &cluster.SnapshotChunk{Data: []byte("x")})
	}
	for {
		_, fr := p.read()
		if fr == nil {
			break // closed
		}
	}
	// A body that does not decode closes the connection too; the link serves the next one.
	p, _, _ = dialRaw(t, l.Addr(), &cluster.Hello{Cluster: "c", NodeID: "n1", Target: "n5"})
	if _, err := p.nc.Write([]byte{0, 0, 0, 8, byte(cluster.OpAppendEntries), 0, 0, 0, 0, 4, 0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	if _, fr := p.read(); fr != nil {
		t.Fatalf("a broken AppendEntries answered %+v", fr)
	}
	_, _, fr = dialRaw(t, l.Addr(), &cluster.Hello{Cluster: "c", NodeID: "n1", Target: "n5"})
	if _, ok := fr.(*cluster.HelloOk); !ok {
		t.Fatalf("the link refused a node after a broken connection: %+v", fr)
	}
}
