package nodelink

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
)

// A snapshot travels as InstallSnapshot, then SnapshotChunk frames of chunkSize bytes (the last
// flagged Last), at most snapshotWindow chunks ahead of the receiver, which returns a
// SnapshotCredit for each chunk raft has read. Other groups' messages pass between the chunks.
const (
	chunkSize      = 64 << 10
	snapshotWindow = 16
	// snapshotScale: the answer to a snapshot may take Timeout per this many bytes (raft
	// restores it before answering), as NetworkTransport's TimeoutScale.
	snapshotScale = 256 << 10
)

// InstallSnapshot streams a snapshot to id and waits for its answer.
func (t *Transport) InstallSnapshot(id raft.ServerID, _ raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	c, err := t.conn(id)
	if err != nil {
		return err
	}
	w := &snapWriter{credits: snapshotWindow, wake: make(chan struct{}, 1)}
	answered := make(chan error, 1)
	rid, err := c.callRegistered(installSnapshotFrame(t.group, args), func(op cluster.Opcode, body []byte, err error) {
		if err == nil {
			err = decodeResponse(op, body, resp)
		}
		answered <- err
	}, func(id uint32) { c.outSnap[id] = w })
	if err != nil {
		return err
	}
	defer func() {
		c.mu.Lock()
		delete(c.outSnap, rid)
		c.mu.Unlock()
	}()
	t.l.stats.SnapshotsSent.Add(1)
	if err, done := w.stream(t, c, rid, args.Size, data, answered); done {
		// Tell the receiver the rest is not coming (ignored when it answered already).
		_ = c.send(0, rid, &cluster.SnapshotChunk{})
		c.forget(rid)
		return err
	}
	timeout := t.l.cfg.Timeout * time.Duration(max(1, args.Size/snapshotScale))
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-answered:
		return err
	case <-timer.C:
		c.forget(rid)
		return fmt.Errorf("nodelink: %s did not answer a snapshot of group %s within %v", c.peer, t.group, timeout)
	}
}

// snapWriter is the sending side of a snapshot: the credits the receiver returned.
type snapWriter struct {
	mu      sync.Mutex
	credits int
	err     error
	wake    chan struct{}
}

func (w *snapWriter) credit(n int) {
	w.mu.Lock()
	w.credits += n
	w.mu.Unlock()
	w.signal()
}

func (w *snapWriter) fail(err error) {
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
	w.signal()
}

func (w *snapWriter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stream sends data's chunks as the receiver's credit allows. done reports that the snapshot
// ended before its last chunk was sent: answered early, or failed (err).
func (w *snapWriter) stream(t *Transport, c *conn, rid uint32, size int64, data io.Reader, answered chan error) (err error, done bool) {
	buf := make([]byte, chunkSize)
	var sent int64
	for {
		n, rerr := io.ReadFull(data, buf)
		last := rerr == io.EOF || rerr == io.ErrUnexpectedEOF || sent+int64(n) >= size
		if rerr != nil && !last {
			return fmt.Errorf("nodelink: reading the snapshot of group %s: %w", t.group, rerr), true
		}
		if err, done := w.await(t, answered); done {
			return err, true
		}
		var flags cluster.FrameFlags
		if last {
			flags = cluster.FlagLast
		}
		if err := c.send(flags, rid, &cluster.SnapshotChunk{Data: buf[:n]}); err != nil {
			return err, true
		}
		t.l.stats.SnapshotBytes.Add(uint64(n))
		sent += int64(n)
		if last {
			return nil, false
		}
	}
}

// await takes one credit, waiting for it; done reports the snapshot answered or failed first.
func (w *snapWriter) await(t *Transport, answered chan error) (err error, done bool) {
	timer := time.NewTimer(t.l.cfg.Timeout)
	defer timer.Stop()
	for {
		w.mu.Lock()
		credits, werr := w.credits, w.err
		if werr == nil && credits > 0 {
			w.credits--
		}
		w.mu.Unlock()
		if werr != nil {
			return werr, true
		}
		if credits > 0 {
			return nil, false
		}
		select {
		case <-w.wake:
		case err := <-answered:
			if err == nil {
				err = errors.New("nodelink: the snapshot was answered before it was sent whole")
			}
			return err, true
		case <-t.done:
			return raft.ErrTransportShutdown, true
		case <-timer.C:
			return fmt.Errorf("nodelink: the receiver of group %s's snapshot took no chunk within %v", t.group, t.l.cfg.Timeout), true
		}
	}
}

// callRegistered is call, with register run under the connection's lock once the request has
// its ID, before it is sent.
func (c *conn) callRegistered(fr cluster.Frame, onAnswer func(cluster.Opcode, []byte, error), register func(uint32)) (uint32, error) {
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		return 0, c.closedErr()
	}
	c.nextID++
	for c.nextID == 0 || c.pending[c.nextID] != nil {
		c.nextID++
	}
	id := c.nextID
	c.pending[id] = onAnswer
	register(id)
	c.mu.Unlock()
	if err := c.send(0, id, fr); err != nil {
		c.forget(id)
		return 0, err
	}
	return id, nil
}

// snapReader is the receiving side of a snapshot: raft reads the chunks as they come.
type snapReader struct {
	c  *conn
	id uint32

	mu     sync.Mutex
	chunks [][]byte
	last   bool
	err    error
	wake   chan struct{}
	cur    []byte
}

// receiveSnapshot registers the snapshot the peer's request rid announces.
func (c *conn) receiveSnapshot(rid uint32, _ int64) *snapReader {
	r := &snapReader{c: c, id: rid, wake: make(chan struct{}, 1)}
	c.mu.Lock()
	c.inSnaps[rid] = r
	c.mu.Unlock()
	return r
}

// dropSnapshot forgets a snapshot raft is done with (chunks still coming are ignored).
func (c *conn) dropSnapshot(rid uint32, r *snapReader) {
	c.mu.Lock()
	if c.inSnaps[rid] == r {
		delete(c.inSnaps, rid)
	}
	c.mu.Unlock()
	r.fail(errors.New("nodelink: the snapshot was answered"))
}

// snapshotChunk adds a chunk to its snapshot; one beyond the window breaks the protocol.
func (c *conn) snapshotChunk(h cluster.Header, body []byte) error {
	var x cluster.SnapshotChunk
	if err := x.Decode(body); err != nil {
		return err
	}
	c.mu.Lock()
	r := c.inSnaps[h.RequestID]
	c.mu.Unlock()
	if r == nil {
		return nil // raft answered it already
	}
	last := h.Flags&cluster.FlagLast != 0
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.last || r.err != nil:
		return nil
	case len(r.chunks) >= snapshotWindow:
		return &ProtocolError{Msg: "a snapshot's chunks overran the receiver's window"}
	case len(x.Data) == 0 && !last:
		r.err = errors.New("nodelink: the sender aborted the snapshot")
	default:
		r.chunks = append(r.chunks, clone(x.Data))
		r.last = last
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return nil
}

func (r *snapReader) fail(err error) {
	r.mu.Lock()
	if r.err == nil && !(r.last && len(r.chunks) == 0 && len(r.cur) == 0) {
		r.err = err
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Read reads the snapshot's bytes as they arrive, returning a credit for each chunk it
// finishes.
func (r *snapReader) Read(p []byte) (int, error) {
	for {
		r.mu.Lock()
		if len(r.cur) == 0 && len(r.chunks) > 0 {
			r.cur, r.chunks[0] = r.chunks[0], nil
			r.chunks = r.chunks[1:]
			if !r.last || len(r.chunks) > 0 {
				_ = r.c.send(0, r.id, &cluster.SnapshotCredit{Chunks: 1})
			}
		}
		if len(r.cur) > 0 {
			n := copy(p, r.cur)
			r.cur = r.cur[n:]
			r.mu.Unlock()
			return n, nil
		}
		last, err := r.last, r.err
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if last {
			return 0, io.EOF
		}
		<-r.wake
	}
}
