package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// queue create --shards N creates the queue through the HTTP admin API (FIBP's CreateQueue has no
// shard count), with its settings by name; a count out of 1..64 is refused before asking.
func TestQueueCreateSharded(t *testing.T) {
	for _, n := range []string{"0", "65"} {
		_, errOut, code, b := cli(t, "queue", "create", "orders", "--shards", n)
		if code != 2 || !strings.Contains(errOut, "a queue has 1 to 64 shards") || len(b.received) != 0 {
			t.Errorf("--shards %s: exit %d, stderr %q", n, code, errOut)
		}
	}
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/queues" || json.Unmarshal(body, &got) != nil {
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, `{"queue": "orders", "shards": 4}`)
	}))
	defer srv.Close()
	out, errOut, code, b := cli(t, "queue", "create", "orders", "--shards", "4", "--ordering", "grouped", "--ordering-key", "header:customer",
		"--max-attempts", "3", "--http-addr", strings.TrimPrefix(srv.URL, "http://"))
	if code != 0 || out != "queue \"orders\" created with 4 shards\n" || len(b.received) != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q, %d FIBP frames", code, out, errOut, len(b.received))
	}
	if got["name"] != "orders" || got["shards"] != 4.0 || got["ordering"] != "grouped" || got["ordering_key"] != "header:customer" ||
		got["max_attempts"] != 3.0 {
		t.Errorf("posted %v", got)
	}
}
