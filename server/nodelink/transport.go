package nodelink

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// Transport is one Raft group's transport on this node: its messages travel over the link's
// connections, named by the group. It starts no goroutine of its own: a group's requests are
// handled by a goroutine that runs while some wait (in order), heartbeats each by one of their
// own, and a pipeline by one while it is open.
type Transport struct {
	l       *Link
	group   string
	consume chan raft.RPC
	done    chan struct{}

	// beating is held shared while raft's heartbeat handler runs on a goroutine of the
	// transport's (fastHeartbeat), and taken by shut: raft's Shutdown closes the transport once
	// its own goroutines have stopped, and so returns only after every heartbeat handler has
	// too — the storage its caller closes next is not written by one (a term saved to a closed
	// store is a panic in raft).
	beating sync.RWMutex

	mu        sync.Mutex
	heartbeat func(raft.RPC)
	queue     []inbound // requests waiting for the group, in arrival order
	running   bool      // a goroutine is handing queue to raft
	closed    bool
	// unclaimed: made for requests to a group that had no open transport, which wait in it
	// until the group opens (wake.go); waker is asked about each of them meanwhile.
	unclaimed bool
	waker     Waker
	known     map[raft.ServerID]uint64   // the commit index each follower accepted (wake.go)
	contacts  map[raft.ServerID]*contact // each follower's last success, for heartbeats (spare.go)

	progress progress   // the followers' lag while this node leads the group (lag.go)
	heard    heardState // the leader's commit indexes received while this node follows (heard.go)
	// answered is the highest term raft has answered a request with on this transport: raft's
	// current term is at least this (see fastHeartbeat).
	answered atomic.Uint64
}

// inbound is a request from a peer waiting for the group.
type inbound struct {
	c    *conn
	id   uint32
	rpc  raft.RPC
	lazy bool // a heartbeat: answered lazily, as it was sent (conn.go)
}

var (
	_ raft.Transport   = (*Transport)(nil)
	_ raft.WithClose   = (*Transport)(nil)
	_ raft.WithPreVote = (*Transport)(nil)
)

// Transport returns the transport of this node's member of group. A group reopened gets a new
// one, which replaces the old (closed with its group) from then on; a group woken by a request
// gets the transport that request waits in (wake.go).
func (l *Link) Transport(group string) (raft.Transport, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	old := l.groups[group]
	if old != nil && old.claim() {
		l.mu.Unlock()
		return old, nil
	}
	t := &Transport{l: l, group: group, consume: make(chan raft.RPC), done: make(chan struct{})}
	l.groups[group] = t
	l.mu.Unlock()
	if old != nil {
		old.shut() // outside l.mu: it waits for a heartbeat raft is answering (beating)
	}
	return t, nil
}

// Consumer is where raft takes the group's requests from.
func (t *Transport) Consumer() <-chan raft.RPC { return t.consume }

// LocalAddr is this node's ID.
func (t *Transport) LocalAddr() raft.ServerAddress { return raft.ServerAddress(t.l.cfg.NodeID) }

// EncodePeer encodes a peer's address (its node ID).
func (t *Transport) EncodePeer(_ raft.ServerID, addr raft.ServerAddress) []byte { return []byte(addr) }

// DecodePeer decodes a peer's address.
func (t *Transport) DecodePeer(b []byte) raft.ServerAddress { return raft.ServerAddress(b) }

// SetHeartbeatHandler has fn answer heartbeats, apart from the group's other requests.
func (t *Transport) SetHeartbeatHandler(fn func(raft.RPC)) {
	t.mu.Lock()
	t.heartbeat = fn
	t.mu.Unlock()
}

// Close stops the transport: requests for the group are answered UnknownGroup until it opens
// again.
func (t *Transport) Close() error {
	t.l.mu.Lock()
	if t.l.groups[t.group] == t {
		delete(t.l.groups, t.group)
	}
	t.l.mu.Unlock()
	t.shut()
	return nil
}

func (t *Transport) shut() {
	t.beating.Lock()
	defer t.beating.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.done)
	}
}

// conn is the connection to the node of a Raft server ID (its node ID).
func (t *Transport) conn(id raft.ServerID) (*conn, error) {
	select {
	case <-t.done:
		return nil, raft.ErrTransportShutdown
	default:
	}
	return t.l.connTo(meta.NodeID(id))
}

// AppendEntries sends entries (or a heartbeat) to id and waits for its answer.
func (t *Transport) AppendEntries(id raft.ServerID, _ raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	if err := t.fit(args); err != nil {
		return err
	}
	if isHeartbeat(args) && t.spareHeartbeat(id, args, resp) { // spare.go
		t.l.stats.HeartbeatsSpared.Add(1)
		return nil
	}
	t.countAppend(args)
	t.progress.noteSend(args)
	sent := time.Now()
	if err := t.rpcAs(id, appendEntriesFrame(t.group, args), isHeartbeat(args), resp); err != nil {
		return err
	}
	t.noteAccepted(id, args, resp)
	t.noteContact(id, args, resp, sent)
	t.progress.noteAnswer(id, args, resp)
	return nil
}

// fit shortens args.Entries to what one frame carries: raft reads the request's entries after
// sending it, and sends the rest next. An entry too large for a frame alone cannot be sent.
func (t *Transport) fit(args *raft.AppendEntriesRequest) error {
	size := cluster.HeaderSize + 2 + len(t.group) + 5 + len(args.ID) + len(args.Addr) + 4*8 + 4
	for i, e := range args.Entries {
		size += 8 + 8 + 1 + 4 + len(e.Data) + 4 + len(e.Extensions) + 8
		if size > t.l.cfg.MaxFrame {
			if i == 0 {
				return fmt.Errorf("nodelink: log entry %d of group %s (%d bytes) is larger than a frame", e.Index, t.group, len(e.Data))
			}
			args.Entries = args.Entries[:i]
			return nil
		}
	}
	return nil
}

func (t *Transport) countAppend(args *raft.AppendEntriesRequest) {
	switch {
	case isHeartbeat(args):
		t.l.stats.HeartbeatsSent.Add(1)
	case len(args.Entries) == 0:
		t.l.stats.EmptyAppendsSent.Add(1)
	default:
		t.l.stats.AppendsSent.Add(1)
	}
}

// RequestVote asks id for its vote.
func (t *Transport) RequestVote(id raft.ServerID, _ raft.ServerAddress, args *raft.RequestVoteRequest,
	resp *raft.RequestVoteResponse) error {
	return t.rpc(id, requestVoteFrame(t.group, args), resp)
}

// RequestPreVote asks id whether it would vote.
func (t *Transport) RequestPreVote(id raft.ServerID, _ raft.ServerAddress, args *raft.RequestPreVoteRequest,
	resp *raft.RequestPreVoteResponse) error {
	return t.rpc(id, preVoteFrame(t.group, args), resp)
}

// TimeoutNow has id stand for election at once.
func (t *Transport) TimeoutNow(id raft.ServerID, _ raft.ServerAddress, args *raft.TimeoutNowRequest,
	resp *raft.TimeoutNowResponse) error {
	return t.rpc(id, &cluster.TimeoutNow{Group: t.group, Header: header(args.RPCHeader)}, resp)
}

func (t *Transport) rpc(id raft.ServerID, fr cluster.Frame, resp any) error {
	return t.rpcAs(id, fr, false, resp)
}

// rpcAs is rpc, the request sent lazily (conn.go's lazyDelay) when lazy is set: a heartbeat.
// Only a heartbeat: the other AppendEntries without entries carry the leader's commit index,
// which something waits on — made lazy too, they made a planned transfer's gap 16 ms instead of 4
// (docs/benchmarks.md, Run AN; which wait it lengthened was not traced).
func (t *Transport) rpcAs(id raft.ServerID, fr cluster.Frame, lazy bool, resp any) error {
	c, err := t.conn(id)
	if err != nil {
		return err
	}
	return c.roundTripAs(fr, lazy, t.l.cfg.Timeout, func(op cluster.Opcode, body []byte) error {
		return decodeResponse(op, body, resp)
	})
}

// raftRequest hands a peer's request to its group: decoded from a copy of the frame (raft keeps
// what it is given), heartbeats on their own goroutine, the rest in order.
func (c *conn) raftRequest(h cluster.Header, body []byte) error {
	body = clone(body)
	var rpc raft.RPC
	var group string
	heartbeat := false
	var ae *raft.AppendEntriesRequest // an AppendEntries with a leader commit index
	switch h.Opcode {
	case cluster.OpAppendEntries:
		var x cluster.AppendEntries
		if err := x.Decode(body); err != nil {
			return err
		}
		a := appendEntriesRequest(&x)
		group, rpc.Command, heartbeat = x.Group, a, isHeartbeat(a)
		if a.LeaderCommitIndex > 0 {
			ae = a
		}
	case cluster.OpRequestVote:
		var x cluster.RequestVote
		if err := x.Decode(body); err != nil {
			return err
		}
		group, rpc.Command = x.Group, requestVoteRequest(&x)
	case cluster.OpRequestPreVote:
		var x cluster.RequestPreVote
		if err := x.Decode(body); err != nil {
			return err
		}
		group, rpc.Command = x.Group, preVoteRequest(&x)
	case cluster.OpTimeoutNow:
		var x cluster.TimeoutNow
		if err := x.Decode(body); err != nil {
			return err
		}
		group, rpc.Command = x.Group, &raft.TimeoutNowRequest{RPCHeader: rpcHeader(x.Header)}
	case cluster.OpInstallSnapshot:
		var x cluster.InstallSnapshot
		if err := x.Decode(body); err != nil {
			return err
		}
		group, rpc.Command = x.Group, installSnapshotRequest(&x)
		rpc.Reader = c.receiveSnapshot(h.RequestID, int64(x.SnapshotSize))
	}
	t := c.l.waiting(group)
	if t == nil {
		if r, ok := rpc.Reader.(*snapReader); ok {
			c.dropSnapshot(h.RequestID, r)
		}
		return c.send(0, h.RequestID, &cluster.Error{Code: cluster.CodeUnknownGroup, Message: "no member of group " + group + " on node " + string(c.l.cfg.NodeID)})
	}
	if ae != nil {
		t.noteHeard(ae) // heard.go
	}
	in := inbound{c: c, id: h.RequestID, rpc: rpc, lazy: heartbeat}
	if heartbeat && !t.isUnclaimed() {
		if fn := t.fastHeartbeat(rpc.Command.(*raft.AppendEntriesRequest).Term); fn != nil {
			go t.serve(in, fn)
			return nil
		}
	}
	t.enqueue(in)
	return nil
}

// fastHeartbeat returns raft's heartbeat handler when a heartbeat of term may take raft's fast
// path, nil when it must wait in line with the group's other requests. raft's handler runs on
// the caller's goroutine, beside raft's own: a heartbeat of a newer term makes raft a follower
// of that term there, while its leader loop may be appending a proposal — which raft then
// stamps with the new term, so that the new leader's entry at that index looks the same to the
// follower's check and the deposed leader's entry stays in its log, committed and applied where
// the others hold the new leader's (found by tools/chaos: a leader stopped by SIGSTOP, continued
// with requests waiting in its sockets). Only a heartbeat of a term raft has answered in already
// takes the fast path; a newer term's is handed to raft in order, on its own goroutine.
func (t *Transport) fastHeartbeat(term uint64) func(raft.RPC) {
	if term > t.answered.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heartbeat
}

// noteAnswered records the term of raft's answer to a request.
func (t *Transport) noteAnswered(resp any) {
	var term uint64
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		term = r.Term
	case *raft.RequestVoteResponse:
		term = r.Term
	case *raft.RequestPreVoteResponse:
		term = r.Term
	case *raft.InstallSnapshotResponse:
		term = r.Term
	default:
		return
	}
	for {
		old := t.answered.Load()
		if term <= old || t.answered.CompareAndSwap(old, term) {
			return
		}
	}
}

// enqueue queues a request for the group, starting the goroutine that hands them to raft.
func (t *Transport) enqueue(in inbound) {
	t.mu.Lock()
	t.queue = append(t.queue, in)
	start := !t.running
	t.running = true
	t.mu.Unlock()
	if start {
		go t.drain()
	}
}

// drain hands the queued requests to raft one at a time, in order, and ends when none is left.
func (t *Transport) drain() {
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.running = false
			t.queue = nil
			t.mu.Unlock()
			return
		}
		in := t.queue[0]
		t.queue[0] = inbound{}
		t.queue = t.queue[1:]
		t.mu.Unlock()
		t.serve(in, nil)
	}
}

// serve has raft answer one request (through fn, the heartbeat handler, when set) and sends the
// answer back.
func (t *Transport) serve(in inbound, fn func(raft.RPC)) {
	if fn == nil && t.askWaker(in) {
		return
	}
	ch := make(chan raft.RPCResponse, 1)
	in.rpc.RespChan = ch
	if fn != nil {
		if !t.beat(fn, in.rpc) {
			t.refuse(in)
			return
		}
	} else {
		select {
		case t.consume <- in.rpc:
		case <-t.done:
			t.refuse(in)
			return
		}
	}
	var resp raft.RPCResponse
	select {
	case resp = <-ch:
	case <-t.done:
		t.refuse(in)
		return
	}
	if r, ok := in.rpc.Reader.(*snapReader); ok {
		in.c.dropSnapshot(in.id, r)
	}
	if resp.Error != nil {
		_ = in.c.send(0, in.id, &cluster.Error{Code: cluster.CodeFailed, Message: resp.Error.Error()})
		return
	}
	t.noteAnswered(resp.Response)
	if fr := responseFrame(resp.Response); fr != nil {
		if in.lazy {
			_ = in.c.sendLazy(0, in.id, fr)
		} else {
			_ = in.c.send(0, in.id, fr)
		}
	}
}

// beat has raft's heartbeat handler fn answer rpc unless the transport is closed (beating).
func (t *Transport) beat(fn func(raft.RPC), rpc raft.RPC) bool {
	t.beating.RLock()
	defer t.beating.RUnlock()
	select {
	case <-t.done:
		return false
	default:
	}
	fn(rpc)
	return true
}

func (t *Transport) refuse(in inbound) {
	if r, ok := in.rpc.Reader.(*snapReader); ok {
		in.c.dropSnapshot(in.id, r)
	}
	_ = in.c.send(0, in.id, &cluster.Error{Code: cluster.CodeUnknownGroup, Message: "group " + t.group + " closed"})
}

// AppendEntriesPipeline opens a pipeline of AppendEntries to id over the current connection.
func (t *Transport) AppendEntriesPipeline(id raft.ServerID, _ raft.ServerAddress) (raft.AppendPipeline, error) {
	c, err := t.conn(id)
	if err != nil {
		return nil, err
	}
	p := &pipeline{t: t, c: c, peer: id, inflight: make(chan *appendFuture, t.l.cfg.MaxInFlight-1),
		out: make(chan raft.AppendFuture, t.l.cfg.MaxInFlight), done: make(chan struct{})}
	go p.deliver()
	return p, nil
}

// pipeline keeps up to MaxInFlight AppendEntries in flight to one peer; its goroutine hands
// their answers to raft in the order they were sent.
type pipeline struct {
	t        *Transport
	c        *conn
	peer     raft.ServerID
	inflight chan *appendFuture
	out      chan raft.AppendFuture
	done     chan struct{}
	once     sync.Once
}

// ErrPipelineClosed answers an append to a closed pipeline.
var ErrPipelineClosed = errors.New("nodelink: append pipeline closed")

func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	f := &appendFuture{start: time.Now(), args: args, resp: resp, ch: make(chan struct{})}
	select {
	case <-p.done:
		return nil, ErrPipelineClosed
	default:
	}
	if err := p.t.fit(args); err != nil {
		return nil, err
	}
	p.t.countAppend(args)
	p.t.progress.noteSend(args)
	id, err := p.c.call(appendEntriesFrame(p.t.group, args), func(op cluster.Opcode, body []byte, err error) {
		if err == nil {
			err = decodeResponse(op, body, resp)
		}
		if err == nil {
			p.t.noteAccepted(p.peer, args, resp)
			p.t.noteContact(p.peer, args, resp, f.start)
			p.t.progress.noteAnswer(p.peer, args, resp)
		}
		f.complete(err)
	})
	if err != nil {
		return nil, err
	}
	f.id = id
	select {
	case p.inflight <- f: // blocks while MaxInFlight are in flight: back-pressure
		return f, nil
	default:
	}
	// Full. Raft's reader of the answers (its pipelineDecode) stops at the first failed one and
	// then reads none: the answers it leaves fill out (as many as may be in flight), then
	// inflight, and a request behind them would wait for ever, and raft's replication with it
	// (its Shutdown too). Past the timeout raft gives the pipeline up.
	timer := time.NewTimer(p.t.l.cfg.Timeout)
	defer timer.Stop()
	select {
	case p.inflight <- f:
		return f, nil
	case <-p.done:
		return nil, ErrPipelineClosed
	case <-timer.C:
		p.c.forget(id)
		return nil, fmt.Errorf("nodelink: the append pipeline to %s stayed full for %v", p.c.peer, p.t.l.cfg.Timeout)
	}
}

func (p *pipeline) deliver() {
	for {
		select {
		case f := <-p.inflight:
			timer := time.NewTimer(p.t.l.cfg.Timeout)
			select {
			case <-f.ch:
			case <-timer.C:
				// The peer holds the answer back: fail it, as NetworkTransport's read deadline
				// does; raft leaves the pipeline for single requests.
				p.c.forget(f.id)
				f.complete(fmt.Errorf("nodelink: %s did not answer a pipelined AppendEntries within %v", p.c.peer, p.t.l.cfg.Timeout))
			case <-p.done:
				timer.Stop()
				return
			}
			timer.Stop()
			select {
			case p.out <- f:
			case <-p.done:
				return
			}
		case <-p.done:
			return
		}
	}
}

func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *pipeline) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

// appendFuture is a pipelined AppendEntries.
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	id    uint32
	ch    chan struct{}
	once  sync.Once
	err   error
}

func (f *appendFuture) complete(err error) {
	f.once.Do(func() {
		f.err = err
		close(f.ch)
	})
}

func (f *appendFuture) Error() error {
	<-f.ch
	return f.err
}
func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// ProposeMeta hands a meta entry to node, which leads the meta group, and returns its log index
// once applied there: raft.ErrNotLeader when it does not lead, a *meta.Refused when the meta
// state refused a command.
func (l *Link) ProposeMeta(node meta.NodeID, entry []byte) (uint64, error) {
	c, err := l.connTo(node)
	if err != nil {
		return 0, err
	}
	var index uint64
	err = c.roundTrip(&cluster.ProposeMeta{Entry: entry}, l.cfg.CallTimeout, func(op cluster.Opcode, body []byte) error {
		var x cluster.ProposeMetaResult
		if err := expect(op, cluster.OpProposeMetaResult, &x, body); err != nil {
			return err
		}
		index = x.Index
		if x.RefusedCode != 0 {
			return &meta.Refused{Code: meta.Code(x.RefusedCode), Message: x.RefusedMessage}
		}
		return nil
	})
	return index, err
}

// proposeMeta carries out a peer's ProposeMeta and answers it.
func (c *conn) proposeMeta(id uint32, entry []byte) {
	c.l.mu.Lock()
	h := c.l.handler
	c.l.mu.Unlock()
	if h == nil {
		_ = c.send(0, id, &cluster.Error{Code: cluster.CodeUnavailable, Message: "node " + string(c.l.cfg.NodeID) + " takes no meta changes yet"})
		return
	}
	index, err := h.ProposeMeta(entry)
	var refused *meta.Refused
	switch {
	case err == nil:
		_ = c.send(0, id, &cluster.ProposeMetaResult{Index: index})
	case errors.As(err, &refused):
		_ = c.send(0, id, &cluster.ProposeMetaResult{Index: index, RefusedCode: uint16(refused.Code), RefusedMessage: refused.Message})
	case errors.Is(err, raft.ErrNotLeader):
		_ = c.send(0, id, &cluster.Error{Code: cluster.CodeNotLeader, Message: err.Error()})
	default:
		_ = c.send(0, id, &cluster.Error{Code: cluster.CodeFailed, Message: fmt.Sprint(err)})
	}
}

var _ io.Reader = (*snapReader)(nil)
