package e2e

import (
	"testing"
	"time"

	"github.com/filamq/fila/client/fila"
)

// configMap lists the broker's config entries under prefix as a map.
func configMap(t *testing.T, c *fila.Client, prefix string) map[string]string {
	t.Helper()
	entries, err := c.ListConfig(testCtx(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for i, e := range entries {
		if i > 0 && entries[i-1].Key >= e.Key {
			t.Errorf("ListConfig is not sorted by key: %q before %q", entries[i-1].Key, e.Key)
		}
		m[e.Key] = e.Value
	}
	return m
}

// TestRuntimeConfig runs on a private broker: known keys change broker-wide behaviour.
func TestRuntimeConfig(t *testing.T) {
	t.Parallel()
	s := privateServer(t)
	c := dial(t, s.addr)
	checkConfigDefaults(t, c)
	checkUnknownConfigKeys(t, c)
	checkConfigValidation(t, c)
	zero, own := checkQuantumLive(t, c)
	checkNewDefaults(t, c, zero, own)
}

// checkConfigDefaults checks that ListConfig shows every known key with its default
// (concepts.md's server defaults).
func checkConfigDefaults(t *testing.T, c *fila.Client) {
	ctx := testCtx(t)
	want := map[string]string{
		"defaults.visibility_timeout_ms":  "30000",
		"defaults.max_attempts":           "10",
		"defaults.backoff":                "exponential",
		"defaults.backoff_initial_ms":     "1000",
		"defaults.backoff_max_ms":         "300000",
		"defaults.dedup_window_ms":        "300000",
		"defaults.reclaim_grace_ms":       "10000",
		"defaults.park_dead_letter_after": "10",
		"defaults.max_depth":              "0",
		"defaults.depth_policy":           "reject",
		"defaults.retention_ms":           "0",
		"defaults.max_delay_ms":           "604800000",
		"scheduler.quantum":               "1",
		"lua.timeout_ms":                  "10",
		"lua.reclassify_interval_ms":      "60000",
		"lua.request_budget_ms":           "100",
		"lua.reclassify_budget_ms":        "50",
		"dedup.max_identities_per_queue":  "2000000",
	}
	all := configMap(t, c, "")
	for k, v := range want {
		if all[k] != v {
			t.Errorf("ListConfig: %s = %q, want %q", k, all[k], v)
		}
		if got, err := c.GetConfig(ctx, k); err != nil || got != v {
			t.Errorf("GetConfig %s = %q, %v; want %q", k, got, err, v)
		}
	}
	if got := configMap(t, c, "defaults."); len(got) != 12 {
		t.Errorf("ListConfig(defaults.) = %v, want the 12 defaults.* keys", got)
	}
}

// checkUnknownConfigKeys checks that unknown keys are stored as given, and that an unset key is
// InvalidConfigValue.
func checkUnknownConfigKeys(t *testing.T, c *fila.Client) {
	ctx := testCtx(t)
	_, err := c.GetConfig(ctx, "app.greeting")
	wantCode(t, "GetConfig of an unset key", err, fila.ErrInvalidConfigValue)
	if err := c.SetConfig(ctx, "app.greeting", "hello, world"); err != nil {
		t.Fatal(err)
	}
	if v, err := c.GetConfig(ctx, "app.greeting"); err != nil || v != "hello, world" {
		t.Errorf("GetConfig app.greeting = %q, %v", v, err)
	}
	if err := c.SetConfig(ctx, "app.greeting", "bye"); err != nil {
		t.Fatal(err)
	}
	if got := configMap(t, c, "app."); len(got) != 1 || got["app.greeting"] != "bye" {
		t.Errorf("ListConfig(app.) = %v, want only app.greeting = bye", got)
	}
}

// checkConfigValidation checks that known keys are validated and that a refused value leaves
// the old one.
func checkConfigValidation(t *testing.T, c *fila.Client) {
	ctx := testCtx(t)
	for _, bad := range []struct{ key, value string }{
		{"scheduler.quantum", "0"},
		{"scheduler.quantum", "many"},
		{"defaults.visibility_timeout_ms", "-5"},
		{"defaults.visibility_timeout_ms", "86400000"}, // over the 12 h lease cap
		{"defaults.max_attempts", "0"},
		{"defaults.backoff", "sometimes"},
		{"lua.timeout_ms", ""},
		{"", "no key"},
	} {
		wantCode(t, "SetConfig "+bad.key+"="+bad.value, c.SetConfig(ctx, bad.key, bad.value), fila.ErrInvalidConfigValue)
	}
	if v, _ := c.GetConfig(ctx, "scheduler.quantum"); v != "1" {
		t.Errorf("scheduler.quantum = %q after refused values, want 1", v)
	}
}

// checkQuantumLive checks that known keys take effect live: the quantum shows in GetStats of an
// existing queue. It returns a queue created with every setting from the defaults (zero) and one
// with its own visibility timeout (own).
func checkQuantumLive(t *testing.T, c *fila.Client) (zero, own string) {
	ctx := testCtx(t)
	zero = createQueue(t, c, fila.QueueConfig{})                                   // every setting from the defaults
	own = createQueue(t, c, fila.QueueConfig{VisibilityTimeout: 20 * time.Second}) // its own lease
	if err := c.SetConfig(ctx, "scheduler.quantum", "3"); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, zero, "quantum 3", func(s *fila.QueueStats) bool { return s.Quantum == 3 })
	if v, _ := c.GetConfig(ctx, "scheduler.quantum"); v != "3" {
		t.Errorf("GetConfig scheduler.quantum = %q, want 3", v)
	}
	return zero, own
}

// checkNewDefaults checks that queues created with zeros follow changed defaults, while explicit
// settings stay.
func checkNewDefaults(t *testing.T, c *fila.Client, zero, own string) {
	ctx := testCtx(t)
	for k, v := range map[string]string{
		"defaults.visibility_timeout_ms": "1500",
		"defaults.max_attempts":          "2",
		"defaults.backoff":               "none",
	} {
		if err := c.SetConfig(ctx, k, v); err != nil {
			t.Fatalf("SetConfig %s=%s: %v", k, v, err)
		}
	}
	// Each change reaches the queues asynchronously, in order: once a later quantum change shows,
	// the defaults set before it are in effect too.
	if err := c.SetConfig(ctx, "scheduler.quantum", "2"); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, zero, "quantum 2", func(s *fila.QueueStats) bool { return s.Quantum == 2 })
	waitStats(t, c, own, "quantum 2", func(s *fila.QueueStats) bool { return s.Quantum == 2 })
	enqueue(t, c, fila.Message{Queue: zero, Payload: []byte("z")}, fila.Message{Queue: own, Payload: []byte("o")})
	zc := consume(t, c, zero, fila.ConsumeOptions{MaxUnacked: 1, DisableLeaseKeepAlive: true})
	d := next(t, zc)
	if leaseOf(d) != 1500*time.Millisecond {
		t.Errorf("lease of the zero-config queue = %v, want the new default 1.5s", leaseOf(d))
	}
	if err := d.Nack(ctx, "first", nil); err != nil {
		t.Fatal(err)
	}
	// max_attempts 2 and backoff none: the retry comes at once and the next failure dead-letters.
	d = next(t, zc)
	if leaseOf(d) != 1500*time.Millisecond {
		t.Errorf("retry lease %v, want the new default 1.5s", leaseOf(d))
	}
	if err := d.Nack(ctx, "second", nil); err != nil {
		t.Fatal(err)
	}
	waitStats(t, c, zero+".dlq", "the message dead-lettered by defaults.max_attempts", func(s *fila.QueueStats) bool { return s.Depth == 1 })

	oc := consume(t, c, own, fila.ConsumeOptions{MaxUnacked: 1})
	if d := next(t, oc); leaseOf(d) != 20*time.Second {
		t.Errorf("lease of the queue with its own visibility timeout = %v, want 20s", leaseOf(d))
	}
	// A queue created now uses the new defaults from the start.
	later := createQueue(t, c, fila.QueueConfig{})
	enqueue(t, c, fila.Message{Queue: later, Payload: []byte("l")})
	lc := consume(t, c, later, fila.ConsumeOptions{MaxUnacked: 1})
	if d := next(t, lc); leaseOf(d) != 1500*time.Millisecond {
		t.Errorf("lease of a queue created after the change = %v, want 1.5s", leaseOf(d))
	}
	if st := getStats(t, c, later); st.Quantum != 2 {
		t.Errorf("quantum of a queue created after the change = %d, want 2", st.Quantum)
	}
}
