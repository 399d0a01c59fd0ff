package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// wantCLIError checks a failed command: the exit code, nothing on stdout, and exactly one line on
// stderr that starts with "fila: " and contains want (typically the error code's name).
func wantCLIError(t *testing.T, r cliResult, code int, want string) {
	t.Helper()
	if r.code != code || r.stdout != "" || !strings.HasPrefix(r.stderr, "fila: ") ||
		strings.Count(r.stderr, "\n") != 1 || !strings.HasSuffix(r.stderr, "\n") || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d (want %d), stdout %q, stderr %q (want one line naming %s)", r.code, code, r.stdout, r.stderr, want)
	}
}

// tableRows parses a borderless table into rows of fields, keyed by the first field.
func tableRows(out string) map[string][]string {
	rows := map[string][]string{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	return rows
}

// statsTable parses the key/value table of `queue stats` (keys may contain spaces).
func statsTable(t *testing.T, out string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			break // the per-key table follows
		}
		i := strings.LastIndex(line, "   ")
		if i < 0 {
			t.Fatalf("stats line %q", line)
		}
		kv[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i:])
	}
	return kv
}

func TestCLIQueueLifecycle(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q, q2 := queueName(t), queueName(t)
	t.Cleanup(func() { cli(t, "", "queue", "delete", "--force", q); cli(t, "", "queue", "delete", "--force", q2) })
	checkCLIQueueCreate(t, q, q2)
	id1 := checkCLIEnqueue(t, q)
	checkCLIQueueList(t, q)
	checkCLIQueueStats(t, q)
	checkCLIConsumeAck(t, c, q, id1)
	checkCLIQueueUpdate(t, c, q)
	// queue delete (it still holds a leased message: --force), twice.
	if out := cliOK(t, "", "queue", "delete", "--force", q); out != `queue "`+q+`" deleted`+"\n" {
		t.Errorf("queue delete printed %q", out)
	}
	wantCLIError(t, cli(t, "", "queue", "delete", q), 1, "(QueueNotFound)")
	wantCLIError(t, cli(t, "", "queue", "stats", q+".dlq"), 1, "(QueueNotFound)")
}

// checkCLIQueueCreate creates q (text output) and q2 (--json), and the create errors.
func checkCLIQueueCreate(t *testing.T, q, q2 string) {
	if out := cliOK(t, "", "queue", "create", q, "--visibility-timeout", "30s", "--max-attempts", "1", "--backoff", "none"); out != `queue "`+q+`" created (id `+q+")\n" {
		t.Errorf("queue create printed %q", out)
	}
	var created map[string]string
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "queue", "create", q2)), &created); err != nil ||
		created["queue"] != q2 || created["queue_id"] == "" {
		t.Errorf("queue create --json = %v, %v", created, err)
	}
	wantCLIError(t, cli(t, "", "queue", "create", q), 1, "(QueueAlreadyExists)")
	wantCLIError(t, cli(t, "", "queue", "create", q+".dlq"), 1, "(ReservedQueueName)")
	wantCLIError(t, cli(t, "", "queue", "create", queueName(t), "--on-enqueue", writeFile(t, "hook.lua", "function on_enqueue(m) return nil")), 1, "(LuaCompilationError)")

}

// checkCLIEnqueue enqueues three messages to q: an argument with headers, fairness key and
// weight (its ID returned), one with --json, one from a file.
func checkCLIEnqueue(t *testing.T, q string) fila.MessageID {
	out := cliOK(t, "", "enqueue", q, "-H", "tenant=acme", "-H", "trace=t1", "--fairness-key", "acme", "--weight", "2", "hello")
	id1, err := fila.ParseMessageID(strings.TrimSpace(out))
	if err != nil || id1[6]>>4 != 7 {
		t.Fatalf("enqueue printed %q: %v", out, err)
	}
	var enq struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "enqueue", q, "second")), &enq); err != nil || enq.ID == "" || enq.Duplicate {
		t.Errorf("enqueue --json = %+v, %v", enq, err)
	}
	cliOK(t, "", "enqueue", q, "-f", writeFile(t, "payload.txt", "from a file"))
	wantCLIError(t, cli(t, "", "enqueue", queueName(t), "x"), 1, "(QueueNotFound)")

	return id1
}

// checkCLIQueueList checks queue list, table and JSON, with q's three messages.
func checkCLIQueueList(t *testing.T, q string) {
	rows := tableRows(cliOK(t, "", "queue", "list"))
	if h := rows["NAME"]; !slices.Equal(h, []string{"NAME", "DEPTH", "IN", "FLIGHT", "CONSUMERS"}) {
		t.Errorf("queue list header %v", h)
	}
	if r := rows[q]; !slices.Equal(r, []string{q, "3", "0", "0"}) {
		t.Errorf("queue list row %v, want %s 3 0 0", r, q)
	}
	if r := rows[q+".dlq"]; !slices.Equal(r, []string{q + ".dlq", "0", "0", "0"}) {
		t.Errorf("queue list DLQ row %v", r)
	}
	var l fila.QueueList
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "queue", "list")), &l); err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(l.Queues, func(qi fila.QueueInfo) bool { return qi.Name == q }); i < 0 || l.Queues[i].Depth != 3 {
		t.Errorf("queue list --json = %+v", l)
	}

}

// checkCLIQueueStats checks queue stats, table and JSON, and a missing queue's errors.
func checkCLIQueueStats(t *testing.T, q string) {
	out := cliOK(t, "", "queue", "stats", q)
	kv := statsTable(t, out)
	for k, v := range map[string]string{"queue": q, "depth": "3", "in flight": "0", "delayed": "0",
		"active fairness keys": "2", "active consumers": "0", "quantum": "1", "leader node": "-"} {
		if kv[k] != v {
			t.Errorf("queue stats %q = %q, want %q\n%s", k, kv[k], v, out)
		}
	}
	keys := tableRows(out)
	if r := keys["acme"]; !slices.Equal(r, []string{"acme", "1", "0", "2"}) {
		t.Errorf("per-key row %v, want acme 1 0 2\n%s", r, out)
	}
	if r := keys["default"]; !slices.Equal(r, []string{"default", "2", "0", "1"}) {
		t.Errorf("per-key row %v, want default 2 0 1\n%s", r, out)
	}
	var st fila.QueueStats
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "queue", "stats", q)), &st); err != nil {
		t.Fatal(err)
	}
	if st.Depth != 3 || st.ActiveFairnessKeys != 2 || len(st.PerKeyStats) != 2 || st.PerKeyStats[0] != (fila.FairnessKeyStat{Key: "acme", PendingCount: 1, Weight: 2}) {
		t.Errorf("queue stats --json = %+v", st)
	}
	missing := queueName(t)
	wantCLIError(t, cli(t, "", "queue", "stats", missing), 1, `queue "`+missing+`" not found (QueueNotFound)`)
	wantCLIError(t, cli(t, "", "--json", "queue", "stats", missing), 1, "(QueueNotFound)")

}

// checkCLIConsumeAck checks consume --ack --count 2: it prints exactly two and leases nothing more.
func checkCLIConsumeAck(t *testing.T, c *fila.Client, q string, id1 fila.MessageID) {
	out := cliOK(t, "", "consume", q, "--ack", "--count", "2")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], id1.String()+"  queue="+q+" attempt=1 fairness_key=\"acme\"") ||
		!strings.Contains(lines[0], `tenant="acme"`) || lines[1] != "hello" || lines[3] != "second" {
		t.Errorf("consume --ack --count 2 printed:\n%s", out)
	}
	if st := getStats(t, c, q); st.Depth != 1 || st.InFlight != 0 {
		t.Errorf("after consume --ack --count 2: %+v, want 1 waiting and nothing leased", st)
	}

}

// checkCLIQueueUpdate checks queue update: the new visibility timeout shows in the next lease
// (consume --json without --ack), and the update errors.
func checkCLIQueueUpdate(t *testing.T, c *fila.Client, q string) {
	if out := cliOK(t, "", "queue", "update", q, "--visibility-timeout", "2s"); out != `queue "`+q+`" updated`+"\n" {
		t.Errorf("queue update printed %q", out)
	}
	var d struct {
		ID             string    `json:"id"`
		Payload        string    `json:"payload"`
		AttemptCount   uint32    `json:"attempt_count"`
		LeasedAt       time.Time `json:"leased_at"`
		LeaseExpiresAt time.Time `json:"lease_expires_at"`
		Acked          bool      `json:"acked"`
	}
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "consume", q, "--count", "1")), &d); err != nil {
		t.Fatal(err)
	}
	if d.Payload != "from a file" || d.AttemptCount != 1 || d.Acked || d.LeaseExpiresAt.Sub(d.LeasedAt) != 2*time.Second {
		t.Errorf("consume --json = %+v, want the file payload, attempt 1, unacked, a 2s lease", d)
	}
	if st := getStats(t, c, q); st.InFlight != 1 {
		t.Errorf("the unacked delivery is not in flight: %+v", st)
	}
	wantCLIError(t, cli(t, "", "queue", "update", q), 2, "give at least one setting")
	missing := queueName(t)
	wantCLIError(t, cli(t, "", "queue", "update", missing, "--max-attempts", "3"), 1, "(QueueNotFound)")
	wantCLIError(t, cli(t, "", "queue", "update", q, "--backoff", "sometimes"), 2, "--backoff")

}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLIRedrive(t *testing.T) {
	t.Parallel()
	c := dial(t, "")
	q := createQueue(t, c, fastQueue(30*time.Second, 1))
	ids := deadLetter(t, c, q, 3)

	wantCLIError(t, cli(t, "", "redrive", q), 1, "(NotADLQ)")
	wantCLIError(t, cli(t, "", "redrive", queueName(t)+".dlq"), 1, "(QueueNotFound)")
	if out := cliOK(t, "", "redrive", q+".dlq", "--count", "2"); out != "redriven 2; left in "+q+".dlq: 0 unclassified, 0 rejected by script\n" {
		t.Errorf("redrive --count 2 printed %q", out)
	}
	var res fila.RedriveResult
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "redrive", q+".dlq")), &res); err != nil || res != (fila.RedriveResult{Redriven: 1}) {
		t.Errorf("redrive --json = %+v, %v", res, err)
	}

	// The redriven messages, consumed as JSON lines: same IDs, attempt 1, redrive 1.
	out := cliOK(t, "", "--json", "consume", q, "--ack", "--count", "3")
	sc := bufio.NewScanner(strings.NewReader(out))
	var got []string
	for sc.Scan() {
		var d struct {
			ID           string `json:"id"`
			AttemptCount uint32 `json:"attempt_count"`
			RedriveCount uint32 `json:"redrive_count"`
			Acked        bool   `json:"acked"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("consume --json line %q: %v", sc.Text(), err)
		}
		if d.AttemptCount != 1 || d.RedriveCount != 1 || !d.Acked {
			t.Errorf("redriven delivery %+v, want attempt 1, redrive 1, acked", d)
		}
		got = append(got, d.ID)
	}
	for _, id := range ids {
		if !slices.Contains(got, id.String()) {
			t.Errorf("redriven IDs %v lack %v", got, id)
		}
	}
	if st := getStats(t, c, q); st.Depth != 0 || st.InFlight != 0 {
		t.Errorf("stats after consuming the redriven messages %+v", st)
	}
}

// TestCLIConfig runs on a private broker, since it changes the scheduler quantum.
func TestCLIConfig(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	q := createQueue(t, c, fila.QueueConfig{})

	if out := cliOK(t, s.addr, "config", "set", "scheduler.quantum", "4"); out != "scheduler.quantum = 4\n" {
		t.Errorf("config set printed %q", out)
	}
	if out := cliOK(t, s.addr, "config", "get", "scheduler.quantum"); out != "4\n" {
		t.Errorf("config get printed %q", out)
	}
	var kv map[string]string
	if err := json.Unmarshal([]byte(cliOK(t, s.addr, "--json", "config", "get", "scheduler.quantum")), &kv); err != nil ||
		kv["key"] != "scheduler.quantum" || kv["value"] != "4" {
		t.Errorf("config get --json = %v, %v", kv, err)
	}
	waitStats(t, c, q, "quantum 4", func(st *fila.QueueStats) bool { return st.Quantum == 4 })
	if kv := statsTable(t, cliOK(t, s.addr, "queue", "stats", q)); kv["quantum"] != "4" {
		t.Errorf("queue stats shows quantum %q, want 4", kv["quantum"])
	}

	wantCLIError(t, cli(t, s.addr, "config", "set", "scheduler.quantum", "0"), 1, "(InvalidConfigValue)")
	wantCLIError(t, cli(t, s.addr, "config", "set", "defaults.backoff", "sometimes"), 1, "(InvalidConfigValue)")
	wantCLIError(t, cli(t, s.addr, "config", "get", "app.unset"), 1, `config key "app.unset" is not set (InvalidConfigValue)`)
	cliOK(t, s.addr, "config", "set", "app.color", "blue")
	if out := cliOK(t, s.addr, "config", "list", "app."); out != "KEY         VALUE\napp.color   blue\n" {
		t.Errorf("config list app. printed %q", out)
	}
	rows := tableRows(cliOK(t, s.addr, "config", "list"))
	for k, v := range map[string]string{"scheduler.quantum": "4", "app.color": "blue", "defaults.visibility_timeout_ms": "30000",
		"defaults.max_attempts": "10", "defaults.backoff": "exponential"} {
		if r := rows[k]; len(r) != 2 || r[1] != v {
			t.Errorf("config list row %v, want %s %s", r, k, v)
		}
	}
	var entries []fila.ConfigEntry
	if err := json.Unmarshal([]byte(cliOK(t, s.addr, "--json", "config", "list", "scheduler.")), &entries); err != nil ||
		!slices.Equal(entries, []fila.ConfigEntry{{Key: "scheduler.quantum", Value: "4"}}) {
		t.Errorf("config list --json scheduler. = %+v, %v", entries, err)
	}
}

func TestCLIClusterStatus(t *testing.T) {
	t.Parallel()
	out := cliOK(t, "", "cluster", "status")
	rows := tableRows(out)
	if r := rows["rebalancing"]; !slices.Equal(r, []string{"rebalancing", "enabled"}) {
		t.Errorf("cluster status rebalancing row %v\n%s", r, out)
	}
	if !strings.Contains(out, "connected to   node 0 at "+sharedAddr+"\n") {
		t.Errorf("cluster status lacks the connection line:\n%s", out)
	}
	if r := rows["0"]; len(r) != 4 || r[1] != sharedAddr || r[2] != "up" {
		t.Errorf("cluster status node row %v, want 0 %s up N\n%s", r, sharedAddr, out)
	}
	// The enums print as names (fibp's MarshalText), so decode into plain types.
	var st struct {
		MetaLeader  uint64 `json:"meta_leader_node_id"`
		Rebalancing string `json:"rebalancing"`
		Nodes       []struct {
			NodeID uint64 `json:"node_id"`
			Addr   string `json:"addr"`
			State  string `json:"state"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(cliOK(t, "", "--json", "cluster", "status")), &st); err != nil {
		t.Fatal(err)
	}
	if st.Rebalancing != "enabled" || len(st.Nodes) != 1 || st.Nodes[0].NodeID != 0 || st.Nodes[0].Addr != sharedAddr || st.Nodes[0].State != "up" {
		t.Errorf("cluster status --json = %+v", st)
	}
}

func TestCLIErrors(t *testing.T) {
	t.Parallel()
	addr, err := closedAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	wantCLIError(t, cli(t, addr, "queue", "list"), 1, "connection refused")
	wantCLIError(t, cli(t, "", "queue", "create"), 2, "queue create needs NAME")
	wantCLIError(t, cli(t, "", "queue", "frobnicate"), 2, "unknown command")
	wantCLIError(t, cli(t, "", "queue", "create", queueName(t), "--backoff", "sometimes"), 2, "--backoff")
	wantCLIError(t, cli(t, "", "consume", queueName(t), "--count", "1"), 1, "(QueueNotFound)")
	wantCLIError(t, cli(t, "", "config", "get"), 2, "config get needs KEY")
}
