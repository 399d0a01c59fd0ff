package main

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// rebalanceBroker keeps the rebalancing mode SetRebalancing sets and shows it in
// GetClusterStatus, with the pause's end counted from the request.
type rebalanceBroker struct {
	mu      sync.Mutex
	mode    fibp.RebalancingMode
	pauseMs uint64
	ends    uint64
}

func (b *rebalanceBroker) handle(c *fibptest.Conn, f fibptest.Frame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch req := f.Frame.(type) {
	case *fibp.SetRebalancing:
		b.mode, b.pauseMs, b.ends = req.Mode, req.PauseMs, 0
		if req.Mode == fibp.RebalancingPaused {
			b.ends = uint64(time.Now().UnixMilli()) + req.PauseMs
		}
		c.Reply(f, &fibp.SetRebalancingResult{})
	case *fibp.GetClusterStatus:
		c.Reply(f, &fibp.GetClusterStatusResult{MetaLeaderNodeID: 1, Rebalancing: b.mode, RebalancingPauseEndsAt: b.ends,
			Nodes: []fibp.NodeStatus{{NodeID: 1, Addr: "127.0.0.1:5555", State: fibp.NodeStateUp}}})
	default:
		(&fakeBroker{}).handle(c, f)
	}
}

func TestClusterRebalanceShowsTheMode(t *testing.T) {
	b := &rebalanceBroker{}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	out, errOut, code := runCLI(t, "--addr", p.Addr(), "cluster", "rebalance", "disable")
	if code != 0 || out != "rebalancing: disabled (until 'fila cluster rebalance enable')\n" || b.mode != fibp.RebalancingDisabled {
		t.Errorf("disable: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	out, errOut, code = runCLI(t, "--addr", p.Addr(), "cluster", "rebalance", "pause", "90s")
	if code != 0 || !strings.HasPrefix(out, "rebalancing: paused until 20") || !strings.HasSuffix(out, "(it resumes by itself then)\n") ||
		b.mode != fibp.RebalancingPaused || b.pauseMs != 90000 {
		t.Errorf("pause 90s: exit %d, stderr %q, pause_ms %d:\n%s", code, errOut, b.pauseMs, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "rebalance", "pause", "1m")
	if code != 0 || !strings.Contains(out, `"rebalancing": 1`) && !strings.Contains(out, `"rebalancing": "paused"`) ||
		!strings.Contains(out, `"rebalancing_pause_ends_at": "20`) {
		t.Errorf("pause --json: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "cluster", "rebalance", "enable")
	if code != 0 || out != "rebalancing: enabled\n" || b.mode != fibp.RebalancingEnabled {
		t.Errorf("enable: exit %d:\n%s", code, out)
	}
	out, _, code = runCLI(t, "--addr", p.Addr(), "--json", "cluster", "rebalance", "enable")
	if code != 0 || strings.Contains(out, "pause_ends_at") {
		t.Errorf("enable --json: exit %d:\n%s", code, out)
	}
}

func TestClusterRebalanceBadInput(t *testing.T) {
	b := &rebalanceBroker{}
	p := fibptest.Start(t, fibptest.Options{Handler: b.handle})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "rebalance", "pause"}, "cluster rebalance pause needs DURATION"},
		{[]string{"cluster", "rebalance", "pause", "soon"}, `DURATION "soon" is not a duration of 1ms or more`},
		{[]string{"cluster", "rebalance", "pause", "0s"}, `DURATION "0s" is not a duration`},
		{[]string{"cluster", "rebalance", "pause", "--", "-5m"}, `DURATION "-5m" is not a duration`},
		{[]string{"cluster", "rebalance", "enable", "now"}, "takes no arguments"},
		{[]string{"cluster", "rebalance", "stop"}, `unknown command "stop"`},
	} {
		_, errOut, code := runCLI(t, append([]string{"--addr", p.Addr()}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
	if b.mode != fibp.RebalancingEnabled || b.pauseMs != 0 {
		t.Errorf("bad input reached the broker: mode %v, pause_ms %d", b.mode, b.pauseMs)
	}
}
