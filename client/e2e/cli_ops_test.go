package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCLINackAndAckByID(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 3))
	ids := enqueue(t, c, payloads(q, "m", 3)...)
	cliOK(t, "", "consume", q, "--count", "3") // leases all three and leaves them leased

	if out := cliOK(t, "", "nack", q, ids[0].String(), "--retry-after", "1h", "--error", "try later"); out != "nacked "+ids[0].String()+"\n" {
		t.Errorf("nack printed %q", out)
	}
	if out := cliOK(t, "", "ack", q, ids[1].String()); out != "acked "+ids[1].String()+"\n" {
		t.Errorf("ack printed %q", out)
	}
	st := getStats(t, c, q)
	if st.Delayed != 1 || st.Depth != 1 || st.InFlight != 1 {
		t.Errorf("after nack --retry-after 1h and ack: %+v, want one delayed, one in flight", st)
	}
	// The nacked message is no longer leased, so a second nack finds nothing to settle.
	wantCLIError(t, cli(t, "", "nack", q, ids[0].String()), 1, "(MessageNotFound)")
	wantCLIError(t, cli(t, "", "nack", q, "not-an-id"), 2, `"not-an-id" is not a message ID`)
	wantCLIError(t, cli(t, "", "nack", q), 2, "needs QUEUE and at least one message ID")
	wantCLIError(t, cli(t, "", "nack", q, ids[2].String(), "--retry-after", "soon"), 2, "--retry-after")
}

func TestCLIQueueDescribe(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := queueName(t)
	t.Cleanup(func() { cli(t, "", "queue", "delete", "--force", q) })
	cliOK(t, "", "queue", "create", q, "--max-attempts", "7", "--visibility-timeout", "45s",
		"--ordering", "grouped", "--ordering-key", "header:customer")

	rows := tableRows(cliOK(t, "", "queue", "describe", q))
	defaults, err := c.ListConfig(testCtx(t), "defaults.")
	if err != nil {
		t.Fatal(err)
	}
	def := map[string]string{}
	for _, e := range defaults {
		def[e.Key] = e.Value
	}
	for name, want := range map[string][]string{
		"SETTING":               {"SETTING", "VALUE", "FOLLOWS"},
		"max_attempts":          {"max_attempts", "7", "-"},
		"visibility_timeout_ms": {"visibility_timeout_ms", "45000", "(45s)", "-"},
		"backoff":               {"backoff", def["defaults.backoff"], "defaults.backoff"},
		"dedup_window_ms":       {"dedup_window_ms", def["defaults.dedup_window_ms"]},
		"delivery_durability":   {"delivery_durability", "committed", "-"},
		"on_enqueue_script":     {"on_enqueue_script", "none", "-"},
		"ordering":              {"ordering", "grouped", "-"},
		"ordering_key":          {"ordering_key", "header:customer", "-"},
		"dedup_key":             {"dedup_key", "-", "-"},
	} {
		got := rows[name]
		if len(got) < len(want) || strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("describe row %s = %q, want it to start with %q", name, got, want)
		}
	}
	if got := rows["dedup_window_ms"]; got[len(got)-1] != "defaults.dedup_window_ms" {
		t.Errorf("dedup_window_ms does not say it follows defaults.dedup_window_ms: %q", got)
	}
	if got := rows["quantum"]; len(got) != 3 || got[2] != "scheduler.quantum" {
		t.Errorf("describe row quantum = %q", got)
	}

	var js struct {
		Queue    string `json:"queue"`
		Settings []struct {
			Name, Value, Stored, Follows string
		} `json:"settings"`
	}
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "queue", "describe", q)), &js); err != nil || js.Queue != q || len(js.Settings) < 10 {
		t.Fatalf("describe --json = %+v, %v", js, err)
	}
	wantCLIError(t, cli(t, "", "queue", "describe", queueName(t)), 1, "(QueueNotFound)")
}

func TestCLIConfigRefusesUnknownBrokerKeys(t *testing.T) {
	t.Parallel()
	r := cli(t, "", "config", "set", "defaults.visiblity_timeout_ms", "1000")
	wantCLIError(t, r, 1, "(InvalidConfigValue)")
	for _, want := range []string{`unknown config key "defaults.visiblity_timeout_ms"`, "defaults.visibility_timeout_ms", "defaults.max_attempts"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the refusal does not mention %s: %s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "scheduler.quantum") {
		t.Errorf("the refusal of a defaults. key lists other namespaces: %s", r.stderr)
	}
	wantCLIError(t, cli(t, "", "config", "set", "scheduler.quantom", "3"), 1, "scheduler.quantum")
	wantCLIError(t, cli(t, "", "config", "set", "lua.timeout", "3"), 1, "lua.timeout_ms")
}

// A redrive in batches: while it runs, every message is counted in exactly one of the two queues
// (read the DLQ first and the sum is never below n; read the queue first and it is never above),
// and the CLI reports every message it moved.
func TestCLIRedriveInBatchesCountsEachMessageOnce(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	dlq := q + ".dlq"
	const n = 600
	deadLetter(t, c, q, n)

	done := make(chan cliResult, 1)
	go func() { done <- cli(t, "", "redrive", dlq, "--batch", "25") }()
	var mu sync.Mutex
	var violations []string
	check := func() {
		d1, q1 := getStats(t, c, dlq).Depth, getStats(t, c, q).Depth
		q2, d2 := getStats(t, c, q).Depth, getStats(t, c, dlq).Depth
		mu.Lock()
		defer mu.Unlock()
		if d1+q1 < n {
			violations = append(violations, fmt.Sprintf("dlq %d then queue %d: %d messages counted nowhere", d1, q1, n-d1-q1))
		}
		if q2+d2 > n {
			violations = append(violations, fmt.Sprintf("queue %d then dlq %d: %d messages counted twice", q2, d2, q2+d2-n))
		}
	}
	var r cliResult
	for running := true; running; {
		check()
		select {
		case r = <-done:
			running = false
		default:
		}
	}
	check()
	if len(violations) > 0 {
		t.Errorf("during the redrive:\n%s", strings.Join(violations, "\n"))
	}
	if r.code != 0 || r.stdout != fmt.Sprintf("redriven %d; left in %s: 0 unclassified, 0 rejected by script\n", n, dlq) {
		t.Errorf("redrive --batch 25: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if st := getStats(t, c, q); st.Depth != n {
		t.Errorf("after the redrive the queue holds %d, want %d", st.Depth, n)
	}
	wantCLIError(t, cli(t, "", "redrive", dlq, "--batch", "0"), 2, "--batch must be positive")
}

// Shell completion (cobra's __complete, which the scripts of `fila completion SHELL` call)
// offers the broker's queue names; redrive offers dead-letter queues only.
func TestCLICompletesQueueNames(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	lines := func(args ...string) []string {
		r := cli(t, "", append([]string{"__complete"}, args...)...)
		if r.code != 0 {
			t.Fatalf("__complete %q: exit %d, %s", args, r.code, r.stderr)
		}
		return strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	}
	for _, args := range [][]string{{"queue", "stats", q[:len(q)-2]}, {"enqueue", q}, {"consume", q}, {"nack", q}, {"queue", "describe", q}} {
		got := lines(args...)
		if !slices.Equal(got, []string{q, q + ".dlq", ":4"}) {
			t.Errorf("completion of %q = %q, want %s (and its DLQ) with the no-file directive", args, got, q)
		}
	}
	if got := lines("redrive", q); !slices.Equal(got, []string{q + ".dlq", ":4"}) {
		t.Errorf("completion of redrive %s = %q, want only the DLQ", q, got)
	}
	if got := lines("queue", "create", q); len(got) != 1 || !strings.HasPrefix(got[0], ":") {
		t.Errorf("queue create completed existing names: %q", got)
	}
	if !strings.Contains(cliOK(t, "", "completion", "bash"), "__start_fila") {
		t.Error("fila completion bash printed no bash completion script")
	}
}
