package nodelink_test

import (
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/generated/cluster"
)

// A broker serving throttle tokens over the link checks what it is sent: a request without limits
// or with a zero one is refused (Protocol, with the reason), one for a throttle it does not own
// (no owner yet, or another epoch) is answered NotLeader, and the counts of a throttle it does
// not own likewise; the part of a throttle no subscription declares there is empty.
func TestBrokersCheckTokenRequests(t *testing.T) {
	nodes := startBrokers(t)
	for _, n := range nodes {
		n.link.SetTokenServer(n.b)
	}
	from := nodes["n1"].link
	for _, c := range []struct {
		req  *cluster.TokenRequest
		code cluster.ErrorCode
		msg  string
	}{
		{&cluster.TokenRequest{Throttle: "t", Epoch: 1, Want: 1}, cluster.CodeProtocol, "1 to 64 limits"},
		{&cluster.TokenRequest{Throttle: "t", Epoch: 1, Want: 1, Limits: []cluster.ThrottleLimit{{Max: 0, WindowMs: 10}}}, cluster.CodeProtocol, "zero"},
		{&cluster.TokenRequest{Throttle: "t", Epoch: 1, Want: 1, Limits: []cluster.ThrottleLimit{{Max: 5, WindowMs: 10}}}, cluster.CodeNotLeader, "does not own"},
	} {
		g, err := from.RequestTokens("n2", c.req, time.Minute)
		if err != nil || g.ErrorCode != c.code || !strings.Contains(g.ErrorMessage, c.msg) || g.N != 0 {
			t.Fatalf("TokenRequest %+v: %+v, %v; want %v (%q)", c.req, g, err, c.code, c.msg)
		}
	}
	x, err := from.ThrottleCounts("n3", &cluster.ThrottleCounts{Throttle: "t", Epoch: 1}, time.Minute)
	if err != nil || x.ErrorCode != cluster.CodeNotLeader {
		t.Fatalf("ThrottleCounts of a throttle n3 does not own: %+v, %v", x, err)
	}
	w, err := from.ThrottleWaiting("n3", &cluster.ThrottleWaiting{Throttle: "t"}, time.Minute)
	if err != nil || w.Subscribers != 0 || len(w.Queues) != 0 || len(w.Buckets) != 0 {
		t.Fatalf("ThrottleWaiting of a throttle n3 has no subscription of: %+v, %v", w, err)
	}
	if err := from.ReturnTokens("n2", &cluster.TokenReturn{Throttle: "t", Epoch: 1,
		Returns: []cluster.GrantSettlement{{Epoch: 1, GrantSeq: 9, Unspent: 3}}}, time.Minute); err != nil {
		t.Fatalf("a settlement of a grant the node never made: %v", err)
	}
}
