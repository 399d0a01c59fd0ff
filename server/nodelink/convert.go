package nodelink

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/filamq/fila/generated/cluster"
)

// Conversions between hashicorp/raft's messages and the inter-node protocol's frames
// (spec/cluster.yaml). Byte fields of a decoded frame alias its body: the link gives every
// frame it hands to raft a body of its own.

func header(h raft.RPCHeader) cluster.RpcHeader {
	return cluster.RpcHeader{ProtocolVersion: uint8(h.ProtocolVersion), ID: h.ID, Addr: h.Addr}
}

func rpcHeader(h cluster.RpcHeader) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(h.ProtocolVersion), ID: h.ID, Addr: h.Addr}
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func appendEntriesFrame(group string, a *raft.AppendEntriesRequest) *cluster.AppendEntries {
	f := &cluster.AppendEntries{Group: group, Header: header(a.RPCHeader), Term: a.Term, PrevLogEntry: a.PrevLogEntry,
		PrevLogTerm: a.PrevLogTerm, LeaderCommitIndex: a.LeaderCommitIndex}
	if len(a.Entries) > 0 {
		f.Entries = make([]cluster.LogEntry, len(a.Entries))
		for i, l := range a.Entries {
			f.Entries[i] = cluster.LogEntry{Index: l.Index, Term: l.Term, Type: uint8(l.Type), Data: l.Data,
				Extensions: l.Extensions, AppendedAt: unixNano(l.AppendedAt)}
		}
	}
	return f
}

// appendEntriesRequest is the request raft is handed for a peer's AppendEntries. Its commit
// index is the leader's, at most the index of the last entry the request carries (its
// PrevLogEntry when it carries none), as the Raft paper's receiver rule has it: hashicorp/raft
// takes min(leader's commit, its own last index), which commits entries past the request that
// the request's checks never covered. A deposed leader that has gone on appending entries of
// its old term (a process stopped and continued, SIGSTOP) holds such entries at indexes its
// successor committed others at, and an AppendEntries whose entries end before them — a
// probe, or one cut at MaxAppendEntries or at the frame size (fit) — would commit and apply
// them: a message its successor never had, a state that no longer matches the others'.
func appendEntriesRequest(f *cluster.AppendEntries) *raft.AppendEntriesRequest {
	lastNew := f.PrevLogEntry
	if n := len(f.Entries); n > 0 {
		lastNew = f.Entries[n-1].Index
	}
	a := &raft.AppendEntriesRequest{RPCHeader: rpcHeader(f.Header), Term: f.Term, Leader: f.Header.Addr,
		PrevLogEntry: f.PrevLogEntry, PrevLogTerm: f.PrevLogTerm, LeaderCommitIndex: min(f.LeaderCommitIndex, lastNew)}
	if len(f.Entries) > 0 {
		logs := make([]raft.Log, len(f.Entries))
		a.Entries = make([]*raft.Log, len(f.Entries))
		for i, e := range f.Entries {
			logs[i] = raft.Log{Index: e.Index, Term: e.Term, Type: raft.LogType(e.Type), Data: e.Data,
				Extensions: e.Extensions, AppendedAt: fromUnixNano(e.AppendedAt)}
			a.Entries[i] = &logs[i]
		}
	}
	return a
}

// isHeartbeat is NetworkTransport's test: a term, a leader, and nothing else.
func isHeartbeat(a *raft.AppendEntriesRequest) bool {
	return a.Term != 0 && len(a.Addr) != 0 && a.PrevLogEntry == 0 && a.PrevLogTerm == 0 &&
		len(a.Entries) == 0 && a.LeaderCommitIndex == 0
}

func appendEntriesResult(r *raft.AppendEntriesResponse) *cluster.AppendEntriesResult {
	return &cluster.AppendEntriesResult{Header: header(r.RPCHeader), Term: r.Term, LastLog: r.LastLog,
		Success: r.Success, NoRetryBackoff: r.NoRetryBackoff}
}

func (f *fromFrame) appendEntriesResponse(x *cluster.AppendEntriesResult, r *raft.AppendEntriesResponse) {
	*r = raft.AppendEntriesResponse{RPCHeader: f.header(x.Header), Term: x.Term, LastLog: x.LastLog,
		Success: x.Success, NoRetryBackoff: x.NoRetryBackoff}
}

// fromFrame copies the byte fields of responses, decoded in the connection's read buffer.
type fromFrame struct{}

func (fromFrame) header(h cluster.RpcHeader) raft.RPCHeader {
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(h.ProtocolVersion), ID: clone(h.ID), Addr: clone(h.Addr)}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func requestVoteFrame(group string, a *raft.RequestVoteRequest) *cluster.RequestVote {
	return &cluster.RequestVote{Group: group, Header: header(a.RPCHeader), Term: a.Term, LastLogIndex: a.LastLogIndex,
		LastLogTerm: a.LastLogTerm, LeadershipTransfer: a.LeadershipTransfer}
}

func requestVoteRequest(f *cluster.RequestVote) *raft.RequestVoteRequest {
	return &raft.RequestVoteRequest{RPCHeader: rpcHeader(f.Header), Term: f.Term, Candidate: f.Header.Addr,
		LastLogIndex: f.LastLogIndex, LastLogTerm: f.LastLogTerm, LeadershipTransfer: f.LeadershipTransfer}
}

func preVoteFrame(group string, a *raft.RequestPreVoteRequest) *cluster.RequestPreVote {
	return &cluster.RequestPreVote{Group: group, Header: header(a.RPCHeader), Term: a.Term,
		LastLogIndex: a.LastLogIndex, LastLogTerm: a.LastLogTerm}
}

func preVoteRequest(f *cluster.RequestPreVote) *raft.RequestPreVoteRequest {
	return &raft.RequestPreVoteRequest{RPCHeader: rpcHeader(f.Header), Term: f.Term, LastLogIndex: f.LastLogIndex,
		LastLogTerm: f.LastLogTerm}
}

func installSnapshotFrame(group string, a *raft.InstallSnapshotRequest) *cluster.InstallSnapshot {
	return &cluster.InstallSnapshot{Group: group, Header: header(a.RPCHeader), SnapshotVersion: uint8(a.SnapshotVersion),
		Term: a.Term, LastLogIndex: a.LastLogIndex, LastLogTerm: a.LastLogTerm, Configuration: a.Configuration,
		ConfigurationIndex: a.ConfigurationIndex, SnapshotSize: uint64(a.Size)}
}

func installSnapshotRequest(f *cluster.InstallSnapshot) *raft.InstallSnapshotRequest {
	return &raft.InstallSnapshotRequest{RPCHeader: rpcHeader(f.Header), SnapshotVersion: raft.SnapshotVersion(f.SnapshotVersion),
		Term: f.Term, Leader: f.Header.Addr, LastLogIndex: f.LastLogIndex, LastLogTerm: f.LastLogTerm,
		Configuration: f.Configuration, ConfigurationIndex: f.ConfigurationIndex, Size: int64(f.SnapshotSize)}
}

// responseFrame is the result frame of one of raft's responses.
func responseFrame(resp any) cluster.Frame {
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		return appendEntriesResult(r)
	case *raft.RequestVoteResponse:
		return &cluster.RequestVoteResult{Header: header(r.RPCHeader), Term: r.Term, Granted: r.Granted}
	case *raft.RequestPreVoteResponse:
		return &cluster.RequestPreVoteResult{Header: header(r.RPCHeader), Term: r.Term, Granted: r.Granted}
	case *raft.InstallSnapshotResponse:
		return &cluster.InstallSnapshotResult{Header: header(r.RPCHeader), Term: r.Term, Success: r.Success}
	case *raft.TimeoutNowResponse:
		return &cluster.TimeoutNowResult{Header: header(r.RPCHeader)}
	}
	return nil
}

// decodeResponse fills resp, one of raft's responses, from a result frame of opcode op.
func decodeResponse(op cluster.Opcode, body []byte, resp any) error {
	var f fromFrame
	switch r := resp.(type) {
	case *raft.AppendEntriesResponse:
		var x cluster.AppendEntriesResult
		if err := expect(op, cluster.OpAppendEntriesResult, &x, body); err != nil {
			return err
		}
		f.appendEntriesResponse(&x, r)
	case *raft.RequestVoteResponse:
		var x cluster.RequestVoteResult
		if err := expect(op, cluster.OpRequestVoteResult, &x, body); err != nil {
			return err
		}
		*r = raft.RequestVoteResponse{RPCHeader: f.header(x.Header), Term: x.Term, Granted: x.Granted}
	case *raft.RequestPreVoteResponse:
		var x cluster.RequestPreVoteResult
		if err := expect(op, cluster.OpRequestPreVoteResult, &x, body); err != nil {
			return err
		}
		*r = raft.RequestPreVoteResponse{RPCHeader: f.header(x.Header), Term: x.Term, Granted: x.Granted}
	case *raft.InstallSnapshotResponse:
		var x cluster.InstallSnapshotResult
		if err := expect(op, cluster.OpInstallSnapshotResult, &x, body); err != nil {
			return err
		}
		*r = raft.InstallSnapshotResponse{RPCHeader: f.header(x.Header), Term: x.Term, Success: x.Success}
	case *raft.TimeoutNowResponse:
		var x cluster.TimeoutNowResult
		if err := expect(op, cluster.OpTimeoutNowResult, &x, body); err != nil {
			return err
		}
		*r = raft.TimeoutNowResponse{RPCHeader: f.header(x.Header)}
	}
	return nil
}

// expect decodes body into fr, a frame of opcode want; an Error frame answers its error.
func expect(op, want cluster.Opcode, fr cluster.Frame, body []byte) error {
	switch op {
	case want:
		return fr.Decode(body)
	case cluster.OpError:
		return remoteError(body)
	}
	return &ProtocolError{Msg: "answered " + op.String() + " where " + want.String() + " was expected"}
}
