package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// routesBroker answers GetRoutes for two queues, one of them sharded.
func routesBroker(c *fibptest.Conn, f fibptest.Frame) {
	if _, ok := f.Frame.(*fibp.GetRoutes); ok {
		c.Reply(f, &fibp.GetRoutesResult{Entries: []fibp.RouteEntry{
			{Queue: "orders", LeaderNodeID: 2, LeaderAddr: "10.0.0.2:5555"},
			{Queue: "events", Shards: []fibp.ShardRoute{{ShardIndex: 0, LeaderNodeID: 1, LeaderAddr: "10.0.0.1:5555"}, {ShardIndex: 1}}},
		}})
		return
	}
	(&fakeBroker{}).handle(c, f)
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(context.Background(), append([]string{"--timeout", "5s"}, args...), strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestClusterRoutes(t *testing.T) {
	p := fibptest.Start(t, fibptest.Options{Handler: routesBroker})
	out, errOut, code := runCLI(t, "--addr", p.Addr(), "cluster", "routes")
	want := "QUEUE    SHARD   LEADER   ADDR\n" +
		"orders   -       2        10.0.0.2:5555\n" +
		"events   0       1        10.0.0.1:5555\n" +
		"events   1       -        -\n"
	if code != 0 || out != want {
		t.Errorf("exit %d, stderr %q, got:\n%s\nwant:\n%s", code, errOut, out, want)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "routes", "orders")
	if code != 0 || !strings.Contains(out, `"queue": "orders"`) || !strings.Contains(out, `"leader_addr": "10.0.0.2:5555"`) ||
		!strings.Contains(out, `"shard": 1`) {
		t.Errorf("--json: exit %d:\n%s", code, out)
	}
}

// --addr takes several seeds: the first that answers is used, and cluster status says which.
func TestAddrSeveralSeeds(t *testing.T) {
	b := &fakeBroker{}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	dead := deadAddr(t)
	out, errOut, code := runCLI(t, "--addr", dead+", "+p.Addr(), "cluster", "status")
	if code != 0 || !strings.Contains(out, "connected to   node 0 at "+p.Addr()) {
		t.Errorf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
	_, errOut, code = runCLI(t, "--addr", dead+","+deadAddr(t), "cluster", "status")
	if code == 0 || !strings.Contains(errOut, dead) {
		t.Errorf("no seed answering: exit %d, stderr %q", code, errOut)
	}
}

// consume on a node that does not lead the queue follows its NotLeader to the leader.
func TestConsumeFollowsNotLeader(t *testing.T) {
	leader := fibptest.Start(t, fibptest.Options{Handler: (&fakeBroker{}).handle})
	follower := fibptest.Start(t, fibptest.Options{Handler: func(c *fibptest.Conn, f fibptest.Frame) {
		if _, ok := f.Frame.(*fibp.Consume); ok {
			c.Reply(f, &fibp.Error{ErrorCode: fibp.CodeNotLeader, Message: "not the leader",
				Metadata: map[string]string{fibp.MetaLeaderAddr: leader.Addr()}})
		}
	}})
	out, errOut, code := runCLI(t, "--addr", follower.Addr(), "consume", "orders", "-n", "2")
	if code != 0 || !strings.Contains(out, "first") || !strings.Contains(out, "second") {
		t.Errorf("exit %d, stderr %q:\n%s", code, errOut, out)
	}
}

// deadAddr is a loopback address nothing listens on (it did a moment ago).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
