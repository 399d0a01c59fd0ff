package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/filamq/fila/client/internal/fibptest"
	"github.com/filamq/fila/generated/fibp"
)

// queue describe shows the queue limits, which are runtime config only: a queue.<name>.* key
// when set (queue orders.eu's own key is not orders'), else the defaults.* key; a dead-letter
// queue has none.
func TestQueueDescribeShowsTheLimits(t *testing.T) {
	config := []fibp.ConfigEntry{
		{Key: "defaults.max_depth", Value: "0"}, {Key: "defaults.depth_policy", Value: "reject"},
		{Key: "defaults.retention_ms", Value: "0"}, {Key: "defaults.max_delay_ms", Value: "604800000"},
		{Key: "defaults.max_attempts", Value: "10"},
		{Key: "queue.orders.max_depth", Value: "100000"}, {Key: "queue.orders.depth_policy", Value: "dead_letter_oldest"},
		{Key: "queue.orders.eu.retention_ms", Value: "60000"},
	}
	handle := func(c *fibptest.Conn, f fibptest.Frame) {
		switch req := f.Frame.(type) {
		case *fibp.GetStats:
			settings := map[string]string{"max_attempts": "0"}
			if req.Queue == "orders.dlq" {
				settings["dlq_of"] = "orders"
			}
			c.Reply(f, &fibp.GetStatsResult{Quantum: 1, Settings: settings})
		case *fibp.ListConfig:
			res := &fibp.ListConfigResult{}
			for _, e := range config {
				if strings.HasPrefix(e.Key, req.Prefix) {
					res.Entries = append(res.Entries, e)
				}
			}
			c.Reply(f, res)
		}
	}
	p := fibptest.Start(t, fibptest.Options{Handler: handle})
	var out, errOut bytes.Buffer
	code := runWith(context.Background(), []string{"--addr", p.Addr(), "--timeout", "5s", "queue", "describe", "orders"},
		strings.NewReader(""), &out, &errOut)
	if code != 0 || errOut.Len() != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	want := "SETTING        VALUE                  FOLLOWS\n" +
		"max_attempts   10                     defaults.max_attempts\n" +
		"quantum        1                      scheduler.quantum\n" +
		"max_depth      100000                 queue.orders.max_depth\n" +
		"depth_policy   dead_letter_oldest     queue.orders.depth_policy\n" +
		"retention_ms   0 (for ever)           defaults.retention_ms\n" +
		"max_delay_ms   604800000 (168h0m0s)   defaults.max_delay_ms\n"
	if out.String() != want {
		t.Errorf("describe printed\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	code = runWith(context.Background(), []string{"--addr", p.Addr(), "--timeout", "5s", "queue", "describe", "orders.dlq"},
		strings.NewReader(""), &out, &errOut)
	if code != 0 || strings.Contains(out.String(), "max_depth") {
		t.Errorf("a dead-letter queue, which has no limits, is described with them (exit %d):\n%s", code, out.String())
	}
}

// A negative --delay is refused before anything is sent (the SDK would send it as no delay).
func TestEnqueueRefusesANegativeDelay(t *testing.T) {
	_, errOut, code, b := cli(t, "enqueue", "orders", "--delay", "-5s", "x")
	b.mu.Lock()
	sent := len(b.received)
	b.mu.Unlock()
	if code != 2 || !strings.Contains(errOut, "cannot be negative") || sent != 0 {
		t.Fatalf("exit %d, stderr %q, %d frames sent", code, errOut, sent)
	}
}
