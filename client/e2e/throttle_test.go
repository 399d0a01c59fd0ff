package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// Throttles through the SDK's builder and the CLI, against the real server. The limits are per
// hour, so nothing regains room during the test and every count is exact.
func TestThrottleThroughSDKAndCLI(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	name := q + "-merchant"
	var msgs []fila.Message
	for _, m := range []string{"m1", "m1", "m2", "m1", "m2", "m1"} {
		msgs = append(msgs, fila.Message{Queue: q, Payload: []byte(m), Headers: map[string]string{"merchant": m}})
	}
	enqueue(t, c, msgs...)
	cons := consume(t, c, q, fila.ConsumeOptions{Throttles: []fila.Throttle{
		fila.NewThrottle(name).Limit(2, time.Hour).KeyedBy(fila.HeaderPart("merchant")),
	}})
	var got []string
	for range 4 {
		got = append(got, string(next(t, cons).Payload))
	}
	if want := []string{"m1", "m1", "m2", "m2"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
	st := waitStats(t, c, q, "two throttled", func(s *fila.QueueStats) bool { return s.Throttled == 2 })
	if len(st.ActiveThrottles) != 1 || st.ActiveThrottles[0].Name != name {
		t.Fatalf("active throttles %+v", st.ActiveThrottles)
	}

	kv := statsTable(t, cliOK(t, "", "throttle", "stats", name))
	for k, want := range map[string]string{"limits": "2/1h0m0s", "key": "header:merchant", "key missing": "shared_bucket",
		"subscribers": "1", "queues": q, "active buckets": "2", "buckets at limit": "2", "waiting": "2"} {
		if kv[k] != want {
			t.Errorf("throttle stats %s = %q, want %q", k, kv[k], want)
		}
	}
	out := cliOK(t, "", "throttle", "stats", name, "--top", "1")
	if rows := tableRows(out); len(rows["m1"]) != 4 || rows["m1"][1] != "2" || rows["m1"][2] != "2" || rows["m2"] != nil {
		t.Errorf("top bucket table:\n%s", out)
	}
	if rows := tableRows(cliOK(t, "", "throttle", "bucket", name, "m2")); len(rows["m2"]) != 4 || rows["m2"][1] != "2" || rows["m2"][2] != "0" {
		t.Errorf("bucket m2: %v", rows)
	}
	if rows := tableRows(cliOK(t, "", "throttle", "bucket", name, "--missing")); len(rows["(missing"]) != 5 ||
		rows["(missing"][3] != "0" || rows["(missing"][4] != "now" {
		t.Errorf("missing-key bucket: %v", rows)
	}
	wantCLIError(t, cli(t, "", "throttle", "stats", q+"-nope"), 1, "ThrottleNotFound")
	wantCLIError(t, cli(t, "", "throttle", "bucket", name, "--missing", "m1"), 2, "--missing")
}

func TestCLIConsumeDeclaresThrottles(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c, payloads(q, "p", 3)...)
	out := cliOK(t, "", "consume", q, "--ack", "--wait", "300ms", "--throttle", q+"-api=1/1h")
	if n := strings.Count(out, "queue="+q); n != 1 {
		t.Fatalf("consume with a 1-an-hour throttle printed %d deliveries:\n%s", n, out)
	}
	wantCLIError(t, cli(t, "", "consume", q, "--throttle", "api=fast"), 2, "bad throttle")
	wantCLIError(t, cli(t, "", "consume", q, "--throttle", "api=5/1s,10/1s"), 1, "InvalidThrottle")
}
