package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// fila explain against a real broker: a message without subscriber, one behind it in its key, a
// delayed one, a fairness key; --json is the broker's answer; refusals are one line.
func TestExplainCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs fila-server")
	}
	const key = "bootstrap-key-of-the-explain-cli-test-0123456789"
	fibpAddr, httpAddr := startAuthServer(t, key)
	conn := []string{"--addr", fibpAddr, "--api-key", key, "--timeout", "20s"}
	fila := func(args ...string) string { t.Helper(); return filaOK(t, append(conn, args...)...) }
	web := "--http-addr=" + httpAddr

	fila("queue", "create", "orders")
	for _, p := range []string{"first", "second"} {
		fila("enqueue", "orders", p, "--fairness-key", "tenant-a")
	}
	fila("enqueue", "orders", "later", "--fairness-key", "tenant-b", "--delay", "1h")
	var page peekPage
	if err := json.Unmarshal([]byte(fila("--json", "queue", "peek", "orders", web)), &page); err != nil {
		t.Fatal(err)
	}
	first, second, later := page.Messages[0].ID, page.Messages[1].ID, page.Messages[2].ID

	out := fila("explain", "orders", first, web)
	if !strings.HasPrefix(out, "message "+first+" of orders: ready, not deliverable now\n") ||
		!strings.Contains(out, `fairness key "tenant-a"`) || !strings.Contains(out, "  - no_subscriber: no subscriber on the queue\n") {
		t.Fatalf("explain of the first message printed:\n%s", out)
	}
	if out := fila("explain", "orders", second, web); !strings.Contains(out, "  - key_backlog: 1 older message(s) of its fairness key ahead of it\n") {
		t.Fatalf("explain of the second message printed:\n%s", out)
	}
	if out := fila("explain", "orders", later, web); !strings.Contains(out, ": delayed, not deliverable now") ||
		!strings.Contains(out, "  - delayed: delayed until ") || !strings.Contains(out, "(in 59m") {
		t.Fatalf("explain of the delayed message printed:\n%s", out)
	}
	var x struct {
		ID             string `json:"id"`
		State          string `json:"state"`
		DeliverableNow bool   `json:"deliverable_now"`
		Reasons        []struct {
			Reason string `json:"reason"`
			Until  int64  `json:"until"`
		} `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(fila("--json", "explain", "orders", later, web)), &x); err != nil {
		t.Fatal(err)
	}
	if x.ID != later || x.State != "delayed" || x.DeliverableNow || len(x.Reasons) != 2 || x.Reasons[0].Reason != "delayed" ||
		x.Reasons[0].Until == 0 || x.Reasons[1].Reason != "no_subscriber" {
		t.Fatalf("explain --json: %+v", x)
	}

	out = fila("explain", "orders", "--key", "tenant-a", web)
	for _, want := range []string{`fairness key "tenant-a" of orders`, "backlog 2 (ready 2, held 0), in flight 0",
		"weight 1, deficit 0, quantum 1", "DRR round of 1 key(s): holds the turn", "its weighted share 50.0%",
		"  - no_subscriber: 2 message(s): no subscriber on the queue"} {
		if !strings.Contains(out, want) {
			t.Fatalf("explain --key printed, without %q:\n%s", want, out)
		}
	}

	if e := filaFailsWith(t, 2, append(conn, "explain", "orders", web)...); !strings.Contains(e, "needs QUEUE MSGID, or QUEUE --key KEY") {
		t.Fatalf("explain without an ID: %s", e)
	}
	if e := filaFailsWith(t, 1, append(conn, "explain", "nope", first, web)...); !strings.Contains(e, "the broker refused") {
		t.Fatalf("explain in an unknown queue: %s", e)
	}
	if e := filaFailsWith(t, 1, append(conn, "explain", "orders", "not-an-id", web)...); !strings.Contains(e, "the broker refused") {
		t.Fatalf("explain of a malformed ID: %s", e)
	}
}
