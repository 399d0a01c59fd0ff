package nodelink

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
	"github.com/filamq/fila/server/meta"
)

// tokenOwner answers token requests: n tokens each, and records what it was sent.
type tokenOwner struct {
	mu      sync.Mutex
	reqs    []*cluster.TokenRequest
	from    []meta.NodeID
	returns []*cluster.TokenReturn
}

func (o *tokenOwner) ServeTokens(from meta.NodeID, req *cluster.TokenRequest) *cluster.TokenGrant {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs = append(o.reqs, req)
	o.from = append(o.from, from)
	if req.Epoch != 2 {
		return &cluster.TokenGrant{ErrorCode: cluster.CodeNotLeader, ErrorMessage: "not the owner at that epoch", Epoch: 2}
	}
	return &cluster.TokenGrant{Epoch: 2, GrantSeq: uint64(len(o.reqs)), N: req.Want, LeaseMs: 200}
}

func (o *tokenOwner) ThrottleCounts(_ meta.NodeID, req *cluster.ThrottleCounts) *cluster.ThrottleCountsResult {
	x := &cluster.ThrottleCountsResult{Limits: []cluster.ThrottleLimit{{Max: 100, WindowMs: 1000}}, ActiveBuckets: 1}
	for _, b := range req.Buckets {
		x.Buckets = append(x.Buckets, cluster.BucketCounts{Counted: []uint64{uint64(len(b.Group))}, NextRoomAt: 7})
	}
	return x
}

func (o *tokenOwner) ThrottleWaiting(_ meta.NodeID, req *cluster.ThrottleWaiting) *cluster.ThrottleWaitingResult {
	return &cluster.ThrottleWaitingResult{Subscribers: 2, Queues: []string{req.Throttle + "-q"},
		Buckets: []cluster.BucketWaiting{{Group: []byte("k"), Waiting: 5}}}
}

func (o *tokenOwner) SettleTokens(_ meta.NodeID, ret *cluster.TokenReturn) *cluster.TokenReturnResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.returns = append(o.returns, ret)
	return &cluster.TokenReturnResult{}
}

// A TokenRequest reaches the owner's TokenServer with its bucket, limits and settlements, and its
// grant comes back; a refusal comes back as the owner wrote it; a node serving no tokens answers
// Unavailable; a TokenReturn reaches the owner; an unreachable node fails the request.
func TestTokenRequestsReachTheOwner(t *testing.T) {
	tr := newTrio(t, nil)
	req := &cluster.TokenRequest{Throttle: "t", Epoch: 2, Group: []byte("k1"), Seq: 7, Want: 4,
		Limits:  []cluster.ThrottleLimit{{Max: 100, WindowMs: 1000}},
		Returns: []cluster.GrantSettlement{{Epoch: 2, GrantSeq: 5, Unspent: 1}}}

	g, err := tr.links["n1"].RequestTokens("n2", req, time.Minute)
	if err != nil || g.ErrorCode != cluster.CodeUnavailable {
		t.Fatalf("a node serving no tokens answered %+v, %v", g, err)
	}

	var o tokenOwner
	tr.links["n2"].SetTokenServer(&o)
	g, err = tr.links["n1"].RequestTokens("n2", req, time.Minute)
	if err != nil || g.ErrorCode != cluster.CodeOk || g.N != 4 || g.LeaseMs != 200 || g.Epoch != 2 {
		t.Fatalf("grant %+v, %v", g, err)
	}
	o.mu.Lock()
	got, from := o.reqs[0], o.from[0]
	o.mu.Unlock()
	if from != "n1" {
		t.Fatalf("the owner heard the request from %q", from)
	}
	if got.Throttle != "t" || string(got.Group) != "k1" || got.Seq != 7 || len(got.Limits) != 1 || got.Limits[0].WindowMs != 1000 ||
		len(got.Returns) != 1 || got.Returns[0].Unspent != 1 {
		t.Fatalf("the owner was sent %+v", got)
	}

	stale := *req
	stale.Epoch = 1
	if g, err = tr.links["n3"].RequestTokens("n2", &stale, time.Minute); err != nil || g.ErrorCode != cluster.CodeNotLeader || g.N != 0 {
		t.Fatalf("a request of another epoch: %+v, %v", g, err)
	}

	ret := &cluster.TokenReturn{Throttle: "t", Epoch: 2, Missing: true, Returns: []cluster.GrantSettlement{{Epoch: 2, GrantSeq: 1, Unspent: 4}}}
	if err := tr.links["n1"].ReturnTokens("n2", ret, time.Minute); err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	rets := o.returns
	o.mu.Unlock()
	if len(rets) != 1 || !rets[0].Missing || rets[0].Returns[0].Unspent != 4 {
		t.Fatalf("the owner was returned %+v", rets)
	}

	x, err := tr.links["n3"].ThrottleCounts("n2", &cluster.ThrottleCounts{Throttle: "t", Epoch: 2,
		Buckets: []cluster.BucketRef{{Group: []byte("abc")}, {Missing: true}}}, time.Minute)
	if err != nil || len(x.Buckets) != 2 || x.Buckets[0].Counted[0] != 3 || x.Buckets[1].NextRoomAt != 7 || x.ActiveBuckets != 1 {
		t.Fatalf("ThrottleCounts: %+v, %v", x, err)
	}
	if x, err := tr.links["n2"].ThrottleCounts("n1", &cluster.ThrottleCounts{Throttle: "t"}, time.Minute); err != nil || x.ErrorCode != cluster.CodeUnavailable {
		t.Fatalf("ThrottleCounts of a node serving none: %+v, %v", x, err)
	}

	w, err := tr.links["n1"].ThrottleWaiting("n2", &cluster.ThrottleWaiting{Throttle: "t"}, time.Minute)
	if err != nil || w.Subscribers != 2 || len(w.Queues) != 1 || w.Queues[0] != "t-q" || len(w.Buckets) != 1 || string(w.Buckets[0].Group) != "k" {
		t.Fatalf("ThrottleWaiting: %+v, %v", w, err)
	}

	if err := tr.links["n3"].ReturnTokens("n1", ret, time.Minute); err == nil {
		t.Fatal("a node serving no tokens took a return")
	}
	var re *RemoteError
	if err := tr.links["n3"].ReturnTokens("n1", ret, time.Minute); !errors.As(err, &re) || re.Code != cluster.CodeUnavailable {
		t.Fatalf("a return to a node serving no tokens: %v", err)
	}
	if _, err := tr.links["n1"].RequestTokens("n9", req, time.Second); err == nil {
		t.Fatal("a request to an unknown node succeeded")
	}
}
